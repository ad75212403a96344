"""Transports: local, SSH, and pct (a command wrapper around another transport)."""

from gpunode.transport.base import Held, Result, Transport
from gpunode.transport.local import LocalTransport
from gpunode.transport.pct import PctTransport
from gpunode.transport.ssh import SshSettings, SshTransport

__all__ = ["Held", "LocalTransport", "PctTransport", "Result", "SshSettings", "SshTransport", "Transport"]
