"""Transports: local, SSH, and pct (a command wrapper around another transport).

The SSH transport is imported on first use, not with the package: paramiko and Fabric cost
~0.2 s of CPU to import, and offline commands (`resolve --nvidia-smi`, `--help`, `--list`) reach
this package only for its types (facts.probe names Transport)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpunode.transport.base import Held, Result, Transport
from gpunode.transport.local import LocalTransport
from gpunode.transport.pct import PctTransport

if TYPE_CHECKING:
    from gpunode.transport.ssh import SshSettings, SshTransport

__all__ = ["Held", "LocalTransport", "PctTransport", "Result", "SshSettings", "SshTransport", "Transport"]


def __getattr__(name: str) -> Any:
    if name in ("SshSettings", "SshTransport"):
        from gpunode.transport import ssh

        return getattr(ssh, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
