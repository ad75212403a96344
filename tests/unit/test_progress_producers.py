"""The long steps report progress while they run: the venv install in packages (pip's and uv's own
lines, real installs from a tiny wheelhouse), the readiness wait in servers with each server's
state (real HTTP servers on loopback polled by the real wait script); -v gets every line.
Events go through the engine (run_target) and the CLI's Feed, as in `inv provision`."""

from __future__ import annotations

import hashlib
import http.server
import json
import sys
import threading
from pathlib import Path

import pytest

from gpunode.cli.progress import Feed
from gpunode.engine import RolePlan, run_target
from gpunode.engine.events import Progress
from gpunode.roles.context import RoleContext
from gpunode.steps.health import Endpoint, Ready
from gpunode.steps.venv import Venv
from tests.unit.engine_helpers import Collect, CountingTransport
from tests.wheels import make_wheel


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("wheels")
    make_wheel(d, "gpn-engine", "1.0", requires=("gpn-kernel==0.4.1",))
    make_wheel(d, "gpn-kernel", "0.4.1")
    make_wheel(d, "gpn-extra", "2.0")
    return d


def feed(collect, step: str, unit: str):
    """What pipeline.prepare wires: the target's Feed, bound to a step and unit by the role."""
    ctx = RoleContext(target="box", vars={}, facts=None, plan=None, progress=Feed("box", collect))  # type: ignore[arg-type]
    return ctx.progress_for(step, unit)


def progress(collect: Collect, step: str) -> list[Progress]:
    return [p for p in collect.others if isinstance(p, Progress) and p.step == step]


def assert_in_order(seen: list[Progress], unit: str) -> None:
    assert seen and all(p.target == "box" and p.unit == unit for p in seen)
    assert [p.done for p in seen] == sorted(p.done for p in seen), "done never goes back"
    assert all(p.total == 0 or p.done <= p.total for p in seen)
    assert seen[-1].done == seen[-1].total > 0, "the last one says it is complete"


def test_pip_install_reports_packages_as_it_collects_them(tmp_path, wheelhouse):
    got, lines = Collect(), []
    step = Venv(path=str(tmp_path / "v"), requirements=["gpn-engine==1.0", "gpn-extra==2.0"], no_index=True,
                find_links=[str(wheelhouse)], label="engine venv (test)",
                on_progress=feed(got, "engine", "packages"), on_line=lines.append)
    recap = run_target(CountingTransport("box"), [RolePlan("engine", [step])], emit=got, state_dir=str(tmp_path / "s"))
    assert recap.succeeded, recap.error
    seen = progress(got, "engine")
    assert_in_order(seen, "packages")
    assert seen[0].detail == "engine venv (test): installing 2 pinned packages with pip" and seen[0].done == 0
    fetched = [p for p in seen if ": processing " in p.detail]
    assert [p.done for p in fetched] == [1, 2, 3], [p.detail for p in seen]
    assert all(p.detail.endswith(".whl") for p in fetched)
    assert seen[-1].total == 3 and seen[-1].detail == "engine venv (test): installed and verified"
    assert any(x.startswith("Successfully installed gpn-engine-1.0") for x in lines), lines


def test_uv_locked_install_knows_its_total_from_the_start(tmp_path, wheelhouse, monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}")  # uv
    locked = [f"{w.name.split('-')[0].replace('_', '-')}=={w.name.split('-')[1]} "
              f"--hash=sha256:{hashlib.sha256(w.read_bytes()).hexdigest()}" for w in sorted(wheelhouse.glob('*.whl'))]
    got = Collect()
    step = Venv(path=str(tmp_path / "v"), requirements=["gpn-engine==1.0"], locked=locked, lock="t/pylock@1",
                no_index=True, find_links=[str(wheelhouse)], installer="uv", label="engine venv (t)",
                on_progress=feed(got, "engine", "packages"))
    recap = run_target(CountingTransport("box"), [RolePlan("engine", [step])], emit=got, state_dir=str(tmp_path / "s"))
    assert recap.succeeded, recap.error
    seen = progress(got, "engine")
    assert_in_order(seen, "packages")
    assert {p.total for p in seen} == {3}
    details = [p.detail.split(": ", 1)[1] for p in seen]
    assert details[0] == "installing 3 locked packages (t/pylock) with uv"
    assert "Resolved 3 packages" in " ".join(details) and "+ gpn-kernel==0.4.1" in details
    assert [p.done for p in seen if p.detail.endswith("+ gpn-engine==1.0")] == [3], "after 'Installed 3 packages'"


class _Server(http.server.BaseHTTPRequestHandler):
    """/health answers 503 for the first `loading` requests (a model still loading), then 200."""

    loading = 0

    def do_GET(self):
        code = 503 if self.server.health_calls < self.server.loading else 200  # type: ignore[attr-defined]
        self.server.health_calls += 1  # type: ignore[attr-defined]
        self.send_response(code)
        self.end_headers()

    def do_POST(self):
        body = json.dumps({"choices": [{"text": " Paris"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def servers():
    made = []
    for loading in (0, 2):
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Server)
        srv.loading, srv.health_calls = loading, 0  # type: ignore[attr-defined]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        made.append(srv)
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in made]
    for s in made:
        s.shutdown()
        s.server_close()


@pytest.fixture
def systemd(tmp_path, monkeypatch):
    """This build machine has no systemd (PID 1 is not systemd); a systemctl that says what the
    units' state is (tests/lab/test_fleet_1_progress_lab.py runs the same wait against real units)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    failed = tmp_path / "failed"
    failed.write_text("")
    (bin_ / "systemctl").write_text(f"""#!/bin/sh
case "$1" in
  is-failed) grep -qx "$3" {failed} ;;
  show) echo 0 ;;
esac
""")
    (bin_ / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{__import__('os').environ['PATH']}")
    return failed


def test_readiness_reports_each_servers_state_until_all_are_ready(tmp_path, servers, systemd):
    got, lines, order = Collect(), [], []

    def emit(item):
        order.append(type(item).__name__)
        got(item)

    eps = [Endpoint("cpu0", "gpunode-cpu0.service", servers[0], "tiny"),
           Endpoint("cpu1", "gpunode-cpu1.service", servers[1], "tiny")]
    step = Ready(endpoints=eps, grace_s=60, on_progress=feed(emit, "ready", "servers"), on_line=lines.append)
    recap = run_target(CountingTransport("box"), [RolePlan("ready", [step])], emit=emit, state_dir=str(tmp_path / "s"))
    assert recap.succeeded, recap.error
    assert order[0] == "Start" and order[-2:] == ["Event", "TargetRecap"] and set(order[1:-2]) == {"Progress"}, \
        "progress arrives while the wait runs, before the step's event"
    seen = progress(got, "ready")
    assert_in_order(seen, "servers")
    assert {p.total for p in seen} == {2}
    assert seen[0].done == 1 and seen[0].detail == "cpu0 ready, cpu1 loading 0s"
    assert all(p.detail.startswith("cpu0 ready, cpu1 loading ") for p in seen[:-1])
    assert seen[-1].detail == "cpu0 ready, cpu1 ready"
    assert lines == ["@@ready gpunode-cpu0.service", "@@ready gpunode-cpu1.service"]


def test_readiness_names_the_server_that_failed(tmp_path, servers, systemd):
    systemd.write_text("gpunode-cpu1.service\n")
    got = Collect()
    eps = [Endpoint("cpu0", "gpunode-cpu0.service", servers[0], "tiny"),
           Endpoint("cpu1", "gpunode-cpu1.service", servers[1], "tiny")]
    step = Ready(endpoints=eps, grace_s=60, on_progress=feed(got, "ready", "servers"))
    recap = run_target(CountingTransport("box"), [RolePlan("ready", [step])], emit=got, state_dir=str(tmp_path / "s"))
    assert not recap.succeeded
    assert "gpunode-cpu1.service failed while starting" in [e.reason for e in got.events if e.status == "failed"][0]
    assert progress(got, "ready")[-1].detail == "cpu0 ready, cpu1 failed"
