"""The lab: a local stand-in for a Proxmox VE node, built from real parts.

An OpenSSH server on 127.0.0.1:2222 (own host key, root login by key), real LXC containers
(systemd as PID 1, no network, host folders bind-mounted like Proxmox mount points) made
from a cached Debian rootfs, and a `pct` command that follows real pct's CLI. Containers
install from a local Debian package source and a wheelhouse that the lab bind-mounts.

    import gpunode_lab as lab
    lab.up()        # idempotent; the first run on a machine builds the cache (minutes)
    lab.status()    # plain dict
    lab.down()      # stop everything, keep containers and caches
    lab.destroy()   # also remove containers and state (the cache stays)

Fixed paths are in gpunode_lab.paths. Needs root on a Debian/Ubuntu machine.
"""

from gpunode_lab.common import LabError
from gpunode_lab.node import destroy, down, status, up

__all__ = ["LabError", "destroy", "down", "status", "up"]
