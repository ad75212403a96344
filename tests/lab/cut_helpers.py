"""A transport that cuts the SSH connection halfway through one file's upload, for the lab
tests that check a cut mid-write leaves no half file and the re-run converges."""

from __future__ import annotations

from gpunode.transport import PctTransport, SshTransport
from gpunode_lab import paths


class CutDuringUpload(PctTransport):
    """Cuts the SSH connection halfway through streaming one file's content (`path`)."""

    def __init__(self, host: SshTransport, vmid: int, path: str):
        super().__init__(host, vmid, pct=str(paths.PCT), host_name="lab")
        self.path = path
        self.cut = False

    def write_file(self, dest, data, **kwargs):
        if dest != self.path:
            return super().write_file(dest, data, **kwargs)
        return super().write_file(dest, HalfThenCut(bytes(data), self), **kwargs)


class HalfThenCut:
    """A stdin stream that hands over half of the content, then cuts the connection."""

    def __init__(self, raw: bytes, transport: CutDuringUpload):
        self.raw = raw
        self.transport = transport
        self.sent = 0

    def read(self, n: int) -> bytes:
        if self.sent == 0:
            self.sent = len(self.raw) // 2
            return self.raw[: self.sent]
        self.transport.host.drop()  # half the file is on the wire; the rest never arrives
        self.transport.cut = True
        return self.raw[self.sent:]
