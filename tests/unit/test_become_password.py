"""The become password (issue 41): sudo -S reads it up to the first line break from the stdin the
command then reads on, so a password holding one would hand its rest to the command (the probe
batch is `sh -s`: the rest ran as root). Such a password is refused before any target is
contacted: the inventory's host here is a socket of this test that records every connection."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from gpunode import become
from gpunode.errors import GpunodeError
from gpunode.transport import SshSettings, SshTransport
from gpunode.transport.become import GATE, Sudo

ROOT = Path(__file__).resolve().parents[2]
INV = ROOT / ".venv" / "bin" / "inv"
BAD = {"line-feed": "correct horse\nid > /tmp/x", "carriage-return": "correct horse\rid > /tmp/x",
       "too-long": "x" * 256}  # a NUL cannot be in the environment: -K below


@pytest.fixture
def listener():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        s.settimeout(0)
        yield s


def connected(s: socket.socket) -> bool:
    try:
        s.accept()[0].close()
    except BlockingIOError:
        return False
    return True


@pytest.mark.parametrize("name", list(BAD))
def test_a_password_sudo_cannot_read_as_one_line_is_refused_before_connecting(name, listener, monkeypatch):
    monkeypatch.setenv(become.ENV, BAD[name])
    port = listener.getsockname()[1]
    with pytest.raises(GpunodeError, match=r"become: \$GPUNODE_BECOME_PASSWORD ") as err:
        SshTransport(SshSettings(name="rented", address="127.0.0.1", port=port, user="ubuntu",
                                 become=True)).run(["true"])
    assert "id > /tmp/x" not in str(err.value) and "correct horse" not in str(err.value)
    assert not connected(listener)


def test_provision_refuses_it_with_exit_2_and_contacts_nothing(listener, tmp_path):
    port = listener.getsockname()[1]
    (tmp_path / "hosts.yml").write_text(f"hosts:\n  rented:\n    address: 127.0.0.1\n    port: {port}\n"
                                        "    user: ubuntu\n    become: true\n")
    env = {k: v for k, v in os.environ.items() if k != become.ENV} | {become.ENV: BAD["line-feed"],
                                                                     "HOME": str(tmp_path)}
    done = subprocess.run([str(INV), "provision", "-i", str(tmp_path / "hosts.yml"), "--host", "rented",
                           "--check"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "$GPUNODE_BECOME_PASSWORD holds a line break" in out and "id > /tmp/x" not in out, out
    assert not connected(listener)


@pytest.mark.parametrize(("typed", "what"), [("pass\rword", "a carriage return"), ("pass\0word", "a NUL byte")])
def test_asked_with_k_it_is_refused_the_same(typed, what, monkeypatch):
    monkeypatch.setattr("getpass.getpass", lambda prompt: typed)
    with pytest.raises(GpunodeError, match=f"the password given with -K holds {what}"):
        become.ask()
    assert become._asked is None


def test_the_gate_runs_the_command_on_the_rest_only_after_the_mark():
    """The gate of every sudo command, run here by sh as the target runs it (after sudo took its line)."""
    sudo = Sudo("root", "pw")
    argv = sudo.wrap(["sh", "-c", "cat; echo end"])
    gate = argv[argv.index("--") + 1:]
    assert gate[:3] == ["sh", "-c", GATE]
    ran = subprocess.run(gate, input=f"{sudo.mark}\ndata\n", capture_output=True, text=True)
    assert (ran.returncode, ran.stdout) == (0, "data\nend\n")
    # a sudo that took no password (NOPASSWD for sh) leaves it for the gate: refused, never run
    ran = subprocess.run(gate, input=f"pw\n{sudo.mark}\nid\n", capture_output=True, text=True)
    assert (ran.returncode, ran.stdout) == (97, "") and "sudo did not read the become password" in ran.stderr
