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
from gpunode.steps import reuse
from gpunode.testing import Collect
from gpunode.transport import LocalTransport, PctTransport
from gpunode_lab import containers, paths
from gpunode_lab.roles.demo.role import DEFAULTS, role
from tests.demo_role import demo_on_path  # noqa: F401  (the demo's templates on the search path)

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("demo_on_path")]

VMID = 213  # made and removed by this module

#: The demo role's no-op, measured: env, the lock shell's sh and flock, ONE stat and ONE grep
#: (which reads the small files whole) for the 5 file-like steps; dpkg-query's and systemctl's answers are reused while
#: nothing they depend on changed (steps/reuse.py). 14 before the batch ran its `sh -c` probes
#: as subshells; 10 before the lock shell sent the probe's output raw (no base64), wrote
#: lock.owner in place (no mv), emptied it with a builtin (no rm) and reused those two answers.
DEMO_LIMIT = 5

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

    def hold(self, argv, until=""):
        return super().hold(self._strace(argv), until)


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
    # The first no-op stores dpkg-query's and systemctl's answers (steps/reuse.py); the next reuses them.
    assert run_target(plain, [role({})]).changed == 0
    traced = Traced(tmp_path / "execve.log")
    again = run_target(PctTransport(traced, VMID, pct=str(paths.PCT), host_name="lab"), [role({})])
    assert (again.changed, again.ok, again.failed, again.round_trips) == (0, 8, 0, 1), again.error
    progs = started(traced.log)
    shown = "\n  ".join(progs)
    print(f"\nthe demo role's no-op started {len(progs)} programs in the container:\n  {shown}")
    assert len(progs) <= DEMO_LIMIT, f"{len(progs)} programs (at most {DEMO_LIMIT}):\n  {shown}"
    # One per kind, never one per step: five file-like steps, one stat and one grep, no hashing there.
    kinds = [p.split(" ", 1)[0].rsplit("/", 1)[-1] for p in progs]
    assert kinds.count("stat") == 1 and kinds.count("grep") <= 1 and kinds.count("sha256sum") == 0, shown
    assert kinds.count("systemctl") == 0 and kinds.count("dpkg-query") == 0, shown  # reused, nothing changed
    assert kinds.count("sh") == 1, shown  # the lock shell only: every probe runs inside it


def test_reused_answers_give_way_to_a_stop_a_disable_and_a_package_removal(fresh):
    """What a user or systemd changes behind gpunode's back is seen by the next run, reused
    answers or not. Check runs read the stored answers and say what they would do."""
    plain = PctTransport(LocalTransport("lab"), VMID, pct=str(paths.PCT), host_name="lab")
    assert run_target(plain, [role({})]).succeeded
    assert run_target(plain, [role({})]).changed == 0  # stores the answers
    unit, package = DEFAULTS["demo_unit"], DEFAULTS["demo_packages"][0]

    def would() -> list[str]:
        seen = Collect()
        recap = run_target(plain, [role({})], check=True, emit=seen)
        assert recap.succeeded, recap.error
        return [e.reason for e in seen.events if e.status == "changed"]

    def ct(script: str) -> None:
        plain.run(["sh", "-c", script], check=True)

    ct(f"systemctl stop {unit}")
    assert [r.split(" (")[0] for r in would()] == [f"start {unit}"]
    ct(f"systemctl start {unit} && systemctl disable -q {unit}")
    assert [r.split(" (")[0] for r in would()] == [f"enable {unit}"]
    ct(f"systemctl enable -q {unit}")
    assert would() == []
    ct(f"dpkg -r --force-depends {package}")
    assert would() == [f"install {package}"]


def test_an_exited_oneshot_is_reused_until_it_is_stopped(fresh):
    """A oneshot with RemainAfterExit=yes (the weights' staging unit) has no PIDs to sign:
    systemd's invocation link stands for "still active", so its answer is reused, and a stop
    or a failure behind gpunode's back removes the link and is seen by the next run."""
    plain = PctTransport(LocalTransport("lab"), VMID, pct=str(paths.PCT), host_name="lab")
    unit = "gpunode-test-oneshot.service"
    state = "/var/lib/gpunode-test"

    def ct(script: str) -> str:
        return plain.run(["sh", "-c", script], check=True).stdout

    def oneshot(command: str) -> str:
        # Enabled: a disabled unit's answer is never stored.
        return (f"printf '[Service]\\nType=oneshot\\nRemainAfterExit=yes\\nExecStart={command}\\n[Install]\\n"
                f"WantedBy=multi-user.target\\n' > /etc/systemd/system/{unit} && systemctl daemon-reload")

    def probe(path: str = "/usr/sbin:/usr/bin:/sbin:/bin") -> str:
        # As the lock shell runs it under the exclusive lock: state folder set, stores allowed.
        _sh, *rest = reuse.units([unit])
        return plain.run(["env", f"PATH={path}", f"GN_STATE={state}", "GN_EXCLUSIVE=1", "/bin/sh", *rest],
                         check=True).stdout

    ct(f"{oneshot('/bin/true')} && systemctl enable -q --now {unit} && mkdir -p {state}")
    first = probe()
    assert "SubState=exited" in first and "UnitFileState=enabled" in first, first
    assert f"gn_out_1='{first}'" in ct(f"cat {state}/reuse-units-{reuse.key([unit])}")
    # Reused: with no systemctl on PATH the next probe still gives the same answer.
    assert probe(path="/nonexistent") == first
    ct(f"systemctl stop {unit}")
    after = probe()
    assert "ActiveState=inactive" in after, after
    ct(f"{oneshot('/bin/false')} && {{ systemctl start {unit} || true; }}")
    assert "ActiveState=failed" in probe()


def test_a_damaged_store_of_unit_answers_is_asked_again_and_written_whole(fresh):
    """The units' stored answers are sourced as shell text. Cut short, they are not trusted: a cut
    inside a quote is a syntax error that leaves the probe running, a cut after the signature leaves
    no answer to reuse; either way systemd is asked (here: not on PATH, so the answer differs) and
    the next applying probe writes the store whole again."""
    plain = PctTransport(LocalTransport("lab"), VMID, pct=str(paths.PCT), host_name="lab")
    assert run_target(plain, [role({})]).succeeded
    unit, state = DEFAULTS["demo_unit"], "/var/lib/gpunode-test"
    store = f"{state}/reuse-units-{reuse.key([unit])}"

    def ct(script: str) -> str:
        return plain.run(["sh", "-c", script], check=True).stdout

    def probe(path: str = "/usr/sbin:/usr/bin:/sbin:/bin") -> str:
        _sh, *rest = reuse.units([unit])
        # Not checked: without systemctl on PATH, a unit that is asked fails the probe (127).
        return plain.run(["env", f"PATH={path}", f"GN_STATE={state}", "GN_EXCLUSIVE=1", "/bin/sh", *rest]).stdout

    ct(f"mkdir -p {state}")
    first = probe()
    assert "SubState=running" in first, first
    whole = ct(f"cat {store}")
    assert probe(path="/nonexistent") == first  # reused
    for cut in (whole.index("gn_out_1=") + len("gn_out_1='LoadState"), whole.index(" gn_out_1=")):
        ct(f"head -c {cut} {store} > {store}.cut && mv {store}.cut {store}")
        assert "systemctl: not found" in probe(path="/nonexistent"), whole[:cut]
        assert probe() == first
        assert ct(f"cat {store}") == whole


def test_a_unit_that_is_never_stored_is_asked_every_run_and_leaves_the_store_as_it_was(fresh):
    """A unit whose answer is never kept (here: one that does not exist) is asked on every run, but
    the store of the list it is in is written only when an answer in it is new or no longer holds."""
    plain = PctTransport(LocalTransport("lab"), VMID, pct=str(paths.PCT), host_name="lab")
    assert run_target(plain, [role({})]).succeeded
    names = [DEFAULTS["demo_unit"], "gpunode-no-such-unit.service"]
    state = "/var/lib/gpunode-test"
    store = f"{state}/reuse-units-{reuse.key(names)}"

    def ct(script: str) -> str:
        return plain.run(["sh", "-c", script], check=True).stdout

    def probe() -> str:
        _sh, *rest = reuse.units(names)
        return plain.run(["env", f"GN_STATE={state}", "GN_EXCLUSIVE=1", "/bin/sh", *rest], check=True).stdout

    ct(f"mkdir -p {state}")
    first = probe()
    assert "LoadState=not-found" in first and "SubState=running" in first, first
    written = ct(f"stat -c '%i %.9Y' {store}")
    assert probe() == first
    assert ct(f"stat -c '%i %.9Y' {store}") == written
