"""The SSH side of `inv hostkeys.*`: which host to ask and the key it offers.

Apart from the task module so that `inv --list` does not import paramiko and fabric.
"""

from __future__ import annotations

from pathlib import Path

import paramiko
from fabric import Config, Connection

from gpunode.cli.common import load_inventory
from gpunode.errors import ConnectError, HostKeyError, InventoryError
from gpunode.transport import known_hosts, sshconfig
from gpunode.transport.hostkeys import (
    Capture,
    default_known_hosts,
    revoked_error,
)
from gpunode.transport.ssh import SshSettings, close_chain, connection, guard_hops


class Peer:
    """Where to look for a key: an inventory host, or a jump host given as [user@]address[:port]."""

    def __init__(self, inventory: str | None, host: str | None, hop: str | None, known: str | None):
        if bool(host) == bool(hop):
            raise InventoryError("give exactly one of --host NAME (an inventory host) or --hop [user@]ADDRESS[:PORT]",
                                 hint="a jump host named in a refusal is given with --hop, as the message shows")
        if host:
            h = load_inventory(inventory).host(host)
            files = [Path(p).expanduser() for p in h.known_hosts]
            self.files = files or [Path("~/.ssh/known_hosts").expanduser(), default_known_hosts()]
            self.writable = files[0] if files else default_known_hosts()
            # as the runs connect (transport/ssh.connection): ~/.ssh/config's HostName, Port, User
            # where the inventory sets none
            self.conn = connection(SshSettings(name=h.name, address=h.address,
                                               port=h.port if "port" in h.given else None,
                                               user=h.user if "user" in h.given else None))
            self.name, self.address, self.port, self.user = h.name, self.conn.host, self.conn.port, self.conn.user
        else:
            assert hop is not None
            # the hop itself is reached directly; its HostName, Port, User from the config, Includes read
            self.conn = Connection(hop, gateway=False, config=Config(ssh_config=sshconfig.load()))
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
