"""inv hostkeys.show / hostkeys.trust: look at a host's (or a jump host's) SSH key and trust it explicitly."""

from __future__ import annotations

from pathlib import Path

import paramiko
from fabric import Connection
from invoke import Collection

from gpunode.cli.common import load_inventory, task
from gpunode.errors import ConnectError, HostKeyError, InventoryError
from gpunode.transport import known_hosts
from gpunode.transport.hostkeys import (
    Capture,
    default_known_hosts,
    fingerprint,
    revoked_error,
)
from gpunode.transport.ssh import close_chain, guard_hops


class Peer:
    """Where to look for a key: an inventory host, or a jump host given as [user@]address[:port]."""

    def __init__(self, inventory: str | None, host: str | None, hop: str | None, known: str | None):
        if bool(host) == bool(hop):
            raise InventoryError("give exactly one of --host NAME (an inventory host) or --hop [user@]ADDRESS[:PORT]",
                                 hint="a jump host named in a refusal is given with --hop, as the message shows")
        if host:
            h = load_inventory(inventory).host(host)
            self.name, self.address, self.port, self.user = h.name, h.address, h.port, h.user
            files = [Path(p).expanduser() for p in h.known_hosts]
            self.files = files or [Path("~/.ssh/known_hosts").expanduser(), default_known_hosts()]
            self.writable = files[0] if files else default_known_hosts()
            self.conn = Connection(h.address, user=h.user, port=h.port)
        else:
            assert hop is not None
            self.conn = Connection(hop, gateway=False)  # the hop itself is reached directly
            self.name = hop
            self.address, self.port, self.user = self.conn.host, self.conn.port, self.conn.user
            self.writable = Path(known).expanduser() if known else default_known_hosts()
            self.files = [self.writable]
        if known:
            self.writable = Path(known).expanduser()
            self.files = [self.writable]

    def offered_key(self) -> paramiko.PKey:
        """Connect far enough to see the server's host key, then hang up.

        A host behind a ProxyJump is reached through its hops, whose keys must be trusted
        already: a key seen through an unverified hop proves nothing.
        """
        trusted = known_hosts.load(self.files)
        guard_hops(self.conn, trusted, self.name, self.writable)
        client = paramiko.SSHClient()
        policy = Capture()
        client.set_missing_host_key_policy(policy)
        try:
            sock = self.conn.open_gateway() if self.conn.gateway else None
            client.connect(self.address, port=self.port, username=self.user, timeout=10, sock=sock,
                           allow_agent=False, look_for_keys=False, password="")
        except HostKeyError:
            raise
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if policy.key is None:
                raise ConnectError(f"cannot reach {self.address}:{self.port}: {exc}", target=self.name,
                                   hint="check address and port (and the ProxyJump in ~/.ssh/config)") from None
        finally:
            client.close()
            close_chain(self.conn)
        assert policy.key is not None
        key = policy.key
        if key.asbytes() in trusted.revoked:
            raise revoked_error(f"{self.address}:{self.port}", key, self.name)
        return key


HELP = {"host": "inventory host name", "hop": "a jump host, [user@]address[:port], instead of --host",
        "inventory": "inventory folder or file"}


@task(help=HELP)
def show(c, host=None, hop=None, inventory=None):
    """Print the SSH host key fingerprint a host offers (trusts nothing)."""
    peer = Peer(inventory, host, hop, None)
    key = peer.offered_key()
    print(f"{peer.name} ({peer.address}:{peer.port}) offers {key.get_name()} {fingerprint(key)}")


@task(help={**HELP, "expect": "refuse unless the key has this SHA256:... fingerprint",
            "known-hosts": "the known_hosts file to write (default: the host's first, or gpunode's own)"})
def trust(c, host=None, hop=None, expect=None, known_hosts=None, inventory=None):
    """Trust the key a host offers now: shows its fingerprint and records it in known_hosts.

    Only the lines naming that host change; the file's other lines stay as they are.
    """
    from gpunode.transport.hostkeys import remember

    peer = Peer(inventory, host, hop, known_hosts)
    key = peer.offered_key()
    got = fingerprint(key)
    print(f"{peer.name} ({peer.address}:{peer.port}) offers {key.get_name()} {got}")
    if expect and expect != got:
        raise HostKeyError(f"the offered key {got} is not the expected {expect}", target=peer.name,
                           hint="do not trust it; check the fingerprint on the host's console")
    for change in remember(peer.writable, peer.address, peer.port, key):
        print(f"  {peer.writable}: {change}")
    print(f"trusted: written to {peer.writable}")


ns = Collection("hostkeys", show, trust)
