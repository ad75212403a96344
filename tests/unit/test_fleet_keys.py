"""Keys on every hop of a fleet (issue 44, docs/fleet.md 'Keys'): the members' server_api_key goes
to the router with each worker, the clients' key (fleet_router_api_key) to the router, and no key
into an argv, a unit, a 0644 file or a result.

The FleetWorkers scripts run here against a stand-in for sglang-router 0.3.2's worker API that
answers as the real one did (tests/data/fleet/endpoint: GET /workers, the 202 of POST; PUT
answers 202 like POST, run against the 0.3.2 wheel on loopback) and checks the Bearer key as
the real one does with --api-key (401 otherwise); the lab test runs the real router."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpunode.bench.runner import Endpoint, Layout, Spec, client_request
from gpunode.errors import InventoryError
from gpunode.fleet import endpoint, router_role
from gpunode.fleet import keys as fleet_keys
from gpunode.fleet import provision as fleetp
from gpunode.inventory import load
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.files import File, Template
from gpunode.steps.fleet import FleetWorkers
from gpunode.steps.trees import Absent

FACTS = SimpleNamespace(system=SimpleNamespace(pythons=("3.11",), default_python="3.11", arch="x86_64"))
CLIENT, K2, K4 = "client-key-7f3a9c", "server-key-2b8e1d", "server-key-4c9a0f"


def every(tmp_path: Path, router_vars: str = f"fleet_router_api_key: {CLIENT}") -> list[Any]:
    path = tmp_path / "hosts.yml"
    path.write_text(f"""
hosts:
  pve:
    address: 192.0.2.1
    containers:
      302: {{vars: {{fleet_address: 10.0.0.2, server_api_key: {K2}}}}}
      303: {{vars: {{fleet_router_only: true, fleet_address: 10.0.0.3{', ' + router_vars if router_vars else ''}}}}}
      304: {{vars: {{fleet_address: 10.0.0.4, server_api_key: {K4}}}}}
groups:
  job: {{hosts: [pve], vars: {{fleet_router: pve/303, host: 0.0.0.0}}}}
""")
    return fleetp.every_target(load(path), {})


def by_name(tmp_path: Path, **kw: Any) -> dict[str, Any]:
    return {t.name: t for t in every(tmp_path, **kw)}


def test_members_with_server_api_key_are_workers_with_their_key(tmp_path):
    t = by_name(tmp_path)
    plan = SimpleNamespace(servers=[SimpleNamespace(name="cpu0", port=30001)])
    (w,) = endpoint.workers(t["pve/302"], plan)  # once refused ("not supported yet")
    assert (w.url, w.key) == ("http://10.0.0.2:30001", K2)
    assert K2 not in repr(w)


def test_keyed_members_behind_a_router_without_a_client_key_are_refused_before_anything_runs(tmp_path):
    ts = every(tmp_path, router_vars="")
    with pytest.raises(InventoryError) as err:
        fleetp.check_members([t for t in ts if t.name == "pve/302"], ts)
    assert "pve/303" in str(err.value) and "fleet_router_api_key" in err.value.hint
    assert K2 not in str(err.value) + err.value.hint


def router_steps(tmp_path: Path) -> list[Any]:
    t = by_name(tmp_path)
    ws = [endpoint.Worker("http://10.0.0.2:30001", "pve/302", "cpu0", K2),
          endpoint.Worker("http://10.0.0.4:30001", "pve/304", "cpu0", K4)]
    return [s for p in router_role.build(t["pve/303"], FACTS, ws, "round_robin") for s in p.steps]


def test_the_keys_are_only_in_root_only_sensitive_files(tmp_path):
    steps = router_steps(tmp_path)
    files = {s.path: s for s in steps if isinstance(s, File | Template)}
    unit = files["/etc/systemd/system/gpunode-fleet-router.service"].content
    assert f"ExecStart=/opt/gpunode/venvs/router/bin/python {fleet_keys.LAUNCH_FILE} --host 10.0.0.3" in unit
    assert "EnvironmentFile=/etc/gpunode/fleet-router.secrets.env" in unit
    # workers join with their keys from the launch and FleetWorkers, never keyless from $WORKER_URLS
    assert "WORKER_URLS=\n" in files["/etc/gpunode/fleet-router.env"].content.replace('""', "")
    keyed = {p: f for p, f in files.items() if any(k in f.content for k in (CLIENT, K2, K4))}
    assert sorted(keyed) == ["/etc/gpunode/fleet-router.keys.json", "/etc/gpunode/fleet-router.secrets.env"]
    assert all(f.mode == 0o600 and f.owner == "root:root" and f.sensitive for f in keyed.values())
    assert json.loads(keyed[fleet_keys.KEYS_FILE].content) == {
        "client": CLIENT, "workers": {"http://10.0.0.2:30001": K2, "http://10.0.0.4:30001": K4}}
    (fw,) = [s for s in steps if isinstance(s, FleetWorkers)]
    argv = [*fw.probe(), *(w for c in fw.commands() for w in c.argv)]
    assert not any(k in w for k in (CLIENT, K2, K4) for w in argv)
    assert not [s for s in steps if isinstance(s, Absent) and "fleet-router" in s.path]


def test_without_a_client_key_the_key_files_go(tmp_path):
    t = by_name(tmp_path, router_vars="")
    steps = [s for p in router_role.build(t["pve/303"], FACTS, [], "round_robin") for s in p.steps]
    gone = {s.path for s in steps if isinstance(s, Absent)}
    assert {fleet_keys.KEYS_FILE, fleet_keys.LAUNCH_FILE, fleet_keys.REGISTERED_FILE,
            "/etc/gpunode/fleet-router.secrets.env"} <= gone


class Router(BaseHTTPRequestHandler):
    """sglang-router 0.3.2's worker API with --api-key CLIENT, as run on loopback (module docstring)."""

    workers: dict[str, dict[str, Any]] = {}
    calls: list[tuple[str, str, Any]] = []

    def _answer(self, code: int, doc: Any) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _go(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n)) if n else None
        if self.headers.get("Authorization") != f"Bearer {CLIENT}":
            return self._answer(401, {"error": "Unauthorized"})
        self.calls.append((self.command, self.path, body))
        if self.command == "GET":
            return self._answer(200, {"workers": [{"id": w["id"], "url": u, "is_healthy": True}
                                                  for u, w in self.workers.items()]})
        if self.command == "POST":
            self.workers[body["url"]] = {"id": f"id{len(self.workers)}", "key": body.get("api_key")}
        if self.command == "PUT":
            (w,) = [w for w in self.workers.values() if self.path == "/workers/" + w["id"]]
            w["key"] = body["api_key"]
        return self._answer(202, {"status": "accepted"})

    do_GET = do_POST = do_PUT = _go

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def router() -> Iterator[str]:
    Router.workers, Router.calls = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Router)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run(argv: list[str] | tuple[str, ...]) -> Probe:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return Probe(proc.returncode, proc.stdout)


def test_workers_get_their_keys_and_a_changed_key_is_given_in_place(router, tmp_path, monkeypatch):
    import gpunode.steps.fleet as fleet_step

    done = tmp_path / "registered.json"
    monkeypatch.setattr(fleet_step, "REGISTERED", str(done))
    keys = tmp_path / "keys.json"
    ws = [endpoint.Worker(router + "/w2", "pve/302", "cpu0", K2)]
    keys.write_text(fleet_keys.keys_text(CLIENT, ws))
    step = FleetWorkers(url=router, python=sys.executable, workers=[router + "/w2"], grace_s=10,
                        keys_file=str(keys))
    assert isinstance(step.check(run(step.probe())), Change)
    (cmd,) = step.commands()
    assert run(cmd.argv).exit_code == 0
    assert Router.workers[router + "/w2"]["key"] == K2
    assert os.stat(done).st_mode & 0o777 == 0o600 and K2 not in done.read_text()
    assert isinstance(step.check(run(step.probe())), NoChange)

    keys.write_text(fleet_keys.keys_text(CLIENT, [endpoint.Worker(router + "/w2", "pve/302", "cpu0", K4)]))
    outcome = step.check(run(step.probe()))
    assert isinstance(outcome, Change) and "its new key" in outcome.summary
    assert run(step.commands()[0].argv).exit_code == 0
    assert Router.workers[router + "/w2"]["key"] == K4 and [c[0] for c in Router.calls].count("POST") == 1
    assert isinstance(step.check(run(step.probe())), NoChange)


def test_bench_sends_each_endpoints_key_on_stdin_only():
    lay = Layout([Endpoint("cpu0", "http://127.0.0.1:30001", K2)], Endpoint("fleet-router", "http://10.0.0.3:30100",
                 CLIENT), "tiny", "", "", "vllm-cpu", "p", fleet_workers=2)
    request = client_request(Spec(concurrency=[1]), lay, "fleet c=1", [(lay.router, 2, 4)])
    assert request["endpoints"][0]["api_key"] == CLIENT
    plain = client_request(Spec(concurrency=[1]), lay, "x", [(Endpoint("cpu0", "http://127.0.0.1:30001"), 1, 1)])
    assert "api_key" not in plain["endpoints"][0]


def test_a_members_servers_listen_on_its_fleet_address_unless_the_inventory_says_otherwise(tmp_path):
    from gpunode.pipeline import target_vars

    path = tmp_path / "hosts.yml"
    path.write_text("""
hosts:
  pve:
    address: 192.0.2.1
    containers:
      302: {vars: {fleet_address: 10.0.0.2}}
      303: {vars: {fleet_router_only: true, fleet_address: 10.0.0.3}}
      304: {vars: {fleet_address: 10.0.0.4, host: 0.0.0.0}}
      305: {vars: {}}
groups:
  job: {hosts: [pve], vars: {fleet_router: pve/303}}
""")
    t = {x.name: x for x in fleetp.every_target(load(path), {})}
    assert target_vars(t["pve/302"])["host"] == "10.0.0.2"   # not 0.0.0.0, not loopback (once refused)
    assert target_vars(t["pve/304"])["host"] == "0.0.0.0"    # the inventory says so
    assert not target_vars(t["pve/303"]).get("host")          # the router-only target has no servers
    plan = SimpleNamespace(servers=[SimpleNamespace(name="cpu0", port=30001)])
    (w,) = endpoint.workers(t["pve/302"], plan)
    assert w.url == "http://10.0.0.2:30001"
    with pytest.raises(InventoryError, match="fleet_address"):
        fleetp.check_members([t["pve/305"]], list(t.values()))


def test_bench_asks_each_server_where_it_listens():
    from gpunode.bench.runner import layout

    srv = SimpleNamespace(name="cpu0", port=30001, args=("--model", "m", "--host", "10.0.0.2", "--port", "30001"))
    plan = SimpleNamespace(servers=[srv], router=None, model=SimpleNamespace(served_model_name="m", path="/m"),
                           venv="/v", engine="vllm-cpu", pinset="p")
    assert layout(plan).servers[0].url == "http://10.0.0.2:30001"  # type: ignore[arg-type]
