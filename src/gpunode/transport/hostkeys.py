"""Host key trust: known_hosts files or a fingerprint pinned in the inventory.

Fabric's Connection installs paramiko's AutoAddPolicy, which trusts any key.
gpunode replaces it with a policy that refuses unknown keys and shows their
SHA256 fingerprint; trusting a key is the explicit `inv hostkeys.trust`. The same holds
for every ProxyJump hop on the way, and a key listed `@revoked` is refused everywhere.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import paramiko

from gpunode.durable import locked, write_atomic
from gpunode.errors import HostKeyError
from gpunode.transport import known_hosts


def default_known_hosts() -> Path:
    """gpunode's own known_hosts, next to the user's config ($GPUNODE_KNOWN_HOSTS or the config
    files' `known_hosts:` name another)."""
    from gpunode import settings

    base = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
    return Path(settings.current().known_hosts or base / "gpunode" / "known_hosts")


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style SHA256 fingerprint, e.g. SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


def trust_hint(host: str, hop: str | None, known: Path) -> str:
    check = "check the fingerprint on the host (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), then run "
    if hop:
        return check + f"`inv hostkeys.trust --hop {hop} --known-hosts {known}` to trust the jump host"
    return check + f"`inv hostkeys.trust --host {host}` or pin host_key in the inventory"


def revoked_error(where: str, key: paramiko.PKey, host: str) -> HostKeyError:
    return HostKeyError(
        f"host key of {where} is REVOKED in known_hosts: {key.get_name()} {fingerprint(key)}",
        target=host,
        hint="a revoked key is never accepted: the host must get a new key, which you then trust",
    )


class RefuseUnknown(paramiko.MissingHostKeyPolicy):
    """Accept a key only when it matches the pinned fingerprint; otherwise refuse, showing it.

    `hop` names a ProxyJump hop (user@address:port): its key is checked like the host's,
    and the hint says how to trust the hop itself.
    """

    def __init__(self, host: str, pinned: str | None, revoked: frozenset[bytes] = frozenset(),
                 hop: str | None = None, known: Path | None = None):
        self.host = host
        self.pinned = pinned
        self.revoked = revoked
        self.hop = hop
        self.known = known or default_known_hosts()
        self.seen: paramiko.PKey | None = None

    def missing_host_key(self, client, hostname, key):  # noqa: ANN001 - paramiko's signature
        self.seen = key
        got = fingerprint(key)
        what = f"jump host {self.hop}" if self.hop else hostname
        if key.asbytes() in self.revoked:
            raise revoked_error(what, key, self.host)
        if self.pinned:
            if got == self.pinned:
                return
            raise HostKeyError(
                f"host key of {hostname} is {key.get_name()} {got}, but the inventory pins {self.pinned}",
                target=self.host,
                hint="if the host was reinstalled, update host_key in the inventory; otherwise do not connect",
            )
        raise HostKeyError(
            f"unknown host key for {what}: {key.get_name()} {got}",
            target=self.host,
            hint=trust_hint(self.host, self.hop, self.known),
        )


class Capture(paramiko.MissingHostKeyPolicy):
    """Record the offered key and stop the connection (used by hostkeys.trust)."""

    def __init__(self) -> None:
        self.key: paramiko.PKey | None = None

    def missing_host_key(self, client, hostname, key):  # noqa: ANN001
        self.key = key
        raise paramiko.SSHException("captured host key")


def remember(path: Path, address: str, port: int, key: paramiko.PKey) -> list[str]:
    """Trust `key` alone for address:port in a known_hosts file, atomically.

    Only the lines naming that host change (an alias on a shared line keeps its key);
    comments, markers, other hosts and key types paramiko cannot read stay byte for byte.
    Returns one sentence per change.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path, wait=True, create_mode=0o600):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        new, changes = known_hosts.replace_host(data, known_hosts_name(address, port), key)
        write_atomic(path, new, mode=0o600)
    return changes
