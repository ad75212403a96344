"""A real Prometheus reads `inv prometheus-targets`' file and scrapes what gpunode provisioned
(docs/prometheus.md, issue 30).

The shared fleet's fresh cpu-profile container (tests/lab/shared_fleet.py), provisioned with
gpunode.yaml's prometheus_targets set (two vLLM-CPU servers and the router, all on loopback, as
README's first command does for 200). The servers listen on the container's
loopback and the lab host is on no network of the container's, so Prometheus runs where a
Prometheus on the node runs: the host's `prometheus` binary (Debian 12's package) in the
container's network namespace (`nsenter --net`), with docs/prometheus.md's configuration as
written there (only the file_sd path points at this test's folder), a temporary storage folder
and `--web.listen-address=127.0.0.1:<free port>`. Its HTTP API is asked the same way, until
every endpoint of the file is discovered and up (bounded polling, no sleeps).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from gpunode_lab import containers
from tests.lab.provision_helpers import INV, REPO, FreshContainer, poll
from tests.lab.shared_fleet import TARGET, VMID

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture(scope="module")
def box(fleet) -> FreshContainer:
    return fleet.box


@pytest.fixture(scope="module")
def inventory(fleet) -> Path:
    return fleet.inventory


def documented_config() -> str:
    """docs/prometheus.md's example configuration (its one yaml block), as a user copies it."""
    (block,) = re.findall(r"```yaml\n(.*?)```", (REPO / "docs" / "prometheus.md").read_text(), re.S)
    return block


def netns(box: FreshContainer) -> list[str]:
    pid = containers.init_pid(box.ct)
    assert pid is not None, f"container {VMID} is not running"
    return ["nsenter", f"--net=/proc/{pid}/ns/net", "--"]


def in_netns(box: FreshContainer, code: str, *args: str) -> str:
    """A Python snippet run in the container's network namespace; its stdout."""
    proc = subprocess.run([*netns(box), sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


FREE_PORT = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
GET = """import json, sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())
except OSError as exc:  # not listening yet, or gone: the caller polls or reports
    print(json.dumps({"status": "unreachable", "error": str(exc)}))
"""

@pytest.fixture(scope="module")
def provisioned(fleet) -> Path:
    """Provisioned with gpunode.yaml's prometheus_targets set: the file provision wrote."""
    return fleet.targets_written


@pytest.fixture(scope="module")
def targets_file(box, inventory, provisioned, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sd") / "fleet.json"
    proc = subprocess.run([str(INV), "prometheus-targets", "-i", str(inventory), "--host", "lab", "--ct", str(VMID),
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


def test_provision_wrote_the_same_file_as_the_task(provisioned, targets_file):
    assert json.loads(provisioned.read_text()) == json.loads(targets_file.read_text())


@pytest.fixture(scope="module")
def prometheus(box, targets_file, tmp_path_factory) -> Iterator[Any]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: scripts/setup installs Debian's package (scripts/host-packages.txt)"
    work = tmp_path_factory.mktemp("prometheus")
    config = work / "prometheus.yml"
    config.write_text(documented_config().replace("/etc/prometheus/gpunode/", f"{targets_file.parent}/"))
    port = int(in_netns(box, FREE_PORT))
    log = (work / "prometheus.log").open("w")
    proc = subprocess.Popen([*netns(box), binary, f"--config.file={config}", f"--storage.tsdb.path={work / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT)

    def api(path: str) -> dict[str, Any]:
        assert proc.poll() is None, f"prometheus exited {proc.returncode}:\n{(work / 'prometheus.log').read_text()}"
        return json.loads(in_netns(box, GET, f"http://127.0.0.1:{port}{path}"))

    api.log = work / "prometheus.log"  # type: ignore[attr-defined]
    try:
        yield api
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def active(api) -> dict[str, dict[str, Any]]:
    doc = api("/api/v1/targets?state=active")
    if doc.get("status") != "success":
        return {}
    return {t["labels"].get("gpunode_server", "?"): t for t in doc["data"]["activeTargets"]}


def test_prometheus_discovers_every_server_and_the_router_from_the_file_and_they_are_up(targets_file, prometheus):
    listed = json.loads(targets_file.read_text())
    assert sorted(e["labels"]["gpunode_server"] for e in listed) == ["cpu0", "cpu1", "router"]

    def all_up() -> dict[str, dict[str, Any]] | None:
        got = active(prometheus)
        return got if set(got) == {"cpu0", "cpu1", "router"} and all(t["health"] == "up" for t in got.values()) \
            else None

    # the first scrape comes within one scrape_interval (15 s) of discovery
    try:
        got = poll("Prometheus to scrape cpu0, cpu1 and the router", all_up, timeout=120, every=1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\ntargets: {json.dumps(active(prometheus))[:3000]}\n"
                             f"log: {prometheus.log.read_text()[-3000:]}") from None
    for name, port, job in (("cpu0", 30001, "gpunode-server"), ("cpu1", 30002, "gpunode-server"),
                            ("router", 29000, "gpunode-router")):
        labels = got[name]["labels"]
        assert labels["instance"] == f"127.0.0.1:{port}" and labels["job"] == job, labels
        assert labels["gpunode_target"] == TARGET and labels["gpunode_ct"] == str(VMID)
        assert labels["gpunode_model"] == "tiny-qwen3"
        assert got[name]["scrapeUrl"] == f"http://127.0.0.1:{port}/metrics"
    assert got["cpu0"]["labels"]["gpunode_engine"] == "vllm-cpu"


def test_a_servers_vllm_series_and_the_routers_series_carry_the_labels(prometheus):
    def query(expr: str) -> list[dict[str, Any]]:
        doc = prometheus(f"/api/v1/query?query={quote(expr)}")
        return doc["data"]["result"] if doc.get("status") == "success" else []

    def per_server() -> list[dict[str, Any]] | None:
        rows = query('vllm:num_requests_running{job="gpunode-server"}')
        return rows if len(rows) == 2 else None

    rows = poll("vllm:num_requests_running of both servers", per_server, timeout=60, every=1)
    assert sorted(r["metric"]["gpunode_server"] for r in rows) == ["cpu0", "cpu1"]
    assert {r["metric"]["gpunode_model"] for r in rows} == {"tiny-qwen3"}
    assert all(r["metric"]["gpunode_target"] == TARGET for r in rows)
    # the router's own series: both workers healthy, as it says on its metrics port
    health = poll("the router's smg_worker_health", lambda: query('smg_worker_health{job="gpunode-router"}'),
                  timeout=60, every=1)
    assert len(health) == 2 and all(r["value"][1] == "1" for r in health), health
