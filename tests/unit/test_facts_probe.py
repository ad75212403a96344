"""The batched probe script, its splitter, and snapshots: run for real with sh on this machine."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.errors import FactError
from gpunode.facts import install
from gpunode.facts.parse import parse
from gpunode.facts.probe import gather, script, split, venv_root
from gpunode.facts.snapshot import RawFacts, Section, load, save
from gpunode.facts.snippet import Snippet
from gpunode.transport.local import LocalTransport

DATA = Path(__file__).resolve().parents[1] / "data"


def test_script_is_valid_posix_sh():
    for shell in ("sh", "dash", "bash"):
        if shutil.which(shell):
            subprocess.run([shell, "-n"], input=script().encode(), check=True)


def run(snippets: list[Snippet], *args: str) -> str:
    text = script(snippets)
    return subprocess.run(["sh", "-c", text, "sh", "N0NCE", *args], capture_output=True, text=True,
                          check=True).stdout


def test_sections_keep_output_exactly_with_exit_codes():
    out = run([
        Snippet("no_newline", "printf 'a\\nb'"),
        Snippet("empty", "true"),
        Snippet("fails", "echo oops >&2; exit 3"),
        # A file that imitates our markers with another nonce must stay content.
        Snippet("fake", "printf '@@gpunode:other:rc 0\\n@@gpunode:other:section x\\n'"),
        Snippet("skipped", "echo never", when="false"),
    ])
    sections = split(out, "N0NCE")
    assert sections == {
        "no_newline": Section("a\nb", 0),
        "empty": Section("", 0),
        "fails": Section("oops\n", 3),
        "fake": Section("@@gpunode:other:rc 0\n@@gpunode:other:section x\n", 0),
    }


def test_a_later_section_can_depend_on_an_earlier_exit_code():
    out = run([Snippet("first", "exit 7"), Snippet("fallback", "echo ran", when='[ "$rc_first" != 0 ]')])
    assert split(out, "N0NCE")["fallback"] == Section("ran\n", 0)


def test_section_names_must_be_file_names():
    with pytest.raises(ValueError, match="must be"):
        script([Snippet("../etc", "true")])


def test_snapshot_round_trip_is_byte_exact(tmp_path):
    raw = RawFacts(target="t", sections={"a": Section("x\r\ny", 0), "b": Section("", 127)},
                   model_path="/m", venv="/v", gathered_at="2026-12-02T00:00:00Z", duration_s=0.5)
    save(raw, tmp_path / "snap")
    assert load(tmp_path / "snap") == raw


def test_loading_a_folder_that_is_not_a_snapshot_says_what_to_pass(tmp_path):
    with pytest.raises(FactError, match="no meta.json") as exc:
        load(tmp_path)
    assert "--save" in exc.value.hint


def test_recorded_snapshots_load():
    for folder in (DATA / "snapshots").iterdir():
        raw = load(folder)
        assert {"nvidia_smi", "os_release", "libs"} <= set(raw.sections)
        assert ("venv" in raw.sections) == bool(raw.venv), folder  # the venv section runs only for a given venv


def test_gather_on_this_machine_in_one_round_trip(tmp_path):
    calls = []

    class Counting(LocalTransport):
        def _exec(self, argv, stdin, sink, timeout):
            calls.append(argv)
            return super()._exec(argv, stdin, sink, timeout)

    venv = sys.prefix
    raw = gather(Counting("here"), venv=venv)
    assert len(calls) == 1
    facts = parse(raw)
    assert facts.target == "here"
    assert facts.install.python == f"{sys.version_info.major}.{sys.version_info.minor}"
    packages = install.dists(raw.ok("venv").splitlines())
    assert packages["pyyaml"] == importlib.metadata.version("pyyaml")
    assert facts.system.cpus >= 1 and facts.system.mem_total_bytes > 0
    assert facts.system.venv_root_free_bytes > 0
    save(raw, tmp_path / "snap")
    assert parse(load(tmp_path / "snap")) == facts


def test_venv_root_is_where_venvs_go():
    assert venv_root("/opt/gpunode/venvs/cu13-a") == "/opt/gpunode/venvs"
    assert venv_root("/root/venv/") == "/root"
    assert venv_root(None) == "/opt/gpunode/venvs"


def test_a_target_where_sh_cannot_run_is_a_fact_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))          # no sh to be found
    with pytest.raises(FactError, match="no sections") as exc:
        gather(LocalTransport("b"))
    assert exc.value.target == "b" and "sh: command not found" in exc.value.evidence
