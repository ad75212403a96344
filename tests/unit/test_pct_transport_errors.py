"""PctTransport tells pct's own failures from the command's, without a lab (fake host transport)."""

from __future__ import annotations

import pytest

from gpunode.errors import ConnectError
from gpunode.transport.base import Transport


class FakeHost(Transport):
    name = "kpro6"

    def __init__(self, code: int, err: str):
        self.code, self.err = code, err

    def _exec(self, argv, stdin, sink, timeout):
        return self.code, b"", self.err.encode()

    def hold(self, argv, until=""):  # pragma: no cover - not used here
        raise NotImplementedError


def pct_run(code: int, err: str, argv=("true",), vmid=200):
    from gpunode.transport import PctTransport

    return PctTransport(FakeHost(code, err), vmid).run(list(argv))


@pytest.mark.parametrize(("code", "err", "match"), [
    (2, "Configuration file 'nodes/kpro6/lxc/200.conf' does not exist\n", "container 200 on kpro6 does not exist"),
    (255, "container '200' not running!\n", "container 200 on kpro6 is not running"),
    (127, "bash: line 1: /usr/sbin/pct: No such file or directory\n", "pct is not installed on kpro6"),
    (127, "env: ‘nvidia-smi’: No such file or directory\n", "command `nvidia-smi` not found in container 200"),
])
def test_pct_failures_become_connect_errors(code, err, match):
    argv = ["nvidia-smi", "-L"] if "nvidia-smi" in match else ["true"]
    with pytest.raises(ConnectError, match=match):
        pct_run(code, err, argv)


@pytest.mark.parametrize(("code", "err", "argv"), [
    # systemctl says "does not exist" about units; that is the command failing, not the container missing.
    (5, "Unit gpunode-x.service does not exist, proceeding anyway.\nFailed to stop\n", ["systemctl", "stop", "x"]),
    (1, "user alice does not exist\n", ["id", "alice"]),
    # Another container's name in a message, or the phrase later in the output.
    (3, "container '201' not running!\n", ["sh", "-c", "..."]),
    (1, "warming up\nConfiguration file 'nodes/kpro6/lxc/200.conf' does not exist\n", ["sh", "-c", "..."]),
    # A nested env inside the command failing on some other program.
    (127, "env: ‘helper’: No such file or directory\n", ["run-helpers"]),
])
def test_a_commands_own_failure_stays_a_result(code, err, argv):
    result = pct_run(code, err, argv)
    assert result.exit_code == code and result.stderr == err


def test_a_stopped_container_on_a_real_proxmox_host_is_started_with_its_own_pct():
    """Real Proxmox VE's message (pve-container's `pct exec` on a stopped CT): the hint is the host's
    own `pct start`, never `inv lab.up` (the built-in lab's task, which a Proxmox user does not have)."""
    with pytest.raises(ConnectError) as err:
        pct_run(255, "container '200' not running!\n")
    assert err.value.hint == "start it with `pct start 200` on kpro6"
    from gpunode.transport import PctTransport

    with pytest.raises(ConnectError) as err:  # the lab's stand-in, as its inventory's pct_path names it
        PctTransport(FakeHost(255, "container '202' not running!\n"), 202,
                     pct="/var/lib/gpunode-lab/bin/pct").run(["true"])
    assert err.value.hint == "start it with `/var/lib/gpunode-lab/bin/pct start 202` on kpro6"
