"""The sudo password for `become` (issue 30): asked once (-K/--ask-become-pass) or read from
$GPUNODE_BECOME_PASSWORD, kept in this process only, registered as a secret so that no output
can quote it, and handed to sudo on its stdin, never on a command line (transport/ssh.py)."""

from __future__ import annotations

import os
import threading

from gpunode.secrets import register

ENV = "GPUNODE_BECOME_PASSWORD"
_lock = threading.Lock()
_asked: str | None = None


def ask(prompt: str = "BECOME password: ") -> None:
    """-K: ask on the terminal, once, before any target is contacted (as ansible-playbook -K)."""
    import getpass

    global _asked
    value = getpass.getpass(prompt)
    register(value)
    with _lock:
        _asked = value


def password() -> str | None:
    """The password given with -K, else $GPUNODE_BECOME_PASSWORD, else None."""
    with _lock:
        if _asked is not None:
            return _asked
    value = os.environ.get(ENV) or None
    if value is not None:
        register(value)
    return value
