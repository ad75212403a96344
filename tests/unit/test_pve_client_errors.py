"""PveClient's errors against the PVE API stand-in's real HTTPS server (gpunode_lab.pve_api.Server,
certificate made in a temp folder): bad token, TLS failure, wrong node name, API timeout."""

from __future__ import annotations

import shutil
import socket
import subprocess

import pytest

from gpunode.errors import PveError
from gpunode.pve.client import PveClient, PveSettings
from gpunode_lab import pve_api

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl for the certificates")
TOKEN, SECRET = "root@pam!gpunode", "unit-secret-5d1f"


def make_cert(folder, name):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(folder / f"{name}.key"),
                    "-out", str(folder / f"{name}.pem")], check=True, capture_output=True)
    return folder / f"{name}.pem"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("pve-api")
    mp = pytest.MonkeyPatch()
    mp.setattr(pve_api, "API_DIR", d)
    mp.setattr(pve_api, "CERT", make_cert(d, "pve-ssl"))
    mp.setattr(pve_api, "KEY", d / "pve-ssl.key")
    srv = pve_api.serve_in_thread({TOKEN: SECRET})
    yield srv, d
    srv.shutdown()
    mp.undo()


def client(port, verify, secret=SECRET, timeout=10.0):
    return PveClient(PveSettings("127.0.0.1", "root@pam", "gpunode", secret, port=port,
                                 verify_ssl=verify if isinstance(verify, bool) else str(verify),
                                 timeout=timeout))


def test_the_right_token_lists_the_node(server):
    srv, d = server
    assert client(srv.port, d / "pve-ssl.pem").node_names() == ["lab"]


def test_bad_token_names_the_token_not_the_secret(server):
    srv, d = server
    with pytest.raises(PveError) as err:
        client(srv.port, d / "pve-ssl.pem", secret="wrong-secret-0000").node_names()
    assert f"refused token {TOKEN} (401" in err.value.message and "wrong-secret-0000" not in str(err.value)
    assert "token_id" in err.value.hint


def test_tls_failure_says_which_ca_to_give(server, tmp_path):
    srv, _ = server
    other = make_cert(tmp_path, "other-ca")
    with pytest.raises(PveError) as err:
        client(srv.port, other).node_names()
    assert err.value.message == f"TLS verification of https://127.0.0.1:{srv.port}/api2/json failed"
    assert "CERTIFICATE_VERIFY_FAILED" in err.value.evidence and "/etc/pve/pve-root-ca.pem" in err.value.hint


def test_wrong_node_name_lists_the_nodes_there(server):
    srv, d = server
    with pytest.raises(PveError) as err:
        client(srv.port, d / "pve-ssl.pem").check_node("kpro6")
    assert "node 'kpro6' is not in the cluster" in err.value.message and "nodes there: lab" in err.value.hint


def test_api_timeout_is_a_clear_error():
    # A listener that never answers: the TCP handshake completes (backlog), TLS never does.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        with pytest.raises(PveError) as err:
            client(s.getsockname()[1], False, timeout=1.0).node_names()
    assert "no answer within 1 s" in err.value.message and "pve_api.timeout" in err.value.hint


def test_failed_task_shows_its_log_tail(server):
    from gpunode.pve import tasks

    srv, d = server

    def work(log):
        log("starting CT 999")
        log("safe_mount: 1425 No such file or directory - Failed to mount \"/dev/nvidia-modeset\"")
        raise pve_api.Die("startup for container '999' failed")

    upid = srv.api.tasks.start("vzstart", "999", TOKEN, work)
    with pytest.raises(PveError) as err:
        tasks.wait(client(srv.port, d / "pve-ssl.pem"), upid, what="start CT 999", timeout=30)
    assert err.value.message == "task start CT 999 failed on node lab: startup for container '999' failed"
    assert err.value.evidence.splitlines()[-2:] == [
        "safe_mount: 1425 No such file or directory - Failed to mount \"/dev/nvidia-modeset\"",
        "TASK ERROR: startup for container '999' failed"]


def test_a_task_that_outlives_its_timeout_says_so_with_its_log(server):
    """tasks.wait polls through tenacity: the task is still running when the time is up."""
    import threading

    from gpunode.pve import tasks

    srv, d = server
    release = threading.Event()

    def work(log):
        log("extracting template")
        release.wait(60)

    upid = srv.api.tasks.start("vzcreate", "998", TOKEN, work)
    seen: list[str] = []
    try:
        with pytest.raises(PveError) as err:
            tasks.wait(client(srv.port, d / "pve-ssl.pem"), upid, what="create CT 998", timeout=1,
                       progress=seen.append)
    finally:
        release.set()
    assert err.value.message == f"task create CT 998 still runs after 1 s ({upid})"
    assert err.value.evidence.splitlines()[-1] == "extracting template"
    assert seen == ["extracting template"]
    again: list[str] = []  # a new wait follows the log from its start
    status = tasks.wait(client(srv.port, d / "pve-ssl.pem"), upid, timeout=30, progress=again.append)
    assert status["exitstatus"] == "OK" and again == ["extracting template", "TASK OK"]
