"""The lab's key held only by a real ssh-agent (issue 30): an inventory without `key:` and a HOME
without keys, and `inv provision --check` still reaches container 200 through the lab's sshd."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
import yaml

from gpunode_lab import paths
from tests.lab.provision_helpers import INV, REPO, lab_host

pytestmark = pytest.mark.lab


@pytest.fixture
def setup(lab, tmp_path):
    host = lab_host()
    del host["key"]
    host["containers"] = {paths.CT_CPU: host["containers"][paths.CT_CPU]}
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump({"hosts": {"lab": host}}, sort_keys=False))
    home = tmp_path / "home"
    home.mkdir()
    sock = tmp_path / "agent.sock"
    out = subprocess.run(["ssh-agent", "-s", "-a", str(sock)], check=True, capture_output=True, text=True).stdout
    pid = int(out.split("SSH_AGENT_PID=")[1].split(";")[0])
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"} | {"HOME": str(home)}
    yield inv, env, sock
    os.kill(pid, signal.SIGTERM)


def check(inv, env):
    done = subprocess.run([str(INV), "provision", "-i", str(inv), "--host", "lab", "--ct", str(paths.CT_CPU),
                           "--check", "--json"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    recap = [line for line in done.stdout.splitlines() if '"type":"recap"' in line]
    return done, (yaml.safe_load(recap[-1]) if recap else None)


def test_provision_check_logs_in_with_the_agents_key(setup):
    inv, env, sock = setup
    done, recap = check(inv, env)  # no key anywhere yet: unreachable, and the message says where a key goes
    assert done.returncode == 4, done.stderr
    assert recap["unreachable"] == 1 and "no key to log in to root@127.0.0.1:2222" in recap["targets"][0]["error"]
    subprocess.run(["ssh-add", "-q", str(paths.CLIENT_KEY)], check=True, capture_output=True,
                   env={**env, "SSH_AUTH_SOCK": str(sock)})
    done, recap = check(inv, {**env, "SSH_AUTH_SOCK": str(sock)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert recap["succeeded"] and recap["targets"][0]["target"] == f"lab/{paths.CT_CPU}"
    assert recap["targets"][0]["round_trips"] >= 1
