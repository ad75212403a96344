"""A loopback HTTP server that answers like PyPI's JSON API from the answers recorded in tests/data/pypi:
`/pypi/<name>/json` is the recorded project JSON; anything else (a per-version JSON, a file) is 404, as
this machine's PyPI mirror answers `/pypi/<name>/<version>/json`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "pypi"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        parts = self.path.strip("/").split("/")
        file = DATA / f"{parts[1]}.json" if len(parts) == 3 and parts[0] == "pypi" and parts[2] == "json" else None
        if file is None or not file.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = file.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def recorded_pypi() -> Iterator[str]:
    """The base URL (http://127.0.0.1:PORT/pypi) of a server answering from the recorded data."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/pypi"
    finally:
        server.shutdown()
        server.server_close()
