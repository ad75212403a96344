"""~/.ssh/config's Include lines are followed as OpenSSH follows them, against a real OpenSSH server
(issue 41: paramiko kept `Include` as a setting and never opened the file, so a Host block kept in
~/.ssh/config.d/ was silently unread); a loop, a missing file, a FIFO and an Include gpunode cannot
follow are errors naming the file and line, before anything is contacted."""

from __future__ import annotations

import os

import pytest

from gpunode.errors import ConnectError
from gpunode.transport import SshSettings, SshTransport
from tests.unit.sshd_helpers import client_login, start_sshd


@pytest.fixture
def server(tmp_path, monkeypatch):
    client, authorized = client_login(tmp_path)
    sshd = start_sshd(tmp_path / "sshd", "127.0.0.2", authorized)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_line())
    yield sshd, client, home / ".ssh", known
    sshd.stop()


def login(name: str, known) -> str:
    t = SshTransport(SshSettings(name=name, address=name, known_hosts=(str(known),), connect_timeout=5))
    try:
        return t.run(["id", "-un"], check=True).stdout
    finally:
        t.close()


def block(sshd, client, host: str = "gpu-box") -> str:
    return f"Host {host}\n  HostName {sshd.address}\n  Port {sshd.port}\n  User root\n  IdentityFile {client}\n"


def test_a_host_block_in_an_included_folder_is_used(server):
    sshd, client, dot_ssh, known = server
    (dot_ssh / "config.d").mkdir()
    (dot_ssh / "config.d" / "10-lab.conf").write_text(block(sshd, client))
    (dot_ssh / "config").write_text("Include config.d/*.conf\n\nHost other\n  User nobody\n")
    assert login("gpu-box", known) == "root\n"
    assert any("Accepted publickey for root" in line for line in sshd.log)


def test_lines_after_an_include_stay_in_their_block_and_an_empty_glob_is_nothing(server):
    sshd, client, dot_ssh, known = server
    (dot_ssh / "port.conf").write_text(f"Port {sshd.port}\n")  # settings only, no block of its own
    (dot_ssh / "config").write_text(
        f"Include ~/.ssh/none.d/*\nHost gpu-box\n  HostName {sshd.address}\n  Include port.conf\n"
        f"  User root\n  IdentityFile {client}\nHost *\n  User nobody\n")
    assert login("gpu-box", known) == "root\n"


@pytest.mark.parametrize(("files", "said"), [
    ({"config": "Include a.conf\n", "a.conf": "Include b.conf\n", "b.conf": "Include a.conf\n"},
     r"Include lines lead round in a loop: .*/config -> .*/a\.conf -> .*/b\.conf -> .*/a\.conf"),
    ({"config": "Host gpu-box\n  Port 22\n\nInclude extra/lab.conf\n"},
     r"config:4: Include names .*/\.ssh/extra/lab\.conf, which does not exist"),
    ({"config": "Host gpu-box\n  Include lab.conf\n", "lab.conf": "Host db\n  Port 2200\n"},
     r"config:2: Include of .*lab\.conf inside the block `Host gpu-box`, and .* has Host or Match blocks"),
    ({"config": "Include \"lab.conf\n"}, r"config:1: Include has an unclosed quote"),
    ({"config": "Include ${GPUNODE_NO_SUCH_VAR}/x.conf\n"}, r"config:1: Include uses \$\{GPUNODE_NO_SUCH_VAR\}"),
])
def test_an_include_gpunode_cannot_follow_is_named_before_connecting(server, files, said):
    sshd, _, dot_ssh, known = server
    for name, text in files.items():
        (dot_ssh / name).write_text(text)
    with pytest.raises(ConnectError, match=said) as err:
        login("gpu-box", known)
    assert err.value.hint
    assert not [line for line in sshd.log if "Connection from" in line or "Accepted" in line]


def test_an_included_fifo_is_refused_not_waited_on(server):
    sshd, _, dot_ssh, known = server
    os.mkfifo(dot_ssh / "lab.conf")
    (dot_ssh / "config").write_text("Include lab.conf\n")
    with pytest.raises(ConnectError, match=r"lab\.conf: ssh config file is a named pipe \(FIFO\)"):
        login("gpu-box", known)
