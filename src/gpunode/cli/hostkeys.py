"""inv hostkeys.show / hostkeys.trust: look at a host's SSH key and trust it explicitly."""

from __future__ import annotations

from pathlib import Path

import paramiko
from invoke import Collection

from gpunode.cli.common import load_inventory, task
from gpunode.errors import ConnectError, HostKeyError
from gpunode.inventory import Host
from gpunode.transport.hostkeys import Capture, default_known_hosts, fingerprint, remember


def offered_key(host: Host) -> paramiko.PKey:
    """Connect far enough to see the server's host key, then hang up."""
    client = paramiko.SSHClient()
    policy = Capture()
    client.set_missing_host_key_policy(policy)
    try:
        client.connect(host.address, port=host.port, username=host.user, timeout=10,
                       allow_agent=False, look_for_keys=False, password="")
    except (paramiko.SSHException, OSError) as exc:
        if policy.key is None:
            raise ConnectError(f"cannot reach {host.address}:{host.port}: {exc}", target=host.name,
                               hint="check address and port in the inventory") from None
    finally:
        client.close()
    assert policy.key is not None
    return policy.key


@task(help={"host": "inventory host name", "inventory": "inventory folder or file"})
def show(c, host, inventory=None):
    """Print the SSH host key fingerprint a host offers (trusts nothing)."""
    h = load_inventory(inventory).host(host)
    key = offered_key(h)
    print(f"{h.name} ({h.address}:{h.port}) offers {key.get_name()} {fingerprint(key)}")


@task(help={"host": "inventory host name", "expect": "refuse unless the key has this SHA256:... fingerprint",
            "inventory": "inventory folder or file"})
def trust(c, host, expect=None, inventory=None):
    """Trust the key a host offers now: shows its fingerprint and records it in known_hosts."""
    h = load_inventory(inventory).host(host)
    key = offered_key(h)
    got = fingerprint(key)
    print(f"{h.name} ({h.address}:{h.port}) offers {key.get_name()} {got}")
    if expect and expect != got:
        raise HostKeyError(f"the offered key {got} is not the expected {expect}", target=h.name,
                           hint="do not trust it; check the fingerprint on the host's console")
    path = Path(h.known_hosts[0]).expanduser() if h.known_hosts else default_known_hosts()
    remember(path, h.address, h.port, key)
    print(f"trusted: written to {path}")


ns = Collection("hostkeys", show, trust)
