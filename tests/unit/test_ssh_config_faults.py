"""~/.ssh/config and known_hosts faults are errors that name them, before any connection (issue 41):
`Port twentytwo` was a ValueError, a ProxyJump loop a RecursionError, a FIFO known_hosts a hang."""

from __future__ import annotations

import os

import pytest

from gpunode.errors import ConnectError
from gpunode.transport import SshSettings, SshTransport


@pytest.fixture
def home(tmp_path, monkeypatch):
    (tmp_path / ".ssh").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(("config", "host", "said"), [
    ("Host badport\n  Port twentytwo\n", "badport", "~/.ssh/config's entry for badport cannot be read"),
    ("Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n", "a", "ProxyJump hops for a lead round in a loop"),
])
def test_an_ssh_config_gpunode_cannot_read_is_named(home, config, host, said):
    (home / ".ssh" / "config").write_text(config)
    with pytest.raises(ConnectError, match=said):
        SshTransport(SshSettings(name="x", address=host, connect_timeout=2)).run(["true"])


def test_a_fifo_known_hosts_is_refused_not_waited_on(home, tmp_path):
    fifo = tmp_path / "known_hosts"
    os.mkfifo(fifo)
    with pytest.raises(ConnectError, match=r"known_hosts file is a named pipe \(FIFO\)"):
        SshTransport(SshSettings(name="x", address="127.0.0.1", port=1, known_hosts=(str(fifo),),
                                 connect_timeout=2)).run(["true"])
