"""ProxyJump hops are verified like any host, against real sshd processes.

A hop (127.0.0.2, forwarding allowed) and a target (127.0.0.3) run as real OpenSSH servers;
~/.ssh/config (HOME points into tmp) says the target is reached through the hop, which is
how a user configures it and how Fabric picks the gateway.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from gpunode.errors import ConnectError, HostKeyError
from gpunode.transport import SshSettings, SshTransport
from tests.unit.sshd_helpers import client_login, keygen, start_sshd

GPUNODE = [sys.executable, "-c", "from gpunode.cli.main import main; main()"]


@pytest.fixture
def jump(tmp_path, monkeypatch):
    client, authorized = client_login(tmp_path)
    hop = start_sshd(tmp_path / "hop", "127.0.0.2", authorized, forwarding=True)
    target = start_sshd(tmp_path / "target", "127.0.0.3", authorized)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host 127.0.0.3\n  ProxyJump root@127.0.0.2:{hop.port}\n"
        f"Host 127.0.0.2\n  IdentityFile {client}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.setenv("GPUNODE_KNOWN_HOSTS", str(tmp_path / "gpunode_known_hosts"))
    yield hop, target, client, tmp_path
    hop.stop()
    target.stop()


def transport(target, client, known) -> SshTransport:
    return SshTransport(SshSettings(name="gpu1", address=target.address, port=target.port,
                                    key_file=str(client), known_hosts=(str(known),), connect_timeout=5))


def test_unknown_hop_is_refused_with_its_fingerprint_then_trusted_then_works(jump):
    hop, target, client, tmp = jump
    known = tmp / "known_hosts"
    known.write_text(target.known_line())  # the target is known, the hop is not
    t = transport(target, client, known)
    with pytest.raises(HostKeyError) as err:
        t.run(["true"])
    assert f"unknown host key for jump host root@127.0.0.2:{hop.port}" in str(err.value)
    assert hop.fingerprint in str(err.value)
    command = re.search(r"`inv (hostkeys\.trust [^`]+)`", err.value.hint)
    assert command, err.value.hint
    assert not any("Accepted publickey" in line for line in hop.log)  # refused before logging in

    # The command from the hint, as a user runs it.
    proc = subprocess.run([*GPUNODE, *command.group(1).split()], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert hop.fingerprint in proc.stdout
    assert known.read_text() == target.known_line() + hop.known_line()

    t = transport(target, client, known)
    assert t.run(["echo", "through the hop"], check=True).stdout == "through the hop\n"
    t.close()
    assert any("Accepted publickey for root" in line for line in hop.log)
    assert any("Accepted publickey for root" in line for line in target.log)


def test_hop_with_another_key_in_known_hosts_is_refused(jump):
    hop, target, client, tmp = jump
    kind, blob = keygen(tmp / "impostor")
    known = tmp / "known_hosts"
    known.write_text(target.known_line() + f"{hop.known_name} {kind} {blob}\n")
    with pytest.raises(HostKeyError, match="CHANGED") as err:
        transport(target, client, known).run(["true"])
    assert f"jump host root@127.0.0.2:{hop.port}" in str(err.value)
    assert hop.fingerprint in str(err.value)
    assert "--hop" in err.value.hint
    assert not any("Accepted publickey" in line for line in hop.log + target.log)


def test_revoked_hop_key_is_refused_even_when_also_listed_as_known(jump):
    hop, target, client, tmp = jump
    known = tmp / "known_hosts"
    kind, blob = hop.pub
    known.write_text(target.known_line() + hop.known_line() + f"@revoked * {kind} {blob}\n")
    with pytest.raises(HostKeyError, match="REVOKED") as err:
        transport(target, client, known).run(["true"])
    assert hop.fingerprint in str(err.value)


def test_trust_of_a_host_behind_a_hop_goes_through_the_verified_hop(jump, tmp_path):
    hop, target, client, tmp = jump
    known = tmp / "known_hosts"
    known.write_text("")
    inv = tmp / "hosts.yml"
    inv.write_text(f"hosts:\n  gpu1:\n    address: {target.address}\n    port: {target.port}\n"
                   f"    key: {client}\n    known_hosts: [{known}]\n")
    proc = subprocess.run([*GPUNODE, "hostkeys.trust", "--host", "gpu1", "-i", str(inv)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "jump host" in proc.stderr and hop.fingerprint in proc.stderr
    assert "Traceback" not in proc.stderr
    assert known.read_text() == ""  # nothing trusted through an unverified hop

    known.write_text(hop.known_line())
    proc = subprocess.run([*GPUNODE, "hostkeys.trust", "--host", "gpu1", "-i", str(inv)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert target.fingerprint in proc.stdout
    assert known.read_text() == hop.known_line() + target.known_line()


def test_a_hop_that_is_down_is_named_in_the_error(jump):
    hop, target, client, tmp = jump
    known = tmp / "known_hosts"
    known.write_text(target.known_line() + hop.known_line())
    hop.stop()
    with pytest.raises(ConnectError) as err:
        transport(target, client, known).run(["true"])
    assert f"via jump host root@127.0.0.2:{hop.port}" in str(err.value)
    assert "ProxyJump" in err.value.hint


def test_a_known_hosts_path_that_is_a_folder_is_a_clear_error(jump):
    _, target, client, tmp = jump
    with pytest.raises(HostKeyError, match=f"{tmp}: known_hosts file is a folder, not a file"):
        transport(target, client, tmp).run(["true"])
