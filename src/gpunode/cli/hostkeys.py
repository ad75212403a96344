"""inv hostkeys.show / hostkeys.trust: look at a host's (or a jump host's) SSH key and trust it explicitly."""

from __future__ import annotations

from invoke import Collection

from gpunode.cli.common import task
from gpunode.errors import HostKeyError

HELP = {"host": "inventory host name", "hop": "a jump host, [user@]address[:port], instead of --host",
        "inventory": "inventory folder or file"}


@task(help=HELP)
def show(c, host=None, hop=None, inventory=None):
    """Print the SSH host key fingerprint a host offers (trusts nothing)."""
    from gpunode.cli.hostkeys_peer import Peer
    from gpunode.transport.hostkeys import fingerprint

    peer = Peer(inventory, host, hop, None)
    key = peer.offered_key()
    print(f"{peer.name} ({peer.address}:{peer.port}) offers {key.get_name()} {fingerprint(key)}")


@task(help={**HELP, "expect": "refuse unless the key has this SHA256:... fingerprint",
            "known-hosts": "the known_hosts file to write (default: the host's first, or gpunode's own)"})
def trust(c, host=None, hop=None, expect=None, known_hosts=None, inventory=None):
    """Trust the key a host offers now: shows its fingerprint and records it in known_hosts.

    Only the lines naming that host change; the file's other lines stay as they are.
    """
    from gpunode.cli.hostkeys_peer import Peer
    from gpunode.transport.hostkeys import fingerprint, remember

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
