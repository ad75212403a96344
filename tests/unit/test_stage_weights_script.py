"""stage-weights.sh's guarantees under a cut, and its cost per file, on real folders.

A cut is made real and exact with the file size limit (`ulimit -f`): the copying program is
killed by SIGXFSZ when it writes past it, as a full /dev/shm or a killed session stops it
mid-file, and the script stops with the copy half done.
"""

import os
from pathlib import Path

import pytest

from gpunode.fleet import teardown
from gpunode.steps import render
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.weights import StagedWeights
from gpunode.transport import LocalTransport

SCRIPT = str(render.find("weights/stage-weights.sh"))
MIB = 1 << 20


def _cut_at(t, limit: int, src: Path, dest: Path):
    """Runs the script with writes limited to `limit` bytes a file (ulimit -f counts 512-byte blocks)."""
    return t.run(["sh", "-c", f'ulimit -f {limit // 512}; exec sh "$0" "$@"', SCRIPT, str(src), str(dest)])


def _real_files(folder: Path) -> dict[str, bytes]:
    """The files under their real names: what a server loading the folder would read. Only the
    script's own files (.gpunode-*, *.gpunode-part) are left out, as the lab's check does: a file in
    a folder of the script's counts (that is how the lab found the work folder in the copy)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and not p.name.startswith(".gpunode-") and not p.name.endswith(".gpunode-part")}


def _check(step, t):
    r = t.run(step.probe())
    return step.check(Probe(r.exit_code, r.stdout))


def _write(root: Path, sizes: dict[str, int]) -> dict[str, bytes]:
    data = {name: os.urandom(size) for name, size in sizes.items()}
    for name, content in data.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return data


def test_a_cut_mid_copy_of_a_large_file_resumes_from_its_last_whole_block(tmp_path):
    t = LocalTransport()
    src, dest = tmp_path / "src", tmp_path / "shm" / "m"
    big = "model-00001-of-00001.safetensors"  # 80 MiB: above the 64 MiB of a group, copied in chunks
    data = _write(src, {big: 80 * MIB, "config.json": 300, "tok/tokenizer.json": 5000})

    cut = _cut_at(t, 21 * MIB + 512, src, dest)
    assert cut.exit_code != 0
    assert not (dest / ".gpunode-manifest").exists()
    real = _real_files(dest)  # each file whole, or not there
    assert big not in real and all(data[name] == content for name, content in real.items())
    part = dest / (big + ".gpunode-part")
    assert part.stat().st_size == 21 * MIB + 512

    step = StagedWeights(source=str(src), dest=str(dest), script=SCRIPT)
    plan = _check(step, t)
    assert isinstance(plan, Change) and "resuming" in plan.summary, plan
    # The part's first block, changed here, stays as it is: the copy resumed after it (from
    # 20 MiB, its last whole 4 MiB block) instead of starting over.
    marker = b"\xab" * (4 * MIB)
    with part.open("r+b") as f:
        f.write(marker)
    seen = []
    step.on_progress = lambda done, total, name: seen.append((done, name))
    step.apply(t)
    staged = (dest / big).read_bytes()
    assert staged[:4 * MIB] == marker and staged[4 * MIB:] == data[big][4 * MIB:]
    assert not part.exists()
    assert [d for d, name in seen if name == big][0] >= 20 * MIB  # the first line counts what was there
    assert seen[-1][0] == sum(len(v) for v in data.values())
    assert isinstance(_check(step, t), NoChange)


def test_a_cut_while_a_group_of_small_files_is_copied_leaves_none_under_its_real_name(tmp_path):
    t = LocalTransport()
    src, dest = tmp_path / "src", tmp_path / "shm" / "m"
    # One group (all under 64 MiB), cut while b.bin is copied.
    data = _write(src, {"a.json": 1000, "b.bin": 12 * MIB, "sub/c.json": 2000})

    cut = _cut_at(t, 4 * MIB, src, dest)
    assert cut.exit_code != 0
    real = _real_files(dest)
    assert "b.bin" not in real and all(data[name] == content for name, content in real.items())
    assert not (dest / ".gpunode-manifest").exists()

    step = StagedWeights(source=str(src), dest=str(dest), script=SCRIPT)
    step.apply(t)
    assert _real_files(dest) == data
    assert sorted(p.name for p in dest.parent.iterdir()) == ["m"]  # the cut run's work folder is gone
    assert isinstance(_check(step, t), NoChange)


def _programs(t, tmp_path: Path, src: Path, dest: Path) -> list[str]:
    """The programs one run of the script starts (successful execve), sorted by name."""
    log = tmp_path / "execve.log"
    t.run(["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", str(log),
           "sh", SCRIPT, str(src), str(dest)], check=True)
    started, pending = [], {}
    for line in log.read_text().splitlines():  # "PID execve(...) = 0", or split in two when processes overlap
        pid, ok = line.split(" ", 1)[0], line.rstrip().endswith("= 0")
        if 'execve("' in line:
            name = line.split('execve("', 1)[1].split('"', 1)[0].rsplit("/", 1)[-1]
            if ok:
                started.append(name)
            elif "<unfinished" in line:
                pending[pid] = name
        elif "execve resumed>" in line and ok:
            started.append(pending.pop(pid))
    return sorted(started)


def test_1000_small_files_start_as_many_programs_as_10_and_the_rerun_only_a_few(tmp_path):
    """The cost per file is near cp's: the programs the script starts do not grow with the number
    of files (they did: a dd, stats, a grep, a mv per file), copying or re-running over the copy."""
    t = LocalTransport()
    runs = {}
    for n in (10, 1000):
        src, dest = tmp_path / f"src{n}", tmp_path / "shm" / f"m{n}"
        data = _write(src, {f"part-{i % 10}/file-{i}.json": 1 + i % 3000 for i in range(n)})
        first = _programs(t, tmp_path, src, dest)
        assert _real_files(dest) == data
        again = _programs(t, tmp_path, src, dest)
        assert isinstance(_check(StagedWeights(source=str(src), dest=str(dest), script=SCRIPT), t), NoChange)
        runs[n] = (first, again)
    assert runs[1000] == runs[10], runs
    first, again = runs[1000]
    # One cp for the files, one mv for the new folders and one for the manifest; the re-run copies nothing.
    assert first.count("cp") == 1 and first.count("mv") == 2 and "dd" not in first, first
    assert again == ["awk", "find", "find", "mv", "rm", "sh", "sort"], again


def test_a_changed_file_in_a_staged_folder_and_a_new_folder_are_staged_again(tmp_path):
    """Files go into folders the copy already has one by one (each rename atomic), new folders whole."""
    t = LocalTransport()
    src, dest = tmp_path / "src", tmp_path / "shm" / "m"
    data = _write(src, {f"part-{i % 3}/file-{i}.json": 100 + i for i in range(30)})
    step = StagedWeights(source=str(src), dest=str(dest), script=SCRIPT)
    step.apply(t)
    data.update(_write(src, {"part-1/file-4.json": 7, "part-2/new.json": 9, "new/deep/x.json": 11}))
    assert isinstance(_check(step, t), Change)
    step.apply(t)
    assert _real_files(dest) == data
    assert isinstance(_check(step, t), NoChange)


def test_large_files_copied_by_two_workers_add_up_in_one_progress(tmp_path):
    t = LocalTransport()
    src, dest = tmp_path / "src", tmp_path / "shm" / "m"
    data = _write(src, {"model-00001-of-00002.safetensors": 65 * MIB, "model-00002-of-00002.safetensors": 66 * MIB,
                        "config.json": 200})
    out = t.run(["env", "GPUNODE_STAGE_JOBS=2", "sh", SCRIPT, str(src), str(dest)], check=True).stdout
    done = [int(line.split()[1]) for line in out.splitlines() if line.startswith("@@progress ")]
    assert done == sorted(done) and len(done) > 2 and done[-1] == sum(len(v) for v in data.values()), out
    assert _real_files(dest) == data
    assert (dest / ".gpunode-manifest").read_text().count("\n") == 3


def _seen(folder: Path) -> list[str]:
    """Every file and folder under `folder` as `find` lists it: what a user or a server looking there finds."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_cut_while_a_shard_is_copied_leaves_only_model_files_in_the_model_folder(tmp_path):
    """The lab's cut (tests/lab/test_provision_cpu.py, test_7): small files staged, a shard's chunk
    copied, the session gone. The model folder then holds the staged files, the shard's part file
    and the script's own .gpunode-* files, no folder of the script's; the re-run leaves no folder
    of its own beside it either."""
    t = LocalTransport()
    shm = tmp_path / "shm"
    src, dest = tmp_path / "src", shm / "m"
    big = "model-00001-of-00001.safetensors"
    data = _write(src, {big: 80 * MIB, "config.json": 300, "tok/tokenizer.json": 5000})

    assert _cut_at(t, 8 * MIB, src, dest).exit_code != 0
    seen = _seen(dest)
    assert big + ".gpunode-part" in seen, seen
    assert [name for name in seen if name.split("/")[-1].startswith(".gpunode-")
            and not (dest / name).is_file()] == [], seen
    assert {name for name in seen if not name.split("/")[-1].startswith(".gpunode-")} \
        == {"config.json", "tok", "tok/tokenizer.json", big + ".gpunode-part"}, seen
    assert sorted(p.name for p in shm.iterdir()) == [".gpunode-work.m", "m"]

    step = StagedWeights(source=str(src), dest=str(dest), script=SCRIPT)
    assert isinstance(_check(step, t), Change)
    step.apply(t)
    assert _real_files(dest) == data
    assert [name for name in _seen(dest) if name.split("/")[-1].startswith(".gpunode-")] \
        == [".gpunode-manifest", ".gpunode-progress"]
    assert sorted(p.name for p in shm.iterdir()) == ["m"]
    assert isinstance(_check(step, t), NoChange)


def test_a_rerun_with_nothing_left_to_copy_removes_a_cut_runs_work_folder(tmp_path):
    """A run cut after its last rename left its work folder beside the copy (or, from the script
    before it moved there, inside it); the next run copies nothing and removes both."""
    t = LocalTransport()
    shm = tmp_path / "shm"
    src, dest = tmp_path / "src", shm / "m"
    data = _write(src, {"config.json": 300, "tok/tokenizer.json": 5000})
    step = StagedWeights(source=str(src), dest=str(dest), script=SCRIPT)
    step.apply(t)
    _write(shm / ".gpunode-work.m", {"new/config.json": 300, "group-0": 10})
    _write(dest / ".gpunode-work", {"new/tok/tokenizer.json": 5000})

    plan = _check(step, t)  # the copy is whole, but a run was cut before its end
    assert isinstance(plan, Change) and "a cut run's work folder is left" in plan.summary, plan
    out = t.run(["sh", SCRIPT, str(src), str(dest)], check=True).stdout
    assert out.splitlines() == ["@@total 5300", "@@progress 5300 5300", "@@done 5300"]  # nothing copied
    assert sorted(p.name for p in shm.iterdir()) == ["m"]
    assert _seen(dest) == [".gpunode-manifest", ".gpunode-progress", "config.json", "tok", "tok/tokenizer.json"]
    assert _real_files(dest) == data
    assert isinstance(_check(step, t), NoChange)


def test_teardown_lists_a_cut_staging_and_its_work_folder_with_the_staged_model(tmp_path):
    """`inv teardown` frees what a cut staging left in /dev/shm (its model folder has no manifest yet,
    its work folder is beside it), not only the staged folders; a folder gpunode did not stage stays."""
    t = LocalTransport()
    shm = tmp_path / "shm"
    src = tmp_path / "src"
    _write(src, {"model.safetensors": 80 * MIB, "config.json": 300})
    _write(shm / "not-ours", {"config.json": 300})
    t.run(["sh", SCRIPT, str(src), str(shm / "m")], check=True)
    assert _cut_at(t, 8 * MIB, src, shm / "cut").exit_code != 0
    assert (shm / ".gpunode-work.cut").is_dir()

    listed = teardown.plan(t, str(shm), str(tmp_path / "state"), purge=False)
    # (the host's own tmpfs mounts are searched too: only this test's folder is looked at)
    mine = sorted(p for _, p in listed.staged if p.startswith(str(shm)))
    assert mine == [str(shm / ".gpunode-work.cut"), str(shm / "cut"),
                                                            str(shm / "m")]


@pytest.mark.parametrize("name", ["tok\nenizer.json", "tab\tname.json", "sub/dir\nname/config.json"])
def test_a_name_with_a_line_break_or_a_tab_is_refused_before_anything_is_copied(tmp_path, name):
    """A name that splits the listing's lines once broke staging on every run and left a 0-byte file
    under a real name (issue 29); now the run stops first, saying what to rename."""
    t = LocalTransport()
    src, dest = tmp_path / "src", tmp_path / "shm" / "m"
    _write(src, {"config.json": 300, "model.safetensors": 2 * MIB, name: 100})
    run = t.run(["sh", SCRIPT, str(src), str(dest)])
    assert run.exit_code == 2 and "line break or a tab in its name" in run.stderr and "rename it" in run.stderr
    assert [p.name for p in dest.rglob("*") if not p.name.startswith(".gpunode-")] == []
    assert sorted(p.name for p in (tmp_path / "shm").iterdir()) == ["m"]
