"""Keys from ssh-agent and Host entries of ~/.ssh/config, against a real OpenSSH server and a real
ssh-agent (issue 30): a rented host's key often lives only in the agent (or a hardware token behind
it), and its address, port and user in ~/.ssh/config."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from gpunode import inventory
from gpunode.cli.session import Session
from gpunode.errors import ConnectError
from gpunode.transport import SshSettings, SshTransport
from tests.unit.sshd_helpers import client_login, keygen, start_sshd


@pytest.fixture
def server(tmp_path, monkeypatch):
    """An sshd that lets in one client key, a HOME without keys or config, and no agent."""
    client, authorized = client_login(tmp_path)
    sshd = start_sshd(tmp_path / "sshd", "127.0.0.2", authorized)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_line())
    yield sshd, client, home, known
    sshd.stop()


@pytest.fixture
def agent(tmp_path, monkeypatch):
    """A real ssh-agent on a socket of this test; add(key) loads a key. Ended by its pid."""
    sock = tmp_path / "agent.sock"
    out = subprocess.run(["ssh-agent", "-s", "-a", str(sock)], check=True, capture_output=True, text=True).stdout
    pid = int(out.split("SSH_AGENT_PID=")[1].split(";")[0])
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))

    def add(key: Path) -> None:
        subprocess.run(["ssh-add", "-q", str(key)], check=True, capture_output=True,
                       env={**os.environ, "SSH_AUTH_SOCK": str(sock)})

    yield add
    os.kill(pid, signal.SIGTERM)


def accepted(sshd) -> list[str]:
    return [line for line in sshd.log if "Accepted publickey" in line]


def test_a_key_held_only_by_the_agent_logs_in(server, agent):
    sshd, client, _, known = server
    agent(client)
    client.unlink()  # not on disk: only the agent has it
    t = SshTransport(SshSettings(name="rented", address=sshd.address, port=sshd.port, known_hosts=(str(known),)))
    assert t.run(["echo", "via the agent"], check=True).stdout == "via the agent\n"
    t.close()
    assert any("for root" in line for line in accepted(sshd))


def test_without_the_agent_there_is_no_key_and_the_error_says_where_one_goes(server):
    sshd, _, _, known = server
    t = SshTransport(SshSettings(name="rented", address=sshd.address, port=sshd.port, known_hosts=(str(known),)))
    with pytest.raises(ConnectError, match="no key to log in to root@127.0.0.2") as err:
        t.run(["true"])
    assert "ssh-agent (ssh-add)" in err.value.hint and "IdentityFile" in err.value.hint
    assert accepted(sshd) == []


def test_a_refusal_names_the_keys_it_tried(server, agent, tmp_path):
    sshd, _, _, known = server
    keygen(tmp_path / "stranger")
    agent(tmp_path / "stranger")
    t = SshTransport(SshSettings(name="rented", address=sshd.address, port=sshd.port, known_hosts=(str(known),)))
    with pytest.raises(ConnectError, match="authentication refused by root@127.0.0.2") as err:
        t.run(["true"])
    assert "keys tried: ssh-agent's keys, ~/.ssh/id_*" in err.value.hint


def test_a_host_entry_of_ssh_config_gives_address_port_user_and_key(server, tmp_path):
    sshd, client, home, known = server
    (home / ".ssh" / "config").write_text(
        f"Host gpu-box\n  HostName {sshd.address}\n  Port {sshd.port}\n  User root\n  IdentityFile {client}\n")
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump({"hosts": {"gpu-box": {"address": "gpu-box", "known_hosts": str(known)}}}))
    host = inventory.load(inv).hosts["gpu-box"]
    with Session() as session:
        t = session.host_transport(host)
        assert t.run(["id", "-un"], check=True).stdout == "root\n"
    assert accepted(sshd)


def test_the_inventory_wins_over_ssh_config(server, tmp_path):
    sshd, client, home, known = server
    (home / ".ssh" / "config").write_text(f"Host {sshd.address}\n  Port 1\n  User nobody\n")
    t = SshTransport(SshSettings(name="h", address=sshd.address, port=sshd.port, user="root", key_file=str(client),
                                 known_hosts=(str(known),)))
    assert t.run(["id", "-un"], check=True).stdout == "root\n"
    t.close()


def test_identities_only_keeps_the_agent_out(server, agent, tmp_path):
    sshd, client, home, known = server
    agent(client)
    _, _ = keygen(tmp_path / "other")  # a key the server does not know
    (home / ".ssh" / "config").write_text(f"Host {sshd.address}\n  IdentityFile {tmp_path / 'other'}\n"
                                          "  IdentitiesOnly yes\n")
    t = SshTransport(SshSettings(name="h", address=sshd.address, port=sshd.port, known_hosts=(str(known),)))
    with pytest.raises(ConnectError, match="authentication refused"):
        t.run(["true"])
    (home / ".ssh" / "config").write_text(f"Host {sshd.address}\n  IdentityFile {tmp_path / 'other'}\n")
    t = SshTransport(SshSettings(name="h", address=sshd.address, port=sshd.port, known_hosts=(str(known),)))
    assert t.run(["true"]).ok  # without IdentitiesOnly the agent's key is offered after it
    t.close()
