"""Ready's probe: ONE command over every endpoint (bash's /dev/tcp, or curl), against real HTTP servers on loopback."""

import os
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpunode.engine import probe as batch
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.health import _WAIT, Endpoint, Ready
from gpunode.transport import LocalTransport


class _Answer(BaseHTTPRequestHandler):
    # /health: 200 like a ready server; /readiness: 503 like SGLang's router before it has workers
    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200 if self.path == "/health" else 503)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _refused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: connecting is refused


def _ready(*eps: Endpoint) -> Ready:
    return Ready(endpoints=list(eps), grace_s=600)


def _three(server: str) -> Ready:
    return _ready(Endpoint("slot0", "s0.service", server, "tiny"), Endpoint("slot1", "s1.service", server, "tiny"),
                  Endpoint("router", "r.service", server, "tiny", "/readiness"))


def test_probe_is_one_command_with_a_status_line_per_endpoint(server):
    step = _three(server)
    argv = step.probe()
    assert argv[:2] == ["sh", "-c"] and argv.count("-o") == 3 and argv.count("curl") == 1
    got = LocalTransport().run(argv)
    assert got.stdout == "200\n200\n503\n"
    outcome = step.check(Probe(got.exit_code, got.stdout))
    assert isinstance(outcome, Change)
    assert outcome.summary.startswith("wait up to 600s for router to answer their health check")


def test_without_bash_the_same_probe_asks_curl(server, tmp_path):
    # A target with no bash (busybox, Alpine): only sh and curl on PATH.
    for prog in ("sh", "curl"):
        (tmp_path / prog).symlink_to(subprocess.run(["sh", "-c", f"command -v {prog}"], capture_output=True,
                                                    text=True, check=True).stdout.strip())
    done = subprocess.run(_three(server).probe(), env={"PATH": str(tmp_path)}, capture_output=True, text=True,
                          timeout=30, check=False)
    assert (done.returncode, done.stdout) == (0, "200\n200\n503\n"), done.stderr


def test_an_endpoint_off_loopback_is_asked_by_curl():
    step = _ready(Endpoint("slot0", "s0.service", "http://127.0.0.1:30001", "tiny"),
                  Endpoint("remote", "r.service", "https://10.0.0.5:30002", "tiny"))
    assert step.probe()[0] == "curl"
    by_name = _ready(Endpoint("slot0", "s0.service", "http://localhost:30001", "tiny"))
    assert by_name.probe()[0] == "curl"


def test_a_server_that_accepts_and_never_answers_counts_as_down(server):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # the kernel completes the connection; nobody ever reads or writes
        wedged = f"http://127.0.0.1:{silent.getsockname()[1]}"
        step = _ready(Endpoint("slot0", "s0.service", wedged, "tiny"), Endpoint("slot1", "s1.service", server, "tiny"))
        [result] = batch.run_batch(LocalTransport(), [step.probe()])
    assert result.output == "000\n200\n"


def test_all_healthy_is_a_noop_naming_the_endpoints(server):
    step = _ready(Endpoint("slot0", "s0.service", server, "tiny"), Endpoint("slot1", "s1.service", server, "tiny"))
    [result] = batch.run_batch(LocalTransport(), [step.probe()])
    assert step.check(result) == NoChange("all 2 endpoints answer their health check with 200 (slot0, slot1)")


def test_a_refused_port_counts_as_down_and_the_next_endpoint_is_still_asked(server):
    # vLLM refuses connections until ready (curl prints 000); SGLang answers 503 while starting.
    step = _ready(Endpoint("slot0", "s0.service", _refused_url(), "tiny"),
                  Endpoint("slot1", "s1.service", server, "tiny"))
    [result] = batch.run_batch(LocalTransport(), [step.probe()])
    assert result.output == "000\n200\n"
    outcome = step.check(result)
    assert isinstance(outcome, Change) and "for slot0 to answer" in outcome.summary


def test_output_cut_short_counts_every_endpoint_as_down():
    step = _ready(Endpoint("slot0", "s0.service", "http://127.0.0.1:1", "tiny"),
                  Endpoint("slot1", "s1.service", "http://127.0.0.1:2", "tiny"))
    outcome = step.check(Probe(127, "sh: 1: curl: not found\n"))
    assert isinstance(outcome, Change) and "for slot0, slot1 to answer" in outcome.summary
    assert isinstance(step.check(Probe(0, "200\n")), Change)


@pytest.mark.parametrize("restarts, code, last", [
    ("2", 3, "@@failed gpunode-cpu1.service"),  # crashed twice, restarted by systemd: failed at once
    ("1", 4, "@@timeout gpunode-cpu1.service"),  # one crash at start: still loading (and said so)
    ("", 4, "@@timeout gpunode-cpu1.service"),  # systemd too busy to answer: still loading, not a crash
])
def test_the_wait_calls_a_unit_failed_only_on_a_restart_count_it_read(tmp_path, restarts, code, last):
    # systemctl as the wait sees it: the unit is not in the failed state, NRestarts as given
    fake = tmp_path / "systemctl"
    fake.write_text(f'#!/bin/sh\ncase "$1" in is-failed) exit 1 ;; show) printf "%s" "{restarts}" ;; esac\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    argv = ["sh", "-c", _WAIT, "sh", "1", "cpu1", "gpunode-cpu1.service", _refused_url(), "/health"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)
    assert (done.returncode, done.stdout.splitlines()[-1]) == (code, last), done.stdout + done.stderr
    assert ("restarted once" in done.stdout) == (restarts == "1"), done.stdout
