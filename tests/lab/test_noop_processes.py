"""How many programs a no-op's one round trip starts inside the container (issue 9).

The demo role is applied to a fresh container, then re-run under `strace -f -e trace=execve`
around the pct stand-in call that a real run makes (the lock shell with the batched probe,
run here through the local pct stand-in instead of through sshd): every program that the
round trip starts inside the container is counted, and the count is pinned. Each program
start costs far more than a shell builtin on a Proxmox node, so this is what a no-op costs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from gpunode.engine import run_target
from gpunode.lab import containers, paths
from gpunode.roles.demo.role import role
from gpunode.transport import LocalTransport, PctTransport

pytestmark = pytest.mark.lab

VMID = 213  # made and removed by this module

#: The demo role's no-op, measured: env, the lock shell's sh, flock, mv and rm (lock.owner) and
#: base64, dpkg-query (apt), ONE stat and ONE sha256sum for the 5 file-like steps, ONE systemctl
#: show. Before the batch ran its `sh -c` probes as subshells and read handlers.pending with
#: `read`: 14 (an sh for the stat pass, the hash pass and the pending handlers, and a cat).
DEMO_LIMIT = 10

# With -f, a call that another process interrupts is split: "execve(...) <unfinished ...>", later
# "<... execve resumed>) = 0" on a line of the same pid.
_CALL = re.compile(r'^(\d+)\s+execve\("([^"]+)", \[(.*?)\]')
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. execve resumed>.* = 0$")


class Traced(LocalTransport):
    """The lab host, every command run under strace (the log of the last one in `log`)."""

    def __init__(self, log):
        super().__init__("lab")
        self.log = log

    def _strace(self, argv: Sequence[str]) -> list[str]:
        return ["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-s", "120",
                "-o", str(self.log), *argv]

    def _exec(self, argv, stdin, sink, timeout):
        return super()._exec(self._strace(argv), stdin, sink, timeout)

    def hold(self, argv):
        return super().hold(self._strace(argv))


def started(log) -> list[str]:
    """The programs started inside the container, in order: every successful execve after
    the pct stand-in's own lxc-attach."""
    progs: list[tuple[str, str]] = []
    waiting: dict[str, tuple[str, str]] = {}
    for line in log.read_text().splitlines():
        if m := _CALL.match(line):
            if line.rstrip().endswith("<unfinished ...>"):
                waiting[m.group(1)] = (m.group(2), m.group(3)[:100])
            elif line.rstrip().endswith("= 0"):
                progs.append((m.group(2), m.group(3)[:100]))
        elif (r := _RESUMED.match(line)) and r.group(1) in waiting:
            progs.append(waiting.pop(r.group(1)))
    names = [p.rsplit("/", 1)[-1] for p, _ in progs]
    assert "lxc-attach" in names, progs
    return [f"{p} {args}" for p, args in progs[names.index("lxc-attach") + 1:]]


@pytest.fixture
def fresh(lab):
    ct = containers.Container(VMID, "cpu", "lab-noop-procs", 1024, True, 1, 0, containers.SHARES)
    containers.remove(ct)
    containers.ensure(ct)
    containers.start(ct)
    try:
        yield ct
    finally:
        containers.remove(ct)


def test_demo_noop_round_trip_starts_few_programs_in_the_container(fresh, tmp_path):
    plain = PctTransport(LocalTransport("lab"), VMID, pct=str(paths.PCT), host_name="lab")
    first = run_target(plain, [role({})])
    assert first.succeeded and first.changed, first.error
    traced = Traced(tmp_path / "execve.log")
    again = run_target(PctTransport(traced, VMID, pct=str(paths.PCT), host_name="lab"), [role({})])
    assert (again.changed, again.ok, again.failed, again.round_trips) == (0, 8, 0, 1), again.error
    progs = started(traced.log)
    shown = "\n  ".join(progs)
    print(f"\nthe demo role's no-op started {len(progs)} programs in the container:\n  {shown}")
    assert len(progs) <= DEMO_LIMIT, f"{len(progs)} programs (at most {DEMO_LIMIT}):\n  {shown}"
    # One per kind, never one per step: five file-like steps, one stat and one sha256sum.
    kinds = [p.split(" ", 1)[0].rsplit("/", 1)[-1] for p in progs]
    assert kinds.count("stat") == 1 and kinds.count("sha256sum") <= 1 and kinds.count("systemctl") == 1, shown
    assert kinds.count("sh") == 1, shown  # the lock shell only: every probe runs inside it
