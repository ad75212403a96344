"""A loopback HTTP server that answers like PyPI's JSON API from the answers recorded in tests/data/pypi:
`/pypi/<name>/json` is the recorded project JSON; `/files/<file>` a recorded file, with HTTP range
requests as files.pythonhosted.org answers them; anything else (a per-version JSON) is 404, as this
machine's PyPI mirror answers `/pypi/<name>/<version>/json`. `RANGES` lists the ranges asked for."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "pypi"


RANGES: list[str] = []


class _Handler(BaseHTTPRequestHandler):
    def _file(self) -> Path | None:
        parts = self.path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "pypi" and parts[2] == "json":
            file = DATA / f"{parts[1]}.json"
        elif len(parts) == 2 and parts[0] == "files" and parts[1].endswith(".whl"):
            file = DATA / parts[1]
        else:
            return None
        return file if file.is_file() else None

    def _answer(self, head: bool) -> None:
        file = self._file()
        if file is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = file.read_bytes()
        wanted = self.headers.get("Range", "")
        status = 200
        if wanted.startswith("bytes="):
            RANGES.append(wanted)
            first, last = (int(x) for x in wanted[6:].split("-"))
            body, status = body[first:last + 1], 206
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if file.suffix == ".json" else "application/zip")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's names)
        self._answer(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(head=True)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def recorded_pypi() -> Iterator[str]:
    """The base URL (http://127.0.0.1:PORT/pypi) of a server answering from the recorded data; its files
    are under http://127.0.0.1:PORT/files/."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/pypi"
    finally:
        server.shutdown()
        server.server_close()
