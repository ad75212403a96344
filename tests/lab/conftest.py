"""Fixtures for tests that need the running lab (`inv lab.up`): real sshd, LXC, pct stand-in.

- `lab`: the lab's status; skips when it is down, or FAILS when CI=true (CI brings it up).
- `host_transport`: one SshTransport to the lab's sshd (known_hosts + key), for the session.
- `ct`: PctTransport into container 200 through that SSH connection.
- `fleet`: one fresh container provisioned once for the session (tests/lab/shared_fleet.py).
"""

from __future__ import annotations

import os

import pytest

from gpunode.transport import PctTransport, SshSettings, SshTransport
from gpunode_lab import paths
from tests.lab.shared_fleet import fleet  # noqa: F401  (the session's one provisioned fleet)


def lab_settings(**overrides) -> SshSettings:
    """SshSettings for the lab's sshd; tests override fields to provoke failures."""
    values = dict(
        name="lab",
        address=paths.SSH_ADDRESS,
        port=paths.SSH_PORT,
        user=paths.SSH_USER,
        key_file=str(paths.CLIENT_KEY),
        known_hosts=(str(paths.KNOWN_HOSTS),),
        connect_timeout=5.0,
    )
    values.update(overrides)
    return SshSettings(**values)


def pytest_collection_modifyitems(items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.lab)


@pytest.fixture(scope="session")
def lab():
    from gpunode_lab import status

    st = status()
    if not st["up"]:
        detail = ", ".join(f"{vmid} {c['state']}" for vmid, c in st["containers"].items())
        why = f"the lab is not up (sshd {'running' if st['sshd']['running'] else 'stopped'}; {detail})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}: .ci/run must bring it up with `inv lab.up` before pytest", pytrace=False)
        pytest.skip(f"{why}: run `inv lab.up` first")
    return st


@pytest.fixture(scope="session")
def host_transport(lab):
    transport = SshTransport(lab_settings())
    yield transport
    transport.close()


@pytest.fixture(scope="session")
def ct(host_transport):
    return PctTransport(host_transport, paths.CT_CPU, pct=str(paths.PCT), host_name="lab")
