"""The sudo password for `become` (issue 30): asked once (-K/--ask-become-pass) or read from
$GPUNODE_BECOME_PASSWORD, kept in this process only, registered as a secret so that no output
can quote it, and handed to sudo on its stdin, never on a command line (transport/ssh.py).

sudo -S reads the password up to the first line break (LF or CR) from the stdin that the command
then reads on: a password holding one would leave its rest for the command (the probe batch is
`sh -s`, so the rest would run as root). Such a password, a NUL, or one longer than sudo's
buffer is refused before any target is contacted (issue 41)."""

from __future__ import annotations

import os
import threading

from gpunode.errors import GpunodeError, InventoryError
from gpunode.secrets import register

ENV = "GPUNODE_BECOME_PASSWORD"
#: sudo_plugin.h's SUDO_CONV_REPL_MAX (255 in plugin API 1.12): sudo reads no more, the rest stays on stdin
MAX_BYTES = 255
_lock = threading.Lock()
_asked: str | None = None


def ask(prompt: str = "BECOME password: ") -> None:
    """-K: ask on the terminal, once, before any target is contacted (as ansible-playbook -K)."""
    import getpass

    global _asked
    try:
        # getpass asks on /dev/tty, else reads stdin's first line (a password piped in, as scripts do)
        value = getpass.getpass(prompt)
    except EOFError:  # neither a terminal nor a line on stdin (</dev/null, cron, CI)
        raise InventoryError("-K/--ask-become-pass: there is no terminal to ask the password on, and no line on "
                             "standard input", hint=f"run from a terminal, pipe the password in, or give it in "
                             f"${ENV} (kept out of every output)") from None
    register(value)
    checked(value, "the password given with -K")
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
        checked(value, f"${ENV}")
    return value


def checked(value: str, source: str) -> str:
    """value, if sudo -S can read it as one line and nothing of it is left for the command."""
    bad = {"\n": "a line break", "\r": "a carriage return", "\0": "a NUL byte"}
    for char, what in bad.items():
        if char in value:
            raise GpunodeError(f"become: {source} holds {what}; sudo reads the password up to the first line "
                               "break and the command would read the rest",
                               hint="give the password alone, on one line; a password with a line break cannot be "
                               "typed at sudo's prompt either")
    try:
        size = len(value.encode())
    except UnicodeEncodeError:  # a lone surrogate from os.environ's surrogateescape: not UTF-8
        raise GpunodeError(f"become: {source} is not valid UTF-8", hint="give the password as text") from None
    if size > MAX_BYTES:
        raise GpunodeError(f"become: {source} is {size} bytes; sudo reads at most {MAX_BYTES}",
                           hint="give the login user a shorter sudo password")
    return value
