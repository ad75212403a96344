"""Wiring from inventory targets to transports: one SSH connection per host per run."""

from __future__ import annotations

import threading

from gpunode.inventory import Host, Target
from gpunode.transport import LocalTransport, PctTransport, SshSettings, SshTransport, Transport


class Session:
    """Owns the connections of one run; close() releases them all."""

    def __init__(self) -> None:
        self._hosts: dict[str, Transport] = {}
        self._lock = threading.Lock()

    def host_transport(self, host: Host) -> Transport:
        with self._lock:
            if host.name not in self._hosts:
                if host.connection == "local":
                    self._hosts[host.name] = LocalTransport(host.name)
                else:
                    self._hosts[host.name] = SshTransport(SshSettings(
                        name=host.name, address=host.address,
                        port=host.port if "port" in host.given else None,
                        user=host.user if "user" in host.given else None,
                        become=host.become, become_user=host.become_user,
                        key_file=host.key, host_key=host.host_key, known_hosts=host.known_hosts))
            return self._hosts[host.name]

    def transport(self, target: Target) -> Transport:
        base = self.host_transport(target.host)
        if target.container is None:
            return base
        return PctTransport(base, target.container.vmid, pct=target.host.pct_path, host_name=target.host.name)

    def close(self) -> None:
        with self._lock:
            for t in self._hosts.values():
                t.close()
            self._hosts.clear()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
