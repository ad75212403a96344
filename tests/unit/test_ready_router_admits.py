"""The readiness wait ends only when the router lists every server as a healthy worker: the
router keeps a worker that failed its first health check out of rotation for a while (seen in
the lab: /workers listed cpu0 alone right after a provision). Against a real local HTTP server
answering /workers as sglang-router 0.3.2 does (tests/data/fleet/router-workers.json)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpunode.errors import StepError
from gpunode.steps.health import Endpoint, Ready
from gpunode.transport import LocalTransport

WORKERS = json.loads((Path(__file__).parents[1] / "data" / "fleet" / "router-workers.json").read_text())


def serve(doc: dict | None):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = json.dumps(doc, separators=(",", ":")).encode() if doc is not None else b"not found"
            self.send_response(200 if doc is not None and self.path == "/workers" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def ready(port: int) -> Ready:
    eps = [Endpoint("cpu0", "gpunode-cpu0.service", "http://127.0.0.1:30001", "m"),
           Endpoint("cpu1", "gpunode-cpu1.service", "http://127.0.0.1:30002", "m"),
           Endpoint("router", "gpunode-router.service", f"http://127.0.0.1:{port}", "m", "/readiness")]
    return Ready(endpoints=eps, ask_s=2)


@pytest.mark.parametrize("doc", [WORKERS, None], ids=["both-listed", "no-workers-route"])
def test_every_server_listed_healthy_or_a_router_without_workers_passes(doc):
    server = serve(doc)
    try:
        ready(server.server_address[1])._router_admits(LocalTransport())
    finally:
        server.shutdown()


def test_a_server_the_router_does_not_list_fails_the_wait_naming_it():
    one = {**WORKERS, "workers": WORKERS["workers"][:1], "total": 1}
    server = serve(one)
    try:
        with pytest.raises(StepError) as info:
            ready(server.server_address[1])._router_admits(LocalTransport())
    finally:
        server.shutdown()
    assert "does not list http://127.0.0.1:30002 as a healthy worker" in info.value.message
