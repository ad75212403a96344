"""Host key trust: known_hosts files or a fingerprint pinned in the inventory.

Fabric's Connection installs paramiko's AutoAddPolicy, which trusts any key.
gpunode replaces it with a policy that refuses unknown keys and shows their
SHA256 fingerprint; trusting a key is the explicit `inv hostkeys.trust`.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import paramiko

from gpunode.errors import HostKeyError


def default_known_hosts() -> Path:
    """gpunode's own known_hosts, next to the user's config."""
    base = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
    return Path(os.environ.get("GPUNODE_KNOWN_HOSTS", base / "gpunode" / "known_hosts"))


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style SHA256 fingerprint, e.g. SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


class RefuseUnknown(paramiko.MissingHostKeyPolicy):
    """Accept a key only when it matches the pinned fingerprint; otherwise refuse, showing it."""

    def __init__(self, host: str, pinned: str | None):
        self.host = host
        self.pinned = pinned
        self.seen: paramiko.PKey | None = None

    def missing_host_key(self, client, hostname, key):  # noqa: ANN001 - paramiko's signature
        self.seen = key
        got = fingerprint(key)
        if self.pinned:
            if got == self.pinned:
                return
            raise HostKeyError(
                f"host key of {hostname} is {key.get_name()} {got}, but the inventory pins {self.pinned}",
                target=self.host,
                hint="if the host was reinstalled, update host_key in the inventory; otherwise do not connect",
            )
        raise HostKeyError(
            f"unknown host key for {hostname}: {key.get_name()} {got}",
            target=self.host,
            hint=f"check the fingerprint on the host (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), "
            f"then run `inv hostkeys.trust --host {self.host}` or pin host_key in the inventory",
        )


class Capture(paramiko.MissingHostKeyPolicy):
    """Record the offered key and stop the connection (used by hostkeys.trust)."""

    def __init__(self) -> None:
        self.key: paramiko.PKey | None = None

    def missing_host_key(self, client, hostname, key):  # noqa: ANN001
        self.key = key
        raise paramiko.SSHException("captured host key")


def remember(path: Path, address: str, port: int, key: paramiko.PKey) -> None:
    """Append (or replace) the entry for address:port in a known_hosts file, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    hosts = paramiko.HostKeys()
    if path.exists():
        hosts.load(str(path))
    name = known_hosts_name(address, port)
    hosts.pop(name, None)
    hosts.add(name, key.get_name(), key)
    tmp = path.with_suffix(".tmp")
    hosts.save(str(tmp))
    os.replace(tmp, path)
