"""The one exception tree of gpunode.

Every error carries its evidence (the target, the command, its exit code and
the tail of its stderr) and a sentence saying what to do. Only the CLI prints
or exits; everything below it raises one of these.
"""

from __future__ import annotations

import re


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


class RolledBack(StepError):
    """A new server did not come up and its target went back by itself to the generation before
    (steps/rolling.py); `why` says what failed. The engine drops the role's pending restarts:
    its files are the old ones again, and so are its servers."""

    def __init__(self, why: str, *, target: str, generation: str, evidence: str = ""):
        super().__init__(f"rolled back to generation {generation}: {why}", target=target, evidence=evidence,
                         hint="fix the cause shown, then re-run; the servers run the generation before meanwhile")
        self.why = why
        self.generation = generation


class KeptBack(StepError):
    """The engine's own argument check refused the servers' new command lines before any of their files
    changed (steps/judge.py): the target keeps the generation its servers run, which is what a rollback
    would have left, and its recap says so as it says "rolled back" (issue 39)."""

    @property
    def recap(self) -> str:
        return f"not upgraded, the servers keep what they ran: {self.message}"


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


def preview(value: object, limit: int = 60) -> str:
    """A user's value for an error message: repr-like, at most about `limit` characters, and
    cheap however large or deeply nested the value is (reprlib stops at a few levels and items)."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 3, 8, 8, 6, 6
    r.maxstring = r.maxother = r.maxlong = limit
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit - 10]) + f"... ({len(value)} characters)"
    if isinstance(value, int) and value.bit_length() > 200:
        return f"(a whole number of about {value.bit_length() * 30103 // 100000 + 1} digits)"
    text = r.repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: str) -> str:
    """Text for the operator's terminal: control characters (an escape sequence could retitle or
    clear it, a carriage return overwrite a line), line and paragraph separators, bidi overrides and
    lone surrogates shown as \\xNN / \\uNNNN. GPU names, config.json fields and a snapshot's target
    come from the target and reach the screen through here; newlines and tabs stay."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                            else f"\\u{ord(m.group()):04x}", text)
