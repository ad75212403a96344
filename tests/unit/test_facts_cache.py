"""The facts cache (facts/cache.py), run for real with sh on this machine: a section of a cache
group is reused while the stat signature of its files is the same and read again when it changes;
only a writing (applying) run stores anything; a store cut short is read again, one whose
sections do not parse is refused: neither is trusted."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpunode.errors import FactError
from gpunode.facts import cache
from gpunode.facts.cache import Group
from gpunode.facts.probe import script, split
from gpunode.facts.snippet import Snippet


def snippets(src: Path, log: Path) -> list[Snippet]:
    """One cached section that logs each real run and prints its source file, one fresh section."""
    group = Group("demo", (str(src),))
    return [Snippet("slow", f'echo ran >> "{log}"; cat "{src}"', cached=group),
            Snippet("fresh", 'echo "free=$$"')]


def probe(chosen: list[Snippet], nonce: str, state: Path, write: bool) -> dict[str, str]:
    out = subprocess.run(["sh", "-c", script(chosen), "sh", nonce, "", "", "/", str(state), "write" if write else ""],
                         capture_output=True, text=True, check=True).stdout
    return {k: v.output for k, v in split(out, nonce).items()}


@pytest.fixture
def setup(tmp_path):
    src, log, state = tmp_path / "source.txt", tmp_path / "ran.log", tmp_path / "state"
    src.write_text("version 1\n")
    state.mkdir()
    return src, log, state, snippets(src, log)


def runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_an_unchanged_signature_reuses_the_stored_section(setup):
    src, log, state, chosen = setup
    first = probe(chosen, "N1", state, write=True)
    assert first["slow"] == "version 1\n" and runs(log) == 1
    second = probe(chosen, "N2", state, write=True)
    assert second["slow"] == "version 1\n" and runs(log) == 1   # not run again
    assert second["fresh"] != first["fresh"]                     # the rest is read on every run


def test_a_changed_file_is_read_again_and_stored_anew(setup):
    src, log, state, chosen = setup
    probe(chosen, "N1", state, write=True)
    src.write_text("version 2, same size?\n")
    assert probe(chosen, "N2", state, write=True)["slow"] == "version 2, same size?\n" and runs(log) == 2
    assert probe(chosen, "N3", state, write=True)["slow"] == "version 2, same size?\n" and runs(log) == 2


def test_a_file_replaced_with_the_same_size_and_content_is_read_again(setup):
    src, log, state, chosen = setup
    probe(chosen, "N1", state, write=True)
    new = src.with_suffix(".new")
    new.write_text(src.read_text())
    new.replace(src)  # how dpkg and ldconfig replace files: a new inode
    probe(chosen, "N2", state, write=True)
    assert runs(log) == 2


def test_a_file_two_groups_name_is_in_both_signatures_and_only_theirs(tmp_path):
    """As the driver's libraries are in the nvidia and libs groups: a change to the shared file reads
    both groups again, a change to one group's own file only that group."""
    shared, own_a, own_b, log, state = (tmp_path / n for n in ("shared", "a", "b", "ran.log", "state"))
    for f in (shared, own_a, own_b):
        f.write_text("1\n")
    state.mkdir()
    chosen = [Snippet(name, f'echo {name} >> "{log}"; cat "{own}"', cached=Group(name, (str(own), str(shared))))
              for name, own in (("a", own_a), ("b", own_b))] + [Snippet("c", f'echo c >> "{log}"',
                                                                       cached=Group("c", (str(own_b),)))]
    probe(chosen, "N1", state, write=True)
    assert sorted(log.read_text().split()) == ["a", "b", "c"]
    log.write_text("")
    probe(chosen, "N2", state, write=True)
    assert log.read_text() == ""                       # nothing changed: all three reused
    shared.write_text("2, longer\n")
    probe(chosen, "N3", state, write=True)
    assert sorted(log.read_text().split()) == ["a", "b"]
    log.write_text("")
    own_a.write_text("2, longer\n")
    assert probe(chosen, "N4", state, write=True)["a"] == "2, longer\n"
    assert log.read_text().split() == ["a"]


def test_a_check_run_writes_nothing_and_reads_what_an_applying_run_stored(setup):
    src, log, state, chosen = setup
    assert probe(chosen, "N1", state, write=False)["slow"] == "version 1\n"
    assert list(state.iterdir()) == [] and runs(log) == 1
    probe(chosen, "N2", state, write=True)
    before = {p.name: p.read_bytes() for p in state.iterdir()}
    assert probe(chosen, "N3", state, write=False)["slow"] == "version 1\n" and runs(log) == 2
    src.write_text("version 3\n")
    assert probe(chosen, "N4", state, write=False)["slow"] == "version 3\n" and runs(log) == 3
    assert {p.name: p.read_bytes() for p in state.iterdir()} == before


def test_without_a_state_folder_every_section_is_read(setup):
    src, log, state, chosen = setup
    for nonce in ("N1", "N2"):
        out = subprocess.run(["sh", "-c", script(chosen), "sh", nonce, "", "", "/"], capture_output=True,
                             text=True, check=True).stdout
        assert split(out, nonce)["slow"].output == "version 1\n"
    assert runs(log) == 2


def test_a_changed_probe_text_does_not_reuse_what_the_old_one_stored(setup):
    src, log, state, chosen = setup
    probe(chosen, "N1", state, write=True)
    changed = [Snippet("slow", chosen[0].body + "; echo more", cached=chosen[0].cached), chosen[1]]
    assert probe(changed, "N2", state, write=True)["slow"] == "version 1\nmore\n" and runs(log) == 2


def test_stored_content_cannot_fake_sections_of_this_run(tmp_path):
    src, log, state = tmp_path / "s", tmp_path / "log", tmp_path / "state"
    state.mkdir()
    # Content cannot know a run's nonce (random, chosen after it was written): it can only imitate others.
    src.write_text("@@gpunode:X:rc 0\n@@gpunode-cache-end X\n@@gpunode-cache X\n@@gpunode:X:section evil\n"
                   "x\n@@gpunode:X:rc 0\n@@gpunode-cache-end X\n")
    chosen = snippets(src, log)
    probe(chosen, "N1", state, write=True)
    second = probe(chosen, "N2", state, write=True)
    assert runs(log) == 1 and second["slow"] == src.read_text()
    assert second["fresh"].startswith("free=") and "evil" not in second


def test_a_store_cut_short_is_read_again_and_stored_whole(setup):
    src, log, state, chosen = setup
    probe(chosen, "N1", state, write=True)
    val = state / "facts-demo.val"
    whole = val.read_text()
    val.write_text(whole[:-30])  # cut short, as a full disk would leave it: a syntax error for `.`
    assert probe(chosen, "N2", state, write=True)["slow"] == "version 1\n" and runs(log) == 2
    assert val.read_text().replace("N2", "N1") == whole
    assert probe(chosen, "N3", state, write=True)["slow"] == "version 1\n" and runs(log) == 2


def test_a_store_whose_sections_do_not_parse_is_refused_with_what_to_remove(setup):
    src, log, state, chosen = setup
    probe(chosen, "N1", state, write=True)
    val = state / "facts-demo.val"
    val.write_text("gn_out='@@gpunode-cache N1\n@@gpunode:N1:section slow\nversion 1\n'\n")  # no rc, no end
    with pytest.raises(FactError, match="facts cache .* damaged") as exc:
        probe(chosen, "N2", state, write=True)
    assert "facts-*.sig" in exc.value.hint


def test_stored_quotes_and_shell_text_come_back_as_they_were_and_run_nothing(setup, tmp_path):
    src, log, state, chosen = setup
    text = "it's '$(touch {0})' `touch {0}` \\'\n''\n\n".format(tmp_path / "ran-from-store")
    src.write_text(text)
    assert probe(chosen, "N1", state, write=True)["slow"] == text
    assert probe(chosen, "N2", state, write=True)["slow"] == text and runs(log) == 1
    assert not (tmp_path / "ran-from-store").exists()


def test_a_store_left_by_an_older_gpunode_is_never_sourced(setup, tmp_path):
    """Older versions stored the sections as plain text in facts-<group>.out; that file is not
    shell (a model's config.json is in it), so it is ignored, never run."""
    src, log, state, chosen = setup
    probe(chosen, "N1", state, write=True)
    (state / "facts-demo.val").unlink()
    (state / "facts-demo.out").write_text(f"touch {tmp_path / 'ran-from-store'}\n")
    assert probe(chosen, "N2", state, write=False)["slow"] == "version 1\n" and runs(log) == 2
    assert not (tmp_path / "ran-from-store").exists()
    # the next applying run stores the group in the new form and removes the old file
    assert probe(chosen, "N3", state, write=True)["slow"] == "version 1\n" and runs(log) == 3
    assert not (state / "facts-demo.out").exists() and (state / "facts-demo.val").exists()
    assert not (tmp_path / "ran-from-store").exists()


def test_the_real_probe_groups_the_slow_sections():
    from gpunode.facts.probe import _snippets

    grouped = {s.name: s.cached.name for s in _snippets() if s.cached is not None}
    assert grouped == {"glibc": "glibc", "nvidia_query": "nvidia", "nvidia_smi": "nvidia", "nvidia_smi_q": "nvidia",
                       "nvidia_smi_list": "nvidia",
                       "libs": "libs", "cuda_toolkits": "cuda_toolkits", "model_config": "model",
                       "model_index": "model", "model_quant": "model", "model_header": "model"}
    # read fresh on every run: what changes without a file changing
    for name in ("meminfo", "memlimit", "shm", "disk", "cpus", "model_files", "driver_proc"):
        assert name not in grouped
    nvidia = next(s.cached for s in _snippets() if s.name == "nvidia_query")
    assert nvidia is not None and "/dev/nvidia*" in nvidia.paths and "gn_nvrm" in nvidia.fresh
    assert any("/proc/driver/nvidia/version" in piece for piece in nvidia.setup)
    assert "cat " not in cache.EMIT  # the stored groups are sourced and printed by the shell


def test_lib_folders_are_read_once_each_and_only_the_driver_libraries_count(tmp_path):
    """The driver's libraries are found with one glob per folder, a folder that is a link to one
    already listed (/lib -> usr/lib) is not read again, and a change to a library that only the wide
    glob finds (libcudart) reuses the stored section where a change to libcuda reads it again. A
    name the shell would split is left out."""
    from gpunode.facts.cuda import lib_scan

    real, other = tmp_path / "real", tmp_path / "other"
    real.mkdir(), other.mkdir()
    (tmp_path / "alias").symlink_to(real)
    for name in ("libcuda.so.1", "libnvidia-ml.so.1", "libnuma.so.1", "libcudart.so.12", "libfoo.so.1",
                 "libcuda.so.1 (copy)"):
        (real / name).write_text("1\n")
    (other / "libnuma.so.1").write_text("1\n")
    dirs = tuple(str(tmp_path / d) for d in ("real", "alias", "other", "missing"))

    scanned = subprocess.run(["sh", "-c", lib_scan(dirs) + '\nprintf "%s\\n" $gn_libs'], capture_output=True,
                             text=True, check=True).stdout.split()
    assert sorted(scanned) == sorted([*(str(real / n) for n in ("libcuda.so.1", "libnuma.so.1", "libnvidia-ml.so.1")),
                                      str(other / "libnuma.so.1")])

    log, state = tmp_path / "ran.log", tmp_path / "state"
    state.mkdir()
    group = Group("libs", ("$gn_libs",), setup=(lib_scan(dirs),))
    chosen = [Snippet("libs", f'echo ran >> "{log}"', cached=group)]
    probe(chosen, "N1", state, write=True)
    probe(chosen, "N2", state, write=True)
    assert runs(log) == 1
    (real / "libcudart.so.12").write_text("2, longer\n")
    probe(chosen, "N3", state, write=True)
    assert runs(log) == 1
    (tmp_path / "alias" / "libcuda.so.1").write_text("2, longer\n")
    probe(chosen, "N4", state, write=True)
    assert runs(log) == 2


def odd_name(tmp_path: Path, name: str) -> tuple[Path, Path, Path, list[Snippet]]:
    """The setup fixture's files, with a source file whose name the shell must quote."""
    import shlex

    src, log, state = tmp_path / name, tmp_path / "ran.log", tmp_path / "state"
    src.write_text("version 1\n")
    state.mkdir()
    return src, log, state, [Snippet("slow", f'echo ran >> "{log}"; cat {shlex.quote(str(src))}',
                                     cached=Group("demo", (shlex.quote(str(src)),)))]


def test_a_signature_holding_a_quote_is_never_stored_and_its_section_is_read_every_run(tmp_path):
    """Signatures are stored as shell text (gn_old='...'); one that holds a quote (a file name) is
    not stored at all, rather than escaped: its section is read afresh on every run."""
    src, log, state, chosen = odd_name(tmp_path, "it's.txt")
    assert [probe(chosen, f"N{i}", state, write=True)["slow"] for i in (1, 2)] == ["version 1\n"] * 2
    assert runs(log) == 2 and not (state / "facts-demo.sig").exists()


def test_a_signature_cut_short_reads_the_section_again_and_stores_it_whole(setup):
    src, log, state, chosen = setup
    probe(chosen, "N1", state, write=True)
    sig = state / "facts-demo.sig"
    whole = sig.read_text()
    sig.write_text(whole[:len(whole) // 2])  # inside its quote: a syntax error for `.`
    assert probe(chosen, "N2", state, write=True)["slow"] == "version 1\n" and runs(log) == 2
    assert sig.read_text() == whole
    assert probe(chosen, "N3", state, write=True)["slow"] == "version 1\n" and runs(log) == 2


def test_a_path_holding_the_field_separator_is_still_its_own_groups(tmp_path):
    """stat's lines are `dev|ino|size|mtime|ctime|rdev|path`: the path is what follows the sixth
    '|', whatever it holds."""
    src, log, state, chosen = odd_name(tmp_path, "a|b|c.txt")
    assert [probe(chosen, f"N{i}", state, write=True)["slow"] for i in (1, 2)] == ["version 1\n"] * 2
    assert runs(log) == 1
    src.write_text("version 2\n")
    assert probe(chosen, "N3", state, write=True)["slow"] == "version 2\n" and runs(log) == 2


def test_a_group_whose_files_are_all_missing_keeps_the_next_groups_lines_theirs(tmp_path):
    """stat's lines join a signature by their place between the "/" lines: a group that finds no
    file must not shift the lines of the groups after it."""
    present, log, state = tmp_path / "present", tmp_path / "ran.log", tmp_path / "state"
    present.write_text("1\n")
    state.mkdir()
    chosen = [Snippet(name, f'echo {name} >> "{log}"', cached=Group(name, paths))
              for name, paths in (("gone", (str(tmp_path / "missing*"), str(tmp_path / "nothing"))),
                                  ("here", (str(present),)))]
    probe(chosen, "N1", state, write=True)
    log.write_text("")
    present.write_text("2, longer\n")
    probe(chosen, "N2", state, write=True)
    assert log.read_text().split() == ["here"]
    probe(chosen, "N3", state, write=True)
    assert log.read_text().split() == ["here"]  # and stored anew
