"""The demo role through the real chain (SSH -> pct stand-in -> LXC container with systemd),
each test on a container of its own made fresh from the lab's base rootfs.

(1) first apply changes, second changes nothing and costs two round trips;
(2) --check on a fresh container writes nothing and still shows the whole plan;
(3) a connection cut in the middle of a file upload leaves no half-written file, and
    the re-run converges, firing the restart the cut run had been notified of;
(4) a second concurrent run is refused and told who holds the lock.
"""

from __future__ import annotations

import io
import time

import pytest
from rich.console import Console

from gpunode.engine import RolePlan, run_target
from gpunode.engine.lock import Owner
from gpunode.errors import LockError
from gpunode.report import HumanReport
from gpunode.transport import PctTransport, SshTransport
from gpunode_lab import containers, paths
from gpunode_lab.roles.demo.role import DEFAULTS, role
from tests.demo_role import demo_on_path  # noqa: F401  (the demo's templates on the search path)
from tests.lab.conftest import lab_settings
from tests.lab.cut_helpers import CutDuringUpload
from tests.lab.provision_helpers import fetch_inside
from tests.unit.engine_helpers import Collect

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("demo_on_path")]

VMID = 210  # not one of the lab's own containers: this module makes and removes it
UNIT = DEFAULTS["demo_unit"]
UNIT_DIR = "/etc/systemd/system"
UNIT_PATH = f"{UNIT_DIR}/{UNIT}"
WATCHED = ["/etc", "/usr", "/var/lib/gpunode", DEFAULTS["demo_root"].rsplit("/", 1)[0]]

# Every path with type, mode, size and mtime, plus the content hash of every regular file
# outside /usr (whose metadata alone shows a write): what "changed nothing" means here.
SNAPSHOT = r"""
for d; do [ -e "$d" ] || continue
  find "$d" -xdev -printf '%y %m %s %T@ %p -> %l\n'
  case "$d" in /usr*) ;; *) find "$d" -xdev -type f -exec sha256sum {} + ;; esac
done | LC_ALL=C sort
"""


@pytest.fixture
def fresh(lab):
    """A new container from the lab's base rootfs, running systemd; removed afterwards."""
    ct = containers.Container(VMID, "cpu", "lab-demo", 2048, True, 1, 0, containers.SHARES)
    containers.remove(ct)
    containers.ensure(ct)
    containers.start(ct)
    host = SshTransport(lab_settings(name="lab-demo"))
    try:
        yield host, PctTransport(host, VMID, pct=str(paths.PCT), host_name="lab")
    finally:
        host.close()
        containers.remove(ct)


def demo() -> list[RolePlan]:
    return [role({})]


def page(target) -> str:
    """The served page, fetched inside the container, polled until the server answers."""
    return fetch_inside(target, "http://127.0.0.1:8099/")


def test_first_apply_changes_everything_and_the_second_nothing_in_one_round_trip(fresh):
    host, ct = fresh
    first = Collect()
    recap = run_target(ct, demo(), emit=first)
    assert recap.succeeded, recap.error or [e.reason for e in first.events if e.status == "failed"]
    assert [(e.step, e.status) for e in first.events] == [
        ("apt:hello", "changed"), ("dir:/etc/gpunode-demo", "changed"),
        ("dir:/var/lib/gpunode-demo/www", "changed"), ("file:/etc/gpunode-demo/demo.env", "changed"),
        ("file:/var/lib/gpunode-demo/www/index.html", "changed"),
        ("link:/usr/local/bin/gpunode-demo-hello", "changed"), (f"unit:{UNIT}", "changed"),
        (f"service:{UNIT}", "changed"), ("daemon-reload", "changed"), (f"restart:{UNIT}", "changed")]
    assert "<p>hello from gpunode</p>" in page(ct)
    assert ct.run(["gpunode-demo-hello"]).stdout == "Hello, world!\n"

    before = host.commands_run
    started = time.monotonic()
    second = run_target(ct, demo())
    took = time.monotonic() - started
    assert (second.changed, second.ok, second.failed) == (0, 8, 0)
    assert second.round_trips == 1 and host.commands_run - before == 1  # lock, probes, handlers: one pct exec
    print(f"\nno-op re-run of the demo role: {second.round_trips} round trips, {took:.2f} s; "
          f"first apply: {recap.round_trips} round trips, {recap.duration:.2f} s")


def test_check_on_a_fresh_container_writes_nothing_and_shows_the_whole_plan(fresh):
    _, ct = fresh
    before = ct.script(SNAPSHOT, *WATCHED, check=True).stdout
    out = io.StringIO()
    report = HumanReport(Console(file=out, width=200, color_system=None))
    recap = run_target(ct, demo(), check=True, emit=report)
    report.finish([recap])
    after = ct.script(SNAPSHOT, *WATCHED, check=True).stdout
    assert after == before, "check mode changed the container"
    assert recap.changed == 10 and recap.failed == 0 and recap.round_trips == 1
    text = out.getvalue()
    for line in ("would change lab/210 demo: apt:hello  install hello",
                 "would change lab/210 demo: dir:/etc/gpunode-demo  create directory /etc/gpunode-demo (mode 0755)",
                 "would change lab/210 demo: link:/usr/local/bin/gpunode-demo-hello  create symlink",
                 f"would change lab/210 demo: service:{UNIT}  enable and start {UNIT} (now not loaded yet)",
                 f"would change lab/210 demo: handler restart:{UNIT}  would run (notified by "
                 f"file:/etc/gpunode-demo/demo.env, unit:{UNIT})"):
        assert line in text
    assert '+DEMO_PORT="8099"' in text and "+ExecStart=/usr/bin/python3 -m http.server" in text
    assert "recap (check mode: nothing was changed)" in text


def test_a_connection_cut_mid_upload_leaves_no_half_file_and_the_rerun_converges(fresh):
    host, ct = fresh
    cutting = CutDuringUpload(host, VMID, UNIT_PATH)
    first = Collect()
    recap = run_target(cutting, demo(), emit=first)
    assert cutting.cut and not recap.succeeded
    failed = [e for e in first.events if e.status == "failed"]
    assert [e.step for e in failed] == [f"unit:{UNIT}"]
    print("\ncut run said:", failed[0].reason)
    assert "dropped" in failed[0].reason or "lost" in failed[0].reason
    assert [e.status for e in first.events[-3:]] == ["skipped"] * 3  # service step and both handlers

    # The cut run's leftovers on the container: no unit file, no temp file, the restart still pending.
    listing = ct.run(["sh", "-c", f"ls -a {UNIT_DIR}; cat /var/lib/gpunode/handlers.pending"]).stdout
    assert UNIT not in listing.split() and ".gpunode." not in listing
    assert f"demo\trestart:{UNIT}" in listing

    second = Collect()
    recap = run_target(ct, demo(), emit=second, lock_wait=20)
    assert recap.succeeded, recap.error
    statuses = dict((e.step, e.status) for e in second.events)
    assert statuses[f"unit:{UNIT}"] == "changed" and statuses["apt:hello"] == "ok"
    assert statuses[f"restart:{UNIT}"] == "changed"
    assert "<p>hello from gpunode</p>" in page(ct)
    third = run_target(ct, demo())
    assert (third.changed, third.ok) == (0, 8)
    assert ct.run(["sh", "-c", "cat /var/lib/gpunode/handlers.pending 2>/dev/null; true"]).stdout == ""


def test_a_second_concurrent_run_is_refused_and_told_who_holds_the_lock(fresh):
    host, ct = fresh
    other_host = SshTransport(lab_settings(name="other-workstation"))
    other = PctTransport(other_host, VMID, pct=str(paths.PCT), host_name="lab")
    owner = Owner(user="alice", workstation="ws-alice", pid=4242, started="2026-12-02T12:00:00Z",
                  task="inv provision", run_id="run-alice")
    refused: list = []

    def emit(item) -> None:
        # While the first run holds the lock (between its steps), a second one starts.
        if not refused and getattr(item, "step", "") == "apt:hello":
            refused.append(run_target(other, demo()))

    try:
        first = run_target(ct, demo(), emit=emit, owner=owner)
    finally:
        other_host.close()
    assert first.succeeded
    (second,) = refused
    assert isinstance(second.exc, LockError)
    assert ("lab/210 is locked by another gpunode run: alice@ws-alice (pid 4242, run run-alice, "
            "since 2026-12-02T12:00:00Z): inv provision") in second.error
    assert second.changed == 0 and second.skipped == 8 and second.round_trips == 1
