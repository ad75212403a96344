"""Become: log in as a user with sudo and run every command as root (Ansible's become, sudo only).

Found once per connection (one extra command): `sudo -n -u U -- true` says whether sudo needs a
password. Without one, commands run as `sudo -n -u U -- ARGV`. With one, the password (-K, or
$GPUNODE_BECOME_PASSWORD: gpunode/become.py) is checked once by `sudo -k -S -p '' -u U -- true`,
and each command runs as `sudo -k -S -p '' -u U -- sh -c GATE gpunode-become ARGV` with the
password as the first line of its stdin and a mark of this connection as the second: sudo reads
the first line one byte at a time, the gate reads the next and runs ARGV on the rest only when it
is the mark. `-k` makes sudo ask every time, so a cached credential never leaves the password for
the command; the gate covers what -k cannot: a sudoers rule that lets `sh` run without a password
(NOPASSWD) or a sudo that stopped reading early. Then the gate reads the password instead of the
mark and refuses: nothing the user gives reaches the command's stdin (issue 41; the password
itself holds no line break: gpunode/become.py). The password is never on a command line, in an
error or a log (it is registered as a secret).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpunode.errors import ConnectError

if TYPE_CHECKING:
    import paramiko

    from gpunode.transport.ssh import SshSettings

SUDO = "sudo"
NEEDS_PASSWORD = ("a password is required", "a terminal is required")
# sudo asks for the password before it looks at the rules: these come after a right one
NOT_ALLOWED = ("is not in the sudoers file", "is not allowed to execute", "may not run sudo")
GATE_REFUSED = 97  # the gate's exit: the line after sudo's was not the mark
# sh's read builtin takes one byte at a time from a pipe, so ARGV's stdin starts right after the mark
GATE_SAYS = "gpunode: sudo did not read the become password"
GATE = ('IFS= read -r line; if [ "$line" != "$1" ]; then echo "' + GATE_SAYS + ' (a NOPASSWD rule for sh?); '
        'not running the command" >&2; exit 97; fi; shift; exec "$@"')


@dataclass(frozen=True)
class Sudo:
    user: str
    password: str | None
    mark: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        if self.password is None:
            return [SUDO, "-n", "-u", self.user, "--", *argv]
        return [SUDO, "-k", "-S", "-p", "", "-u", self.user, "--", "sh", "-c", GATE, "gpunode-become", self.mark,
                *argv]

    def preamble(self) -> bytes:
        """What goes ahead of a wrapped command's stdin: sudo's line, then the gate's."""
        assert self.password is not None
        return self.password.encode() + b"\n" + self.mark.encode() + b"\n"

    @classmethod
    def find(cls, client: paramiko.SSHClient, s: SshSettings) -> Sudo:
        from gpunode import become

        who = f"{s.user or 'the login user'}@{s.address}"
        code, err = _run(client, cls(s.become_user, None).wrap(["true"]), None)
        if code == 0:
            return cls(s.become_user, None)
        if not any(m in err for m in NEEDS_PASSWORD):
            raise ConnectError(f"become: `sudo -u {s.become_user}` as {who} failed (exit {code})", target=s.name,
                               evidence=err.strip()[-2000:],
                               hint="give the login user sudo rights on the host (a sudoers rule), install sudo, "
                               "or log in as root and drop become")
        password = become.password()
        if password is None:
            raise ConnectError(f"become: sudo on {s.address} needs {s.user or 'the login user'}'s password",
                               target=s.name, hint=f"pass -K (--ask-become-pass) to be asked once, or set "
                               f"${become.ENV}; or allow the login user sudo without a password (NOPASSWD)")
        sudo = cls(s.become_user, password)
        code, err = _run(client, sudo.wrap(["true"]), sudo.preamble())
        if code == GATE_REFUSED and GATE_SAYS in err:
            raise ConnectError(f"become: sudo on {s.address} asks {s.user or 'the login user'}'s password for some "
                               "commands but runs `sh` without one (a NOPASSWD rule), so the password line would "
                               "reach the command; nothing was run", target=s.name,
                               hint="give the login user one sudoers rule for all commands: `ALL` (with the "
                               "password) or `NOPASSWD: ALL`")
        if code != 0 and any(m in err for m in NOT_ALLOWED):
            raise ConnectError(f"become: {s.user or 'the login user'} may not `sudo -u {s.become_user}` on "
                               f"{s.address}", target=s.name, evidence=_without(err, password).strip()[-2000:],
                               hint="give the login user sudo rights on the host (a sudoers rule), or log in as "
                               "root and drop become")
        if code != 0:
            raise ConnectError(f"become: sudo on {s.address} refused the password for {s.user or 'the login user'}",
                               target=s.name, evidence=_without(err, password)[-2000:],
                               hint=f"check the password given with -K or ${become.ENV}")
        return sudo


def _without(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def _run(client: paramiko.SSHClient, argv: list[str], preamble: bytes | None) -> tuple[int, str]:
    """One command on an open connection, outside the transport's counting: (exit code, stderr)."""
    from gpunode import shell

    transport = client.get_transport()
    if transport is None:
        raise ConnectError("the SSH connection closed while checking sudo", hint="re-run")
    import paramiko

    try:
        return _exchange(transport.open_session(), shell.join(argv), preamble)
    except (TimeoutError, OSError, EOFError, paramiko.SSHException) as exc:
        raise ConnectError(f"checking sudo failed: {type(exc).__name__}", hint="re-run") from None


def _exchange(chan: paramiko.Channel, line: str, preamble: bytes | None) -> tuple[int, str]:
    try:
        chan.settimeout(30)
        chan.exec_command(line)
        if preamble is not None:
            chan.sendall(preamble)
        chan.shutdown_write()
        err = b""
        while True:
            data = chan.recv_stderr(4096)
            if not data:
                break
            err += data
        code = chan.recv_exit_status()
    finally:
        chan.close()
    return code, err.decode(errors="replace")
