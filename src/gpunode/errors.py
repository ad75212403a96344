"""The one exception tree of gpunode.

Every error carries its evidence (the target, the command, its exit code and
the tail of its stderr) and a sentence saying what to do. Only the CLI prints
or exits; everything below it raises one of these.
"""

from __future__ import annotations


class GpunodeError(Exception):
    """Base class. `hint` says what the user can do about it."""

    def __init__(self, message: str, *, hint: str = "", target: str = "", evidence: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.target = target
        self.evidence = evidence

    def __str__(self) -> str:
        parts = [f"{self.target}: {self.message}" if self.target else self.message]
        if self.evidence:
            parts.append(self.evidence.rstrip())
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


class ConnectError(GpunodeError):
    """The target could not be reached: network, auth, host key, pct, container state."""


class HostKeyError(ConnectError):
    """The host key is unknown or differs from the one we trust."""


class CommandError(GpunodeError):
    """A command that had to succeed on a target failed."""


class InventoryError(GpunodeError, ValueError):
    """The inventory is malformed or names something that does not exist."""


class FactError(GpunodeError):
    """A probe's output could not be understood."""


class ResolveError(GpunodeError):
    """No known-good stack fits the facts; the message says what blocked it."""


class StepError(GpunodeError):
    """A step could not check or apply its change."""


class LockError(GpunodeError):
    """Another run holds the target's lock."""


class PveError(GpunodeError):
    """The Proxmox API refused or a task (UPID) failed."""


def tail(text: str, lines: int = 15) -> str:
    """The last lines of a command's output, for error evidence."""
    kept = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join(kept)


INTERNAL_EXIT = 70  # EX_SOFTWARE: a bug in gpunode, as opposed to bad input (2)


def internal_report(exc: BaseException) -> str:
    """A short report of an unexpected exception: its type and where it was raised.

    The exception's message is left out on purpose: it may quote a value
    from the inventory or --set (a token, a password).
    """
    import traceback
    from pathlib import Path

    frames = traceback.extract_tb(exc.__traceback__)
    # The package's own files, by their folder: a checkout that is itself named "gpunode"
    # (the README's clone) would otherwise count its tests and scripts as the package.
    package = Path(__file__).resolve().parent
    own = [f for f in frames if package in Path(f.filename).resolve().parents] or frames
    where = f" in {Path(own[-1].filename).name}:{own[-1].lineno} ({own[-1].name})" if own else ""
    return (f"internal error: {type(exc).__name__}{where}. This is a bug in gpunode; please report it with the "
            "command you ran (leave out secrets). GPUNODE_DEBUG=1 shows the full traceback, values included.")
