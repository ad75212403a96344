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

from gpunode.errors import StepError, tail
from gpunode.transport.base import Transport

DAEMON_RELOAD = "daemon-reload"
_UNIT = re.compile(r"^[A-Za-z0-9:_.@\\-]+$")
_SYSTEMCTL = re.compile(r"^(restart|reload|try-restart):(.+)$")

# When the action fails, the unit's status is the evidence a user needs first.
_SYSTEMCTL_SCRIPT = (
    'systemctl "$1" "$2" 2>&1 && exit 0; rc=$?; echo "--- systemctl status $2:"; '
    'systemctl status --no-pager --lines=20 "$2" 2>&1; exit $rc'
)


@runtime_checkable
class Handler(Protocol):
    @property
    def name(self) -> str:
        """The name steps notify, and the line persisted while it is pending."""

    def run(self, target: Transport) -> None:
        """Do the action; raise a GpunodeError with evidence when it fails."""


@dataclass(frozen=True)
class CommandHandler:
    """A handler that runs one command, which must succeed."""

    name: str
    argv: tuple[str, ...]

    def run(self, target: Transport) -> None:
        result = target.run(list(self.argv))
        if not result.ok:
            raise StepError(
                f"handler {self.name} failed with exit code {result.exit_code}",
                target=target.name,
                evidence=tail(result.stdout + result.stderr, 25),
                hint="fix the cause shown above and re-run: the handler stays pending until it succeeds",
            )


@dataclass(frozen=True)
class SystemctlHandler:
    """`systemctl <action> <unit>`; on failure the evidence is the unit's status."""

    name: str
    action: str
    unit: str

    def run(self, target: Transport) -> None:
        result = target.script(_SYSTEMCTL_SCRIPT, self.action, self.unit)
        if not result.ok:
            raise StepError(
                f"`systemctl {self.action} {self.unit}` failed with exit code {result.exit_code}",
                target=target.name,
                evidence=tail(result.stdout + result.stderr, 30),
                hint=f"see `journalctl -u {self.unit}` on the target; the {self.action} stays pending "
                "and is retried by the next run",
            )


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
