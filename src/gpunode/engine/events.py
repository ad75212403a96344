"""What the engine tells the outside world: a Start when a target's run begins, one Event per
step or handler, Progress while a long step runs, and a TargetRecap per target.

The engine never prints; it hands Events to an `emit` callback. report.py
turns them into rich output or JSON lines (schema in docs/events.md, whose
version is SCHEMA_VERSION below: bump it when a field changes meaning or goes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1

OK = "ok"
CHANGED = "changed"
FAILED = "failed"
SKIPPED = "skipped"
STATUSES = (OK, CHANGED, FAILED, SKIPPED)


@dataclass(frozen=True)
class Event:
    """One step or handler on one target, after it was checked or applied.

    kind: "step" or "handler". status: ok | changed | failed | skipped.
    reason: the no-op sentence (ok), the change summary (changed), the error
    (failed) or why it did not run (skipped). check: True when nothing was
    applied (plan only), so "changed" means "would change".
    """

    kind: str
    target: str
    role: str
    step: str
    status: str
    reason: str
    duration: float = 0.0
    diff: str = ""
    check: bool = False
    #: check mode, a step that would change: the exact commands its apply runs (steps/base.Command.shown),
    #: for steps whose apply is a fixed list of commands
    commands: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "v": SCHEMA_VERSION,
            "type": self.kind,
            "target": self.target,
            "role": self.role,
            "step": self.step,
            "status": self.status,
            "reason": self.reason,
            "duration": round(self.duration, 3),
            "check": self.check,
        }
        if self.diff:
            data["diff"] = self.diff
        if self.commands:
            data["commands"] = list(self.commands)
        return data


@dataclass
class TargetRecap:
    """Counts per status for one target, its wall time, and the error that stopped it."""

    target: str
    check: bool = False
    ok: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    duration: float = 0.0
    #: Transport commands this run cost (lock, probe, applies, journal...).
    round_trips: int = 0
    error: str = ""
    #: The target could not be reached or run commands at all (ssh refused, host key, container
    #: stopped or missing, connection lost): Ansible's UNREACHABLE. `error` says why.
    unreachable: bool = False
    #: The target went back by itself to the generation before, and why (issue 39; docs/upgrade.md).
    rolled_back: str = ""
    #: The exception behind `error`, for callers that branch on its type.
    exc: BaseException | None = field(default=None, repr=False, compare=False)

    @property
    def succeeded(self) -> bool:
        return not self.error and self.failed == 0

    def stopped_by(self, exc: BaseException) -> None:
        """The error that stopped this target outside a step; a ConnectError makes it unreachable."""
        from gpunode.errors import ConnectError, GpunodeError

        self.error = str(exc) if isinstance(exc, GpunodeError) else f"{type(exc).__name__}: {exc}"
        self.exc = exc
        self.unreachable = isinstance(exc, ConnectError)

    def count(self, event: Event) -> None:
        setattr(self, event.status, getattr(self, event.status) + 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": SCHEMA_VERSION,
            "type": "target",
            "target": self.target,
            "check": self.check,
            "ok": self.ok,
            "changed": self.changed,
            "failed": self.failed,
            "skipped": self.skipped,
            "duration": round(self.duration, 3),
            "round_trips": self.round_trips,
            "error": self.error,
            "unreachable": self.unreachable,
            "rolled_back": self.rolled_back,
        }


@dataclass(frozen=True)
class Start:
    """A target's run begins (before its lock and probe): how many steps it will report."""

    target: str
    roles: tuple[str, ...] = ()
    steps: int = 0
    check: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"v": SCHEMA_VERSION, "type": "start", "target": self.target, "roles": list(self.roles),
                "steps": self.steps, "check": self.check}


@dataclass(frozen=True)
class Progress:
    """Where a long step stands (weight staging, engine install, readiness wait) while it runs.

    unit: what done/total count ("bytes", "packages", "servers"); total 0 when unknown.
    detail: the current file, package or per-server state, one line.
    """

    target: str
    step: str
    done: int
    total: int
    unit: str = "bytes"
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"v": SCHEMA_VERSION, "type": "progress", "target": self.target, "step": self.step,
                "done": self.done, "total": self.total, "unit": self.unit, "detail": self.detail}


#: Receives a Start when a target begins, every Event as it happens, Progress while a long step
#: runs, and each TargetRecap when its target is done.
Emit = Callable[[Start | Event | Progress | TargetRecap], None]


def discard(event: Start | Event | Progress | TargetRecap) -> None:
    """The default sink: keep nothing."""
