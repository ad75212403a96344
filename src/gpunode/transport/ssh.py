"""SSH transport: one Fabric/paramiko connection per host, reused for every command.

Commands cross as one line built by gpunode.shell.join, so the remote login
shell parses it back into exactly our argv. stdin and stdout are streamed in
chunks; stderr is read on its own thread so neither stream can stall the other.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import paramiko
from fabric import Config, Connection

from gpunode import shell
from gpunode.errors import ConnectError, HostKeyError
from gpunode.transport import known_hosts, sshconfig
from gpunode.transport.base import CHUNK, Deadline, Held, Sink, Stdin, Transport, feed, probe_deadline, read_held
from gpunode.transport.become import Sudo
from gpunode.transport.hostkeys import (
    RefuseUnknown,
    default_known_hosts,
    fingerprint,
    revoked_error,
    trust_hint,
)


@dataclass(frozen=True)
class SshSettings:
    """port and user None: ~/.ssh/config's Port and User for the address, else 22 and root."""

    name: str
    address: str
    port: int | None = None
    user: str | None = None
    key_file: str | None = None
    host_key: str | None = None  # pinned "SHA256:..." fingerprint
    known_hosts: tuple[str, ...] = ()
    connect_timeout: float = 10.0
    #: log in as `user`, run every command as `become_user` through sudo (Ansible's become)
    become: bool = False
    become_user: str = "root"


KILL_AFTER = 5  # seconds between timeout's SIGTERM and its SIGKILL on the target


class SshTransport(Transport):
    def __init__(self, settings: SshSettings):
        self.settings = settings
        self.name = settings.name
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self.commands_run = 0
        self._sudo: Sudo | None = None  # how commands escalate, found once a connection is open
        if settings.become:
            from gpunode import become

            become.password()  # a password sudo cannot read as one line is refused before connecting

    # -- connection --------------------------------------------------------------

    def _client(self) -> paramiko.SSHClient:
        with self._lock:
            if self._conn is not None and self._conn.is_connected:
                return self._conn.client
            self._conn = self._open()
            if self.settings.become and self._sudo is None:
                try:
                    self._sudo = Sudo.find(self._conn.client, self.settings)
                except BaseException:
                    close_chain(self._conn)
                    self._conn = None
                    raise
            return self._conn.client

    def _open(self) -> Connection:
        s = self.settings
        try:
            conn = connection(s)
        except ValueError as exc:  # Fabric's int() of a Port that is no number
            raise ConnectError(f"~/.ssh/config's entry for {s.address} cannot be read: {str(exc)[:120]}",
                               target=s.name, hint="fix that Host block (Port is a number, e.g. Port 22)") from None
        except RecursionError:  # Fabric builds a Connection per ProxyJump hop, and a loop never ends
            raise ConnectError(f"~/.ssh/config's ProxyJump hops for {s.address} lead round in a loop",
                               target=s.name, hint="fix the ProxyJump lines of those Host blocks") from None
        except ConnectError as exc:  # an Include it cannot follow (transport/sshconfig.py)
            exc.target = exc.target or s.name
            raise
        files = [Path(p).expanduser() for p in s.known_hosts] or [
            Path("~/.ssh/known_hosts").expanduser(), default_known_hosts()]
        trusted = known_hosts.load(files)
        revoked = frozenset(trusted.revoked)
        writable = files[0] if s.known_hosts else default_known_hosts()
        client = conn.client
        trust_only(client, trusted.host_keys)  # Fabric may have preloaded; these files decide
        policy = RefuseUnknown(s.name, s.host_key, revoked, known=writable)
        client.set_missing_host_key_policy(policy)
        guard_hops(conn, trusted, s.name, writable)
        where = f"{conn.user}@{conn.host}:{conn.port}"
        via = _hops(conn)
        try:
            conn.open()
        except HostKeyError:
            close_chain(conn)
            raise
        except paramiko.BadHostKeyException as exc:
            close_chain(conn)
            hop = _hop_named(conn, exc.hostname)
            what = f"jump host {hop}" if hop else where
            if exc.key.asbytes() in revoked:
                raise revoked_error(what, exc.key, s.name) from None
            raise HostKeyError(
                f"host key of {what} CHANGED: now {exc.key.get_name()} {fingerprint(exc.key)}, "
                f"known as {fingerprint(exc.expected_key)}",
                target=s.name,
                hint="someone may be intercepting the connection; if the host was reinstalled, "
                f"{trust_hint(s.name, hop, writable)} after checking the new fingerprint",
            ) from None
        except paramiko.AuthenticationException as exc:
            raise ConnectError(
                f"authentication refused by {where}{via} ({exc})",
                target=s.name,
                hint=f"check user and key in the inventory or ~/.ssh/config (keys tried: {keys_tried(conn)})",
            ) from None
        except paramiko.SSHException as exc:
            close_chain(conn)
            if str(exc) != "No authentication methods available":
                raise _unreachable(s.name, where, via, exc) from None
            raise ConnectError(
                f"no key to log in to {where}{via} with: no key file, no ssh-agent (SSH_AUTH_SOCK), no ~/.ssh/id_*",
                target=s.name,
                hint="set `key:` for the host in the inventory, an IdentityFile in ~/.ssh/config, or load the key "
                "into ssh-agent (ssh-add)",
            ) from None
        except (TimeoutError, socket.gaierror, ConnectionError, OSError, EOFError) as exc:
            close_chain(conn)
            raise _unreachable(s.name, where, via, exc) from None
        if s.host_key and policy.seen is None:
            # The key came from known_hosts; still honour the pin.
            got = fingerprint(client.get_transport().get_remote_server_key())
            if got != s.host_key:
                close_chain(conn)
                raise HostKeyError(f"host key of {where} is {got}, but the inventory pins {s.host_key}",
                                   target=s.name, hint="update host_key in the inventory once verified")
        client.get_transport().set_keepalive(15)
        sock = client.get_transport().sock
        if isinstance(sock, socket.socket):
            # paramiko leaves Nagle on: every small request then waits for the peer's delayed
            # ACK, ~40 ms a command on Linux. With TCP_NODELAY a command costs one round trip.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                close_chain(self._conn)
                self._conn = None

    def drop(self) -> None:
        """Cut the TCP connection abruptly (fault injection in tests)."""
        with self._lock:
            if self._conn is not None and self._conn.client.get_transport():
                self._conn.client.get_transport().sock.close()

    # -- commands ----------------------------------------------------------------

    def _channel(self, argv: Sequence[str]) -> paramiko.Channel:
        # Not Fabric's Connection.run (Invoke's Runner): it decodes output and reads stdin as text, while
        # files, probes and held commands cross this channel as bytes, in chunks, under one deadline.
        client = self._client()
        transport = client.get_transport()
        try:
            if transport is None:  # _client() connects; None means it closed since
                raise paramiko.SSHException("the connection is closed")
            chan = transport.open_session()
            sudo = self._sudo
            chan.exec_command(shell.join(sudo.wrap(argv) if sudo else argv))
            if sudo is not None and sudo.password is not None:
                chan.sendall(sudo.preamble())  # sudo -S reads one line, the gate the next; the rest is the command's
        except (paramiko.SSHException, EOFError, OSError) as exc:
            self._conn = None
            raise ConnectError(f"lost the SSH connection to {self.settings.address}: {exc}",
                               target=self.name, hint="re-run; gpunode resumes where it stopped") from None
        self.commands_run += 1
        return chan

    def _exec(self, argv: Sequence[str], stdin: Stdin, sink: Sink | None, timeout: float | None):
        started = time.monotonic()
        if timeout:
            # Enforced on the target: closing the channel alone leaves the command running
            # there (no pty, so no SIGHUP), still holding what it holds (dpkg's lock, a GPU).
            # SIGTERM reaches a command in a container too: lxc-attach passes it on.
            argv = ["timeout", "-k", str(KILL_AFTER), f"{timeout:.3f}", *argv]
        chan = self._channel(argv)
        errs: list[bytes] = []
        failures: list[BaseException] = []

        def pump_err() -> None:
            # The channel timeout (set below for stdout) applies here too: a quiet
            # stderr is not an end, only EOF (b"") or a dead connection is.
            while True:
                try:
                    data = chan.recv_stderr(CHUNK)
                except TimeoutError:
                    transport = chan.get_transport()
                    if chan.closed or transport is None or not transport.is_active():
                        return
                    continue
                if not data:
                    return
                errs.append(data)

        def pump_in() -> None:
            try:
                for chunk in feed(stdin):
                    chan.sendall(chunk)
                chan.shutdown_write()
            except (OSError, EOFError, paramiko.SSHException) as exc:
                failures.append(exc)

        readers = [threading.Thread(target=pump_err, daemon=True)]
        if stdin is not None:
            readers.append(threading.Thread(target=pump_in, daemon=True))
        else:
            chan.shutdown_write()
        for t in readers:
            t.start()
        out: list[bytes] = []
        # The local deadline is only the fallback for a target that stopped answering.
        deadline = started + timeout + KILL_AFTER + 5 if timeout else None
        chan.settimeout(1.0)
        while True:
            try:
                data = chan.recv(CHUNK)
            except TimeoutError:
                if deadline and time.monotonic() > deadline:
                    chan.close()
                    return 124, b"".join(out), b"timed out\n"
                if chan.get_transport() is None or not chan.get_transport().is_active():
                    break
                continue
            if not data:
                break
            (sink.write(data) if sink is not None else out.append(data))
        for t in readers:
            t.join(timeout=30)
        transport = chan.get_transport()
        if not chan.exit_status_ready() and (transport is None or not transport.is_active()):
            self._conn = None
            raise ConnectError(f"the SSH connection to {self.settings.address} dropped during "
                               f"`{shell.join(argv)[:120]}`", target=self.name,
                               hint="re-run; steps converge and half-written files are never left behind")
        code = chan.recv_exit_status()
        chan.close()
        if timeout and code in (124, 137) and time.monotonic() - started >= timeout:
            errs.append(f"timed out after {timeout:g} s\n".encode())
        if code == -1:
            self._conn = None
            raise ConnectError(f"the SSH connection to {self.settings.address} dropped",
                               target=self.name, hint="re-run; gpunode resumes where it stopped")
        return code, b"".join(out), b"".join(errs)

    def hold(self, argv: Sequence[str], until: str = "") -> Held:
        chan = self._channel(argv)
        read = Deadline(chan.recv, chan.settimeout, probe_deadline())
        try:
            line, body = read_held(read, until)
        except TimeoutError:
            # Closing the channel closes the lock shell's stdin: its watcher ends the probe (engine/lock.py).
            chan.close()
            raise read.error(self.name) from None
        chan.settimeout(None)

        def close(wait: bool) -> None:
            try:
                chan.shutdown_write()
                if wait:
                    chan.recv_exit_status()
                chan.close()
            except (OSError, EOFError, paramiko.SSHException):
                pass

        return Held(first_line=line, _close=close, body=body)



def _unreachable(name: str, where: str, via: str, exc: BaseException) -> ConnectError:
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        # paramiko's own text is "[Errno None] Unable to connect to port 22 on 10.0.0.5"; the
        # socket's error per address says what happened ("[Errno 111] Connection refused")
        exc = OSError("; ".join(dict.fromkeys(str(e) for e in exc.errors.values())) or str(exc))
    return ConnectError(
        f"cannot reach {where}{via}: {exc}",
        target=name,
        hint="check that the host is up, the address and port in the inventory (or ~/.ssh/config), and that sshd "
        "runs" + (" (and the ProxyJump in ~/.ssh/config)" if via else ""),
    )


def connection(s: SshSettings) -> Connection:
    """A Fabric Connection as ssh would make it: ~/.ssh/config's Host entry for the address gives
    HostName, User, Port, IdentityFile and ProxyJump where the inventory sets none, keys held by
    ssh-agent (SSH_AUTH_SOCK) are offered after the inventory's key, and IdentitiesOnly yes keeps
    to the named keys. Without a key anywhere, ssh's usual ~/.ssh/id_* files are tried. The config
    files are read with their Include lines followed (transport/sshconfig.py), which Fabric skips."""
    kwargs: dict = {"allow_agent": True, "look_for_keys": s.key_file is None}
    if s.key_file:
        kwargs["key_filename"] = [str(Path(s.key_file).expanduser())]
    conn = Connection(s.address, user=s.user, port=s.port, connect_timeout=s.connect_timeout,
                      connect_kwargs=kwargs, config=Config(ssh_config=sshconfig.load()))
    if s.user is None and "user" not in conn.ssh_config:
        conn.user = "root"  # gpunode's default; Fabric's would be the local login name
    if conn.ssh_config.get("identityfile"):
        conn.connect_kwargs["look_for_keys"] = False  # as ssh: named keys replace the default ones
    if str(conn.ssh_config.get("identitiesonly", "")).lower() == "yes" and conn.connect_kwargs.get("key_filename"):
        conn.connect_kwargs["allow_agent"] = False
    return conn


def keys_tried(conn: Connection) -> str:
    """What authentication offered, for the hint of a refusal (paths and the agent, never key material)."""
    kw = conn.connect_kwargs
    parts = [str(k) for k in kw.get("key_filename") or []]
    if kw.get("allow_agent") and os.environ.get("SSH_AUTH_SOCK"):
        parts.append("ssh-agent's keys")
    if kw.get("look_for_keys"):
        parts.append("~/.ssh/id_*")
    return ", ".join(parts) or "none"


def trust_only(client: paramiko.SSHClient, keys: paramiko.HostKeys) -> None:
    """The client checks host keys against `keys` alone (through paramiko's public HostKeys API):
    Fabric's Connection loads ~/.ssh/known_hosts into it by itself."""
    mine = client.get_host_keys()
    mine.clear()
    for host in keys:
        for keytype, key in keys[host].items():
            mine.add(host, keytype, key)


def guard_hops(conn: Connection, trusted: known_hosts.Trust, name: str, writable: Path) -> None:
    """Check every ProxyJump hop's key like the host's.

    A ProxyJump in ~/.ssh/config makes Fabric build a Connection per hop, each with
    AutoAddPolicy: without this, a hop's key would be trusted whatever it is.
    """
    hop = conn.gateway
    while isinstance(hop, Connection):
        label = f"{hop.user}@{hop.host}:{hop.port}"
        trust_only(hop.client, trusted.host_keys)
        hop.client.set_missing_host_key_policy(
            RefuseUnknown(name, None, frozenset(trusted.revoked), hop=label, known=writable))
        hop = hop.gateway


def _hop_named(conn: Connection, hostname: str) -> str | None:
    """user@address:port of the hop paramiko names by address, None when it is the host."""
    hop = conn.gateway
    while isinstance(hop, Connection):
        if hop.host == hostname:
            return f"{hop.user}@{hop.host}:{hop.port}"
        hop = hop.gateway
    return None


def _hops(conn: Connection) -> str:
    """' via user@hop:port, ...' for a connection through ProxyJump hops, else ''."""
    names = []
    hop = conn.gateway
    while isinstance(hop, Connection):
        names.append(f"{hop.user}@{hop.host}:{hop.port}")
        hop = hop.gateway
    return f" via jump host {', '.join(reversed(names))}" if names else ""


def close_chain(conn: Connection) -> None:
    """Close a connection and its ProxyJump hops (Fabric's close leaves the hops open)."""
    hop: object = conn
    while isinstance(hop, Connection):
        hop.close()
        hop = hop.gateway
