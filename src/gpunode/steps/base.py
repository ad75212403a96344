"""The step contract: probe, check, apply.

A step is one idempotent resource (a package set, a file, a unit). The engine
runs every step's `probe` argv in ONE batched script per target, hands each
step its own output, and asks `check` for an Outcome: a Change (what would be
done, with a diff for files) or a NoChange with a sentence saying why nothing
is needed. Only then, and only outside check mode, does it call `apply`.

Steps never print, never know about roles or inventory, and build argv lists
only (gpunode.shell quotes them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpunode.transport.base import Transport


@dataclass(frozen=True)
class Probe:
    """A step's probe output: its exit code and combined stdout."""

    exit_code: int
    output: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def lines(self) -> list[str]:
        return self.output.splitlines()


@dataclass(frozen=True)
class FileRead:
    """A probe script that prints one small file the engine wrote (a manifest) after `after`:
    engine/passes.py runs `without` (the script less that `cat`) and reads the file, at
    <args[arg]>/<name>, in ONE pass with the others, then puts its lines back after `after`."""

    script: str
    without: str
    arg: int
    name: str
    after: str


@dataclass(frozen=True)
class Change:
    """What applying the step will change. `diff` is a unified diff for files."""

    summary: str
    diff: str = ""


@dataclass(frozen=True)
class NoChange:
    """Nothing to do, and why, in one sentence a user can read."""

    reason: str


Outcome = Change | NoChange


@dataclass
class Step(ABC):
    """Base class for resources. Subclasses are dataclasses with their own fields."""

    #: Handler names to fire (once, after the role) when this step changed something.
    notify: Sequence[str] = field(default=(), kw_only=True)
    #: Optional label shown in output instead of the derived id.
    label: str = field(default="", kw_only=True)

    @property
    @abstractmethod
    def id(self) -> str:
        """Stable, unique, readable: 'apt:hello', 'file:/etc/x.conf', 'unit:foo.service'."""

    @property
    def title(self) -> str:
        return self.label or self.id

    @abstractmethod
    def probe(self) -> list[str]:
        """argv whose stdout tells the current state. Must not change anything."""

    @abstractmethod
    def check(self, probe: Probe) -> Outcome:
        """Pure: compare the probe output with the desired state."""

    @abstractmethod
    def apply(self, target: Transport) -> None:
        """Make it so. Raise StepError (with evidence) on failure. Must be safe to repeat."""
