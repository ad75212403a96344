"""Shared bits for the engine tests: the shipped role-testing kit (gpunode/testing.py)."""

from __future__ import annotations

from gpunode.testing import Collect, RecordingTransport, snapshot

CountingTransport = RecordingTransport

__all__ = ["Collect", "CountingTransport", "snapshot"]
