"""Handlers: actions that fire once, after the steps that notified them.

Pending handler names are persisted on the target (see journal.py), so the
next run must be able to rebuild a handler from its name alone. The generic
ones are therefore resolved by pattern: "daemon-reload", "restart:<unit>",
"reload:<unit>". A role may declare its own under any other name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gpunode.steps.base import Command, run_all
from gpunode.transport.base import Transport

DAEMON_RELOAD = "daemon-reload"
_UNIT = re.compile(r"^[A-Za-z0-9:_.@\\-]+$")
_SYSTEMCTL = re.compile(r"^(restart|reload|try-restart):(.+)$")

@runtime_checkable
class Handler(Protocol):
    @property
    def name(self) -> str:
        """The name steps notify, and the line persisted while it is pending."""

    def commands(self) -> list[Command]:
        """What it runs, in order, as data (shown by `inv provision --commands`)."""

    def run(self, target: Transport) -> None:
        """Do the action; raise a GpunodeError with evidence when it fails."""


_RETRY = "fix the cause shown above and re-run: the handler stays pending until it succeeds"


@dataclass(frozen=True)
class CommandHandler:
    """A handler that runs one command, which must succeed."""

    name: str
    argv: tuple[str, ...]

    def commands(self) -> list[Command]:
        return [Command(self.argv, f"handler {self.name}", failure=f"handler {self.name} failed", hint=_RETRY)]

    def run(self, target: Transport) -> None:
        run_all(self.commands(), target)


@dataclass(frozen=True)
class SystemctlHandler:
    """`systemctl <action> <unit>`; on failure the evidence is the unit's status."""

    name: str
    action: str
    unit: str

    def commands(self) -> list[Command]:
        return [Command(("systemctl", self.action, self.unit), f"handler {self.name}",
                        failure=f"`systemctl {self.action} {self.unit}` failed",
                        hint=f"see `journalctl -u {self.unit}` on the target; the {self.action} stays pending "
                        "and is retried by the next run",
                        evidence=("systemctl", "status", "--no-pager", "--lines=20", self.unit))]

    def run(self, target: Transport) -> None:
        run_all(self.commands(), target)


def generic(name: str) -> Handler | None:
    """The handler a generic name stands for, or None if the name is not generic."""
    if name == DAEMON_RELOAD:
        return CommandHandler(name, ("systemctl", "daemon-reload"))
    match = _SYSTEMCTL.match(name)
    if match and _UNIT.match(match.group(2)):
        return SystemctlHandler(name, match.group(1), match.group(2))
    return None


def resolve(name: str, declared: Mapping[str, Handler]) -> Handler | None:
    """A role's own handler wins over the generic meaning of the same name."""
    return declared.get(name) or generic(name)


def ordered(names: Iterable[str], declared: Mapping[str, Handler]) -> list[str]:
    """Each name once: daemon-reload first (restarts need the new unit files), then the
    role's declared handlers in declaration order, then the rest as first notified."""
    seen = list(dict.fromkeys(names))
    first = [n for n in seen if n == DAEMON_RELOAD]
    mine = [n for n in declared if n in seen and n != DAEMON_RELOAD]
    rest = [n for n in seen if n not in first and n not in mine]
    return first + mine + rest
