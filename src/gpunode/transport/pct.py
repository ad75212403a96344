"""Pct transport: run inside an LXC container with `pct exec <vmid> -- ...`.

It owns no socket: it wraps the transport of the Proxmox host (SSH, or local
when gpunode runs on the host) and only rewrites argv. `env -i` keeps the
host's environment out of the container (real pct keeps it by default), and
pct is called by absolute path because non-login SSH sessions may lack
/usr/sbin on PATH.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from gpunode.errors import CommandError, ConnectError
from gpunode.transport.base import Held, Result, Sink, Stdin, Transport

KILL_AFTER = 5  # seconds between timeout's SIGTERM and its SIGKILL in the container
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BASE_ENV = {"PATH": CONTAINER_PATH, "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}

# pct's own messages come before the command runs, so they open stderr; a command that
# merely mentions "does not exist" (systemctl does) or another container is not pct failing.
_MISSING = r"\AConfiguration file 'nodes/[^'/]+/lxc/{vmid}\.conf' does not exist$"
_STOPPED = r"\Acontainer '{vmid}' not running!$"
_NOT_FOUND_IN_CT = re.compile(r"\Aenv: ['‘]?([^'’]+?)['’]?: No such file or directory$", re.M)


class PctTransport(Transport):
    def __init__(self, host: Transport, vmid: int, *, pct: str = "/usr/sbin/pct", host_name: str | None = None):
        self.host = host
        self.vmid = int(vmid)
        self.pct = pct
        self.host_name = host_name or host.name
        self.name = f"{self.host_name}/{self.vmid}"

    def wrap(self, argv: Sequence[str]) -> list[str]:
        env = [f"{k}={v}" for k, v in BASE_ENV.items()]
        return [self.pct, "exec", str(self.vmid), "--", "env", "-i", *env, *argv]

    def _exec(self, argv: Sequence[str], stdin: Stdin, sink: Sink | None, timeout: float | None):
        if not timeout:
            return self.host._exec(self.wrap(argv), stdin, sink, timeout)
        # The deadline inside the container: `timeout` there ends the command's whole process
        # group (an installer's children too); the host's, later, only pct and what it passes
        # the signal to. The host's stays as the fallback for a container that stopped answering.
        started = time.monotonic()
        code, out, err = self.host._exec(self.wrap(["timeout", "-k", str(KILL_AFTER), f"{timeout:.3f}", *argv]),
                                         stdin, sink, timeout + 2 * KILL_AFTER)
        if code in (124, 137) and time.monotonic() - started >= timeout and b"timed out after" not in err:
            err += f"timed out after {timeout:g} s\n".encode()   # as the host's own deadline says it
        return code, out, err

    def hold(self, argv: Sequence[str], until: str = "") -> Held:
        try:
            return self.host.hold(self.wrap(argv), until)
        except CommandError as exc:  # the probe's deadline: it ran in the container, not on the host
            exc.target = self.name
            raise

    def close(self) -> None:
        self.host.close()

    def _raise_for_transport(self, result: Result) -> None:
        if result.ok:
            return
        err = result.stderr
        where = f"container {self.vmid} on {self.host_name}"
        if result.exit_code == 127 and (self.pct in err or "pct: not found" in err or "pct: command not found" in err):
            raise ConnectError(
                f"pct is not installed on {self.host_name} (looked for {self.pct})",
                target=self.name,
                hint="is this a Proxmox VE host? set pct_path in the inventory if pct lives elsewhere, "
                "or drop `containers:` for a plain SSH host",
                evidence=err.strip(),
            )
        if re.search(_MISSING.format(vmid=self.vmid), err, re.M):
            raise ConnectError(
                f"{where} does not exist",
                target=self.name,
                hint=f"check the vmid in the inventory; `pct list` on {self.host_name} shows the containers",
                evidence=err.strip(),
            )
        if re.search(_STOPPED.format(vmid=self.vmid), err, re.M):
            raise ConnectError(
                f"{where} is not running",
                target=self.name,
                hint=f"start it with `{'pct' if self.pct == '/usr/sbin/pct' else self.pct} start {self.vmid}` "
                     f"on {self.host_name}",
                evidence=err.strip(),
            )
        missing = _NOT_FOUND_IN_CT.search(err)
        if result.exit_code == 127 and missing and result.argv and missing.group(1) == result.argv[0]:
            raise ConnectError(
                f"command `{missing.group(1)}` not found in {where}",
                target=self.name,
                hint="the base role installs what gpunode needs; run it first, or install the package by hand",
                evidence=err.strip(),
            )
