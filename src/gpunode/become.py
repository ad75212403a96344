"""The sudo password for `become` (issue 30): asked once (-K/--ask-become-pass) or read from
$GPUNODE_BECOME_PASSWORD, kept in this process only, registered as a secret so that no output
can quote it, and handed to sudo on its stdin, never on a command line (transport/ssh.py)."""

from __future__ import annotations

import os
import threading

from gpunode.errors import InventoryError
from gpunode.secrets import register

ENV = "GPUNODE_BECOME_PASSWORD"
_lock = threading.Lock()
_asked: str | None = None


def ask(prompt: str = "BECOME password: ") -> None:
    """-K: ask on the terminal, once, before any target is contacted (as ansible-playbook -K)."""
    import getpass

    global _asked
    refusal = InventoryError("-K/--ask-become-pass: there is no terminal to ask the password on",
                             hint=f"run from a terminal, or give it in ${ENV} (kept out of every output)")
    if not _has_terminal():
        raise refusal
    try:
        value = getpass.getpass(prompt)
    except EOFError:  # getpass read stdin (no /dev/tty) and it ended before a line
        raise refusal from None
    register(value)
    with _lock:
        _asked = value


def _has_terminal() -> bool:
    """getpass asks on /dev/tty, else on stdin; without either it would read an empty stdin."""
    import sys

    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
        return True
    except OSError:
        return sys.stdin is not None and sys.stdin.isatty()


def password() -> str | None:
    """The password given with -K, else $GPUNODE_BECOME_PASSWORD, else None."""
    with _lock:
        if _asked is not None:
            return _asked
    value = os.environ.get(ENV) or None
    if value is not None:
        register(value)
    return value
