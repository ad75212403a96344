"""--limit: Ansible's host patterns over hosts, containers and groups, through the CLI.

Each row plans the chosen targets from a recorded snapshot (`provision --facts SNAPSHOT --json`)
and reads which targets the plan events name. Every host is 127.0.0.1 port 1, where nothing
answers: the check that follows each plan fails to connect, so a run exits 2 either way, and
what tells a good --limit from a bad one is which plans came out and the message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "data" / "snapshots" / "h200"  # recorded: see its README.md

INVENTORY = """\
hosts:
  kpro6:
    address: 127.0.0.1
    port: 1
    containers:
      200: {gpus: [0]}
      201: {gpus: [0]}
      202: {gpus: [0]}
  kpro7:
    address: 127.0.0.1
    port: 1
    containers:
      300: {gpus: [0]}
  rented:
    address: 127.0.0.1
    port: 1
groups:
  blackwell: {hosts: [kpro6, kpro7]}
  cloud: {hosts: [rented]}
vars:
  model_source: /mnt/models/m
  tp: 1     # the snapshot holds no model folder to size: one GPU per server, said here
"""


def run(tmp_path: Path, capsys, *argv: str) -> tuple[int, list[str], str]:
    from gpunode.cli.main import main

    (tmp_path / "hosts.yml").write_text(INVENTORY)
    code: object = 0
    try:
        main(["gpunode", "provision", "-i", str(tmp_path / "hosts.yml"), "--facts", str(H200), "-j", *argv])
    except SystemExit as done:
        code = done.code
    out = capsys.readouterr()
    events = [json.loads(line) for line in out.out.splitlines() if line.strip()]
    return int(code or 0), [e["target"] for e in events if e["type"] == "plan"], out.err


@pytest.mark.parametrize("argv,chosen", [
    (["-l", "kpro*:!kpro6/202"], ["kpro6/200", "kpro6/201", "kpro7/300"]),
    (["--limit", "all:!blackwell"], ["rented"]),
    (["-l", "!kpro6"], ["kpro7/300", "rented"]),               # exclusions only start from every target
    (["-l", "blackwell:&kpro6"], ["kpro6/200", "kpro6/201", "kpro6/202"]),
    (["-l", "kpro6/20?,rented"], ["kpro6/200", "kpro6/201", "kpro6/202", "rented"]),  # `,` separates too
    (["-l", "~kpro[0-9]+/20[01]"], ["kpro6/200", "kpro6/201"]),
    (["-g", "blackwell", "-l", "!kpro7"], ["kpro6/200", "kpro6/201", "kpro6/202"]),  # narrows a group
    (["--host", "kpro6", "--ct", "201", "-l", "kpro6"], ["kpro6/201"]),
])
def test_limit_chooses_targets_as_ansible_does(argv, chosen, tmp_path, capsys):
    code, planned, err = run(tmp_path, capsys, *argv)
    assert "--limit" not in err and "--ct" not in err, err
    assert planned == chosen


@pytest.mark.parametrize("argv,message", [
    (["-l", "kpro8"], "--limit: 'kpro8' matches none of the targets"),
    (["-l", "kpro*:!kpro6/203"], "did you mean 'kpro6/202'?"),   # a typo in an exclusion spares nothing
    (["-l", "kpro6:!kpro6"], "--limit 'kpro6:!kpro6' leaves no target"),
    (["-l", "~kpro["], "--limit '~kpro[' is not a regular expression"),
    (["-g", "cloud", "-l", "kpro6"], "'kpro6' matches none of the targets to choose from (rented)"),
    (["--ct", "200", "-l", "kpro6"], "--ct needs --host"),
    # issue 41: an empty pattern was read as none, and the whole group ran (teardown too)
    (["-g", "blackwell", "-l", ""], "--limit is empty"),
    (["-g", "blackwell", "--limit", "  "], "--limit is empty"),
    (["-g", "", "-l", "kpro6"], "--group is empty"),
    (["-g", "blackwell", "--only", ""], "--only '' names no role"),
    (["-g", "blackwell", "--only", " , "], "names no role"),
])
def test_a_limit_that_chooses_badly_is_an_error(argv, message, tmp_path, capsys):
    code, planned, err = run(tmp_path, capsys, *argv)
    assert code == 2 and message in err, err
    assert planned == []


def test_limit_from_a_file_of_names(tmp_path, capsys):
    (tmp_path / "retry").write_text("# failed last time\nkpro6/201\nrented\n")
    code, planned, err = run(tmp_path, capsys, "-l", f"@{tmp_path}/retry")
    assert planned == ["kpro6/201", "rented"]
