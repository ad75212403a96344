"""Test a role without the lab: run its steps on this machine, under a folder of the test's own.

Steps act on absolute paths, so a role under test takes its paths from its variables
and the test points them into a temporary folder; `RecordingTransport` runs the
engine's real commands locally (the same shell a container would run) and keeps each
one, so a test can assert what a user would check: the first run changes what it
should, the second changes nothing in one round trip, `--check` writes nothing.
Steps that need root or a system manager (apt packages, systemd units) are for the
lab (docs/lab.md). docs/testing-roles.md walks through an example.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpunode.engine import RolePlan, run_target
from gpunode.engine.events import Event, Progress, Start, TargetRecap
from gpunode.transport import LocalTransport


class RecordingTransport(LocalTransport):
    """LocalTransport that keeps every command it is asked to run (run and hold)."""

    def __init__(self, name: str = "local"):
        super().__init__(name)
        self.commands: list[list[str]] = []

    def _exec(self, argv, stdin, sink, timeout):
        self.commands.append(list(argv))
        return super()._exec(argv, stdin, sink, timeout)

    def hold(self, argv, until=""):
        self.commands.append(list(argv))
        return super().hold(argv, until)


class Collect:
    """An emit callback that keeps what it gets: step events, the recap, start and progress lines."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.recaps: list[TargetRecap] = []
        self.others: list[Start | Progress] = []

    def __call__(self, item) -> None:
        if isinstance(item, Start | Progress):
            self.others.append(item)
        else:
            (self.recaps if isinstance(item, TargetRecap) else self.events).append(item)

    def by_step(self) -> dict[str, Event]:
        return {e.step: e for e in self.events}

    def statuses(self) -> list[tuple[str, str]]:
        return [(e.step, e.status) for e in self.events]


@dataclass
class Run:
    """One converge: its recap, the events per step and the commands that reached the target."""
    recap: TargetRecap
    events: Collect
    commands: list[list[str]] = field(default_factory=list)

    def changed(self) -> list[str]:
        return [e.step for e in self.events.events if e.status == "changed"]


def converge(roles: Sequence[RolePlan], state_dir: str | Path, *, check: bool = False, diff: bool = False) -> Run:
    """run_target on this machine, with the engine state (lock, journal, handlers) under state_dir."""
    transport, events = RecordingTransport(), Collect()
    recap = run_target(transport, roles, check=check, diff=diff, emit=events, state_dir=str(state_dir))
    return Run(recap, events, transport.commands)


def snapshot(root: str | Path) -> dict[str, str]:
    """Every path under root with its type, mode and content hash or link target."""
    root = Path(root)
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            st = path.lstat()
            if path.is_symlink():
                out[rel] = "link " + os.readlink(path)
            elif path.is_dir():
                out[rel] = f"dir {st.st_mode & 0o7777:o}"
            else:
                out[rel] = f"file {st.st_mode & 0o7777:o} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return out
