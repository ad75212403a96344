"""Issue 39 without the lab: the order a changed node's servers are replaced in, the generations kept
on the target, and what the engine does when a target went back by itself. The replacement itself
(router, systemd, a real vLLM) is proven in tests/lab/test_upgrade_lab.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode import roles, variables
from gpunode.engine import RolePlan
from gpunode.engine.handlers import ordered
from gpunode.errors import RolledBack, StepError
from gpunode.resolve import resolve
from gpunode.roles.context import RoleContext
from gpunode.steps import roll_server, rolling
from gpunode.steps.files import File
from gpunode.steps.rolling import Keep, RollingRestart
from gpunode.testing import converge
from gpunode.transport import LocalTransport
from tests.unit.resolve_facts import field_notes

# the shipped roles load as a user's do (gpunode.roles.module), not as gpunode.roles.<name>
servers_role = roles.module("servers")

DATA = Path(__file__).resolve().parents[1] / "data"


def servers_plans(**extra) -> list[RolePlan]:
    v = {**roles.defaults(), "model_source": "/dev/shm/Qwen3.6-27B", **extra}
    variables.check(v)
    ctx = RoleContext(target="kpro6/200", vars=v, facts=field_notes(), plan=resolve(field_notes(), v))
    return servers_role.build(ctx)


def test_each_server_is_replaced_behind_the_router_in_order_and_the_router_last():
    servers, *_ = servers_plans()
    units = [s.path.rsplit("/", 1)[1] for s in servers.steps
             if getattr(s, "path", "").startswith("/etc/systemd/system/gpunode-gpu")]  # the engine's judge has none
    assert len(units) > 1
    names = [f"restart:{u}" for u in reversed(units)] + ["restart:gpunode-router.service", "daemon-reload"]
    order = ordered(names, servers.handlers)
    assert order == ["daemon-reload", *(f"restart:{u}" for u in units), "restart:gpunode-router.service"]
    first = servers.handlers[f"restart:{units[0]}"]
    assert isinstance(first, RollingRestart)
    (route,) = next(s for s in first.servers if s.unit == units[0]).routes
    assert route.router == "http://127.0.0.1:30000" and route.worker.endswith(":30001")
    shown = first.commands()[0].what
    assert shown.startswith(f"replace {units[0]} behind http://127.0.0.1:30000: out, drained, restarted")
    assert "restart:gpunode-router.service" not in servers.handlers  # systemctl's own, after the servers
    line = first.commands()[0].shown()  # what --commands prints: the script by name, not its text
    assert line.startswith("/opt/gpunode/venvs/") and " -c <gpunode/steps/roll_server.py> " in line
    assert "import json" not in line and len(line) < 2000


def test_the_api_key_reaches_the_replacement_on_stdin_only():
    servers, *_ = servers_plans(server_api_key="sk-roll-0123456789")
    handler = next(iter(servers.handlers.values()))
    (command,) = handler.commands()
    assert command.stdin == b"sk-roll-0123456789"
    assert "sk-roll" not in " ".join(command.argv) and "sk-roll" not in repr(handler)
    assert "sk-roll" not in command.shown()


def test_the_generation_is_kept_after_ready_with_the_files_the_role_writes():
    servers, _services, ready = servers_plans()
    keep = ready.steps[-1]
    assert isinstance(keep, Keep)
    written = {s.path for s in servers.steps if isinstance(s, File)}
    assert set(keep.files) == written and "/etc/systemd/system/gpunode-router.service" in written
    assert keep.meta["venv"].startswith("/opt/gpunode/venvs/")
    # another flag is another generation; the same files the same one
    again = servers_plans()[2].steps[-1]
    other = servers_plans(extra_args="--enable-metrics")[2].steps[-1]
    assert again.name == keep.name != other.name


def test_keep_records_the_live_files_once_and_only_then(tmp_path):
    live = tmp_path / "etc"
    live.mkdir()
    a, b = live / "a.env", live / "b.service"
    a.write_text("X=1\n")
    b.write_text("[Service]\n")
    root = tmp_path / "generations"
    keep = Keep(files={str(a): "1", str(b): "2"}, meta={"pinset": "cpu"}, root=str(root))
    first = converge([RolePlan("ready", [keep])], tmp_path / "state")
    assert first.recap.succeeded and first.changed() == [keep.title]
    gen = root / keep.name
    assert (root / "current").read_text() == keep.name + "\n"
    assert (gen / "files.list").read_text().splitlines() == [str(a), str(b)]
    assert (gen / "files" / str(a).lstrip("/")).read_text() == "X=1\n"
    assert json.loads((gen / "meta").read_text())["pinset"] == "cpu"
    assert rolling.parse_log((root / "log").read_text())[-1][1] == keep.name
    second = converge([RolePlan("ready", [keep])], tmp_path / "state")
    assert second.changed() == []
    assert "is live and recorded" in second.events.by_step()[keep.title].reason
    newer = Keep(files={str(a): "1b", str(b): "2"}, meta={"pinset": "cpu"}, root=str(root))
    outcome = converge([RolePlan("ready", [newer])], tmp_path / "state", check=True)
    assert f"(was {keep.name})" in outcome.events.by_step()[newer.title].reason


def test_a_rollback_puts_the_kept_files_back(tmp_path, monkeypatch):
    f = tmp_path / "cpu0.env"
    f.write_text("OLD=1\n")
    root = tmp_path / "generations"
    keep = Keep(files={str(f): "1"}, root=str(root))
    assert converge([RolePlan("ready", [keep])], tmp_path / "state").recap.succeeded
    f.write_text("NEW=2\n")
    reloads = []
    monkeypatch.setattr(roll_server, "systemctl", lambda *a: reloads.append(a))
    roll_server.restore(str(root / keep.name))
    assert f.read_text() == "OLD=1\n" and reloads == [("daemon-reload",)]


def test_in_flight_is_read_from_the_engines_own_gauges():
    text = (DATA / "fleet" / "vllm-cpu-metrics.txt").read_text()
    assert roll_server.pending(text) == 0.0
    busy = text.replace('vllm:num_requests_running{engine="0",model_name="tiny-qwen3"} 0.0',
                        'vllm:num_requests_running{engine="0",model_name="tiny-qwen3"} 3.0')
    assert busy != text and roll_server.pending(busy) == 3.0
    assert roll_server.pending("# nothing\n") is None


def test_the_previous_generation_is_the_last_other_one_in_the_log():
    log = rolling.parse_log("2026-12-07T03:00:00Z g-aaa\n2026-12-07T03:10:00Z g-bbb\ntorn line\n")
    assert log == [("2026-12-07T03:00:00Z", "g-aaa"), ("2026-12-07T03:10:00Z", "g-bbb")]
    assert rolling.previous(log, "g-bbb") == "g-aaa" and rolling.previous(log[:1], "g-aaa") == ""


class _Answer(LocalTransport):
    def __init__(self, code: int, out: str):
        super().__init__("kpro6/200")
        self.answer = (code, out)

    def _exec(self, argv, stdin, sink, timeout):
        return super()._exec(["sh", "-c", 'printf "%s" "$1"; exit "$2"', "sh", self.answer[1], str(self.answer[0])],
                             None, sink, timeout)


def test_the_handler_reads_a_rollback_and_a_failure_apart():
    h = RollingRestart("restart:gpunode-cpu0.service", "gpunode-cpu0.service", "python3",
                       (rolling.Rolled("gpunode-cpu0.service", "http://127.0.0.1:30001", "m"),))
    out = ("@@ready gpunode-cpu0.service\n@@rolledback to generation g-0123: gpunode-cpu0.service failed "
           "while starting: error: unrecognized arguments: --bad\n")
    with pytest.raises(RolledBack) as info:
        h.run(_Answer(5, out))
    assert info.value.generation == "g-0123" and "unrecognized arguments: --bad" in info.value.why
    assert info.value.message.startswith("rolled back to generation g-0123: gpunode-cpu0.service failed")
    with pytest.raises(StepError, match="not replaced: boom .no earlier generation") as plain:
        h.run(_Answer(3, "@@failed boom (no earlier generation to go back to)\n"))
    assert not isinstance(plain.value, RolledBack)


class _Rollback:
    name = "roll-a"

    def commands(self):
        return []

    def run(self, target):
        raise RolledBack("a failed while starting", target=target.name, generation="g-old")


def test_a_rolled_back_target_drops_its_pending_restarts_and_says_why(tmp_path):
    files = [File(str(tmp_path / "a"), "new a", notify=("roll-a",)),
             File(str(tmp_path / "b"), "new b", notify=("restart:never-started.service",))]
    plan = RolePlan("servers", files, {"roll-a": _Rollback()})
    first = converge([plan], tmp_path / "state")
    assert first.recap.rolled_back == "rolled back to generation g-old: a failed while starting"
    assert first.recap.to_dict()["rolled_back"] == first.recap.rolled_back and not first.recap.succeeded
    statuses = dict(first.events.statuses())
    assert statuses["roll-a"] == "failed" and statuses["restart:never-started.service"] == "skipped"
    assert first.events.by_step()["restart:never-started.service"].reason.startswith("dropped: not run: rolled back")
    again = converge([RolePlan("servers", files, {"roll-a": _Rollback()})], tmp_path / "state")
    assert again.recap.succeeded and again.changed() == []  # nothing left pending


def test_history_lists_the_kept_generations_and_rollback_picks_the_one_before(tmp_path):
    from gpunode.fleet import generations

    env = tmp_path / "cpu0.env"
    root = tmp_path / "generations"
    names = []
    for text in ("A=1\n", "A=2\n"):
        env.write_text(text)
        keep = Keep(files={str(env): text}, meta={"pinset": "vllm-cpu-0.32", "venv": "/opt/gpunode/venvs/x"},
                    root=str(root))
        assert converge([RolePlan("ready", [keep])], tmp_path / "state").recap.succeeded
        names.append(keep.name)
    gens, before = generations.read(LocalTransport(), str(root))
    assert [g.name for g in gens] == [names[1], names[0]] and gens[0].live and not gens[1].live
    assert before == names[0]
    assert gens[1].files == [str(env)] and gens[1].meta["pinset"] == "vllm-cpu-0.32"
    shown = generations.lines(gens)
    assert shown[1].startswith(f"  * {names[1]}") and shown[1].endswith("live")
    assert f"  {names[0]}" in shown[2] and "pinset vllm-cpu-0.32" in shown[2]
    assert generations.lines([]) == [
        "  generations: none kept yet (one is kept when every server passed Ready after a run)"]


def test_a_fleet_members_server_leaves_the_fleet_router_too_with_the_routers_own_keys():
    """A fleet member's server is taken out of the fleet router as well as its own (issue 39): the router
    is asked with its clients' key, and the server goes back in with the key the router sends it; both
    keys on stdin, neither in the argv or the --commands line."""
    from gpunode.fleet.endpoint import MemberRoute

    v = {**roles.defaults(), "model_source": "/dev/shm/Qwen3.6-27B", "server_api_key": "sk-server-5678"}
    variables.check(v)
    ctx = RoleContext(target="kpro6/200", vars=v, facts=field_notes(), plan=resolve(field_notes(), v),
                      fleet=MemberRoute("http://10.0.0.9:30100", "10.0.0.5", "sk-client-1234"))
    servers, *_ = servers_role.build(ctx)
    handler = next(iter(servers.handlers.values()))
    (command,) = handler.commands()
    mine = next(s for s in handler.servers if s.unit == handler.unit)
    assert [(r.router, r.worker) for r in mine.routes] == [
        ("http://127.0.0.1:30000", mine.routes[0].worker), ("http://10.0.0.9:30100", "http://10.0.0.5:30001")]
    assert command.what.startswith(f"replace {handler.unit} behind http://10.0.0.9:30100, http://127.0.0.1:30000")
    keys = json.loads(command.stdin)
    assert keys["key"] == "sk-server-5678"
    assert keys["routers"]["http://10.0.0.9:30100"]["key"] == "sk-client-1234"
    assert keys["routers"]["http://10.0.0.9:30100"]["workers"]["http://10.0.0.5:30001"] == "sk-server-5678"
    shown = " ".join(command.argv) + command.shown() + repr(handler)
    assert "sk-client" not in shown and "sk-server" not in shown
    # roll_server.py reads them back: the servers' headers, and each router's own
    headers = roll_server.read_keys(command.stdin.decode())
    assert headers["Authorization"] == "Bearer sk-server-5678"
    fleet = roll_server.router_headers(headers, "http://10.0.0.9:30100")
    assert fleet["Authorization"] == "Bearer sk-client-1234"
    assert roll_server.router_headers(headers, "http://127.0.0.1:30000") == headers
    assert roll_server.worker_key("http://10.0.0.9:30100", "http://10.0.0.5:30001") == "sk-server-5678"
    roll_server.ROUTERS.clear()


def test_a_plain_key_on_stdin_is_still_the_servers_key():
    assert roll_server.read_keys("sk-plain\n")["Authorization"] == "Bearer sk-plain"
    assert "Authorization" not in roll_server.read_keys("")


def test_inv_rollback_also_replaces_a_server_still_running_what_its_files_no_longer_say():
    """A killed `inv rollback` put the files back and replaced some servers: the next one finds the files
    already as wanted, and must still replace a server whose process is older than its files."""
    wall, mono = 1_000_000.0, 5_000.0  # the same instant on both clocks: mono = wall - 995,000
    written = wall - 60  # the files were put back a minute ago
    started_long_ago = int((mono - 3600) * 1e6)  # an hour ago, on systemd's monotonic clock
    started_since = int((mono - 30) * 1e6)  # replaced after the files were written
    assert roll_server.started_before(started_long_ago, [written - 7200, written], wall, mono)
    assert not roll_server.started_before(started_since, [written], wall, mono)
    assert not roll_server.started_before(0, [written], wall, mono)  # not running: the rollout starts it anyway
    assert not roll_server.started_before(started_long_ago, [], wall, mono)


def test_inv_rollback_on_a_fleet_member_takes_each_server_out_of_the_fleet_router_too():
    """Issue 39: `inv rollback` on a fleet member replaces each server behind its fleet router as a rollout
    does, not behind its own router only: out of both, asked with the fleet router's clients' key, and back
    in with the key the router sends the server (the server's own: a generation holds no key)."""
    from gpunode.fleet import generations
    from gpunode.fleet.endpoint import MemberRoute
    from gpunode.fleet.status import Report, Unit

    report = Report("lab/221", units=[
        Unit("gpunode-cpu0.service", "server", "cpu0", "active", "running", "loaded", model="tiny-qwen3", port=30001),
        Unit("gpunode-router.service", "router", "router", "active", "running", "loaded", port=30000)])
    gen = generations.Generation("g-000000000001", files=["/etc/gpunode/cpu0.env",
                                                          "/etc/systemd/system/gpunode-cpu0.service"])
    fleet = MemberRoute("http://10.231.0.23:30100", "10.231.0.21", "sk-client-1234")
    req = generations.request(report, gen, drain_s=300, ready_s=600, fleet=fleet)
    (server,) = req["servers"]
    assert server["routes"] == [{"router": "http://127.0.0.1:30000", "port": 30001},
                                {"router": "http://10.231.0.23:30100", "worker": "http://10.231.0.21:30001"}]
    stdin = generations.keys(req, "sk-server-5678", fleet)
    assert "sk-" not in json.dumps(req)  # the keys go on stdin only
    headers = roll_server.read_keys(stdin.decode())
    try:
        assert headers["Authorization"] == "Bearer sk-server-5678"
        assert roll_server.router_headers(headers, fleet.router)["Authorization"] == "Bearer sk-client-1234"
        assert roll_server.worker_key(fleet.router, "http://10.231.0.21:30001") == "sk-server-5678"
        assert roll_server.router_headers(headers, "http://127.0.0.1:30000") == headers
    finally:
        roll_server.ROUTERS.clear()
    # not a fleet member: the routes and stdin as before
    alone = generations.request(report, gen, drain_s=300, ready_s=600)
    assert [r["router"] for r in alone["servers"][0]["routes"]] == ["http://127.0.0.1:30000"]
    assert generations.keys(alone, "sk-server-5678", None) == b"sk-server-5678"


def test_a_router_that_refuses_the_key_stops_the_replacement_before_the_server_restarts(monkeypatch):
    """Issue 44: a fleet router that answers 401 (its clients' key changed in the inventory, the router not
    restarted with it yet) is not "a router that does not answer": the server would be restarted while the
    router still sends it requests. The replacement fails before anything restarts, saying why."""
    asked: list[tuple[str, str]] = []

    def http(headers, method, url, body=None, timeout=5.0):
        asked.append((method, url))
        return (401, b"") if url.startswith("http://10.0.0.9") else (0, b"")

    monkeypatch.setattr(roll_server, "http", http)
    monkeypatch.setattr(roll_server, "ROUTERS", {"http://10.0.0.9:30100": {"key": "client-key", "workers": {}}})
    with pytest.raises(roll_server.Refused, match=r"refuses the key .* \(HTTP 401\).*fleet_router_api_key"):
        roll_server.leave({}, {"router": "http://10.0.0.9:30100", "worker": "http://10.0.0.5:30001"}, 30)
    assert asked == [("GET", "http://10.0.0.9:30100/workers")]  # no DELETE, and no restart after
    # a router that does not answer at all (not started yet) is still passed over, as before
    assert roll_server.leave({}, {"router": "http://127.0.0.1:30000", "port": 30001}, 30) == ""


def test_the_nodes_own_router_refusing_a_rotated_servers_key_is_passed_over_as_before(monkeypatch):
    """A single node's router has no keys of its own: gpunode asks it with the servers' key, and a rotated
    server_api_key is refused (401) until this run restarts the router after the servers. That is not the
    fleet router's case: the replacement goes on (tests/lab/test_secret_no_leak_lab.py test 6 rotates it)."""
    monkeypatch.setattr(roll_server, "http", lambda headers, method, url, body=None, timeout=5.0: (401, b""))
    monkeypatch.setattr(roll_server, "ROUTERS", {})
    assert roll_server.leave({"Authorization": "Bearer new"}, {"router": "http://127.0.0.1:30000",
                                                               "port": 30001}, 30) == ""
