"""Reading PyPI's answers (gpunode/knowledge/releases.py), on answers recorded from pypi.org (tests/data/pypi)."""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path

import pytest

from gpunode.knowledge import releases
from gpunode.knowledge.releases import PypiError
from tests.unit.pypi_server import RANGES, recorded_pypi

DATA = Path(__file__).resolve().parents[1] / "data" / "pypi"


def recorded(name: str) -> releases.Project:
    return releases.parse_project(json.loads((DATA / f"{name}.json").read_text()), f"https://pypi.org/pypi/{name}/json")


def meta(file: str) -> releases.Metadata:
    return releases.parse_metadata((DATA / file).read_text(), f"tests/data/pypi/{file}")


def test_newest_release_of_each_package():
    assert {n: recorded(n).newest().version for n in ("sglang", "sglang-kernel", "flashinfer-python", "torch")} == \
        {"sglang": "0.5.23", "sglang-kernel": "0.4.10", "flashinfer-python": "0.7.4", "torch": "2.15.0"}


def test_yanked_releases_are_skipped():
    tf = recorded("transformers")
    yanked = next(r for r in tf.releases if r.version == "5.10.0")
    assert yanked.yanked
    # on the day 5.10.0 was uploaded it was the highest version; the newest a pin set may take was the one before
    then = tf.as_of(yanked.uploaded)
    assert then.releases[-1].version == "5.10.0"
    assert then.newest().version == "5.9.0"
    assert "5.10.0" not in [r.version for r in tf.newer_than("5.9.0")]


def test_pre_releases_are_skipped():
    sg = recorded("sglang")
    rc = next(r for r in sg.releases if r.version == "0.5.10rc0")
    then = sg.as_of(rc.uploaded)       # 2026-03-27: 0.5.10rc0 was sglang's highest version for a while
    assert then.releases[-1].version == "0.5.10rc0"
    assert then.newest().version == "0.5.9"
    assert [r.version for r in then.newer_than("0.5.8.post1")] == ["0.5.9"]


def test_releases_newer_than_a_pin():
    fi = recorded("flashinfer-python")
    # 0.7.2rc3..rc6 were uploaded after 0.7.2 but are older versions, and pre-releases
    assert [r.version for r in fi.newer_than("0.7.2")] == ["0.7.2.post1", "0.7.4"]


def test_requires_dist_pins_for_linux():
    m = meta("sglang-0.5.22.METADATA")
    pins = m.pins()
    assert (m.name, m.version, m.requires_python) == ("sglang", "0.5.22", ">=3.11")
    assert str(pins["torch"]) == "torch==2.14.1"
    assert str(pins["sglang-kernel"]) == "sglang-kernel==0.4.9"
    assert str(pins["flashinfer-python"]) == "flashinfer_python[cu13]==0.7.1"
    assert "torchcodec" in pins and "torchcodec" not in m.pins(machine="aarch64")   # its marker excludes aarch64
    assert not any(str(r.marker or "").count("extra") for r in pins.values())       # optional extras left out


def test_project_info_answers_for_the_newest_release():
    """Where PyPI has no per-version JSON (404, as this machine's mirror answers), the project's `info`
    holds the newest release's requirements."""
    with recorded_pypi() as base:
        sg = releases.project("sglang", base)
        m = releases.metadata(sg, "0.5.23", base)
    assert m.source == f"{base}/sglang/json" and "sglang-kernel==0.4.10" in m.requires
    assert sg.newest().version == "0.5.23"


def test_unknown_names_and_releases_are_named():
    with recorded_pypi() as base:
        with pytest.raises(PypiError, match=r"sglang-kernels is not on PyPI .*404"):
            releases.project("sglang-kernels", base)
        with pytest.raises(PypiError, match=r"sglang 9\.9\.9 is not on PyPI"):
            releases.metadata(releases.project("sglang", base), "9.9.9", base)


def test_pypi_unreachable_says_what_is_needed():
    with pytest.raises(PypiError, match="needs https://pypi.org"):
        releases.project("sglang", "http://127.0.0.1:9/pypi")   # discard port: nothing listens


def test_a_project_json_without_releases_is_refused():
    with pytest.raises(PypiError, match="no info.name or releases"):
        releases.parse_project({"message": "Not Found"}, "https://pypi.org/pypi/sglang/json")


def test_a_wheels_metadata_is_read_by_range_requests():
    """The way requirements are read where PyPI has no per-version JSON: the zip's directory and its
    METADATA member, fetched by HTTP range requests (a real wheel from PyPI, served on loopback)."""
    wheel = DATA / "nvidia_ml_py-13.615.71-py3-none-any.whl"
    RANGES.clear()
    with recorded_pypi() as base:
        text = releases.wheel_metadata(base.replace("/pypi", "/files/") + wheel.name)
    m = releases.parse_metadata(text, wheel.name)
    assert (m.name, m.version) == ("nvidia-ml-py", "13.615.71")
    with zipfile.ZipFile(wheel) as z:
        assert text == z.read("nvidia_ml_py-13.615.71.dist-info/METADATA").decode()
    assert RANGES and all(r.startswith("bytes=") for r in RANGES)


# --- issue 41: PyPI's answer is capped and its shape checked ------------------------------------

@pytest.mark.parametrize(("doc", "said"), [
    ({"info": {"name": "x"}, "releases": {"1.0": "not a list"}}, "not shaped as a PyPI project JSON"),
    ({"info": {"name": "x"}, "releases": [1, 2]}, "not shaped as a PyPI project JSON"),
    ({"info": {"name": "x\x1b[2J"}, "releases": {}}, "not shaped as a PyPI project JSON"),
    ({"info": {"name": "x"}, "releases": {"1.0": [{"upload_time": "\x1b]0;owned\x07"}]}},
     r"upload time '\x1b]0;owned\x07' is not a date"),
])
def test_an_answer_not_shaped_as_pypis_is_refused_by_name(doc, said):
    from gpunode.knowledge.releases import parse_project

    with pytest.raises(PypiError, match=re.escape(said)) as err:
        parse_project(doc, "http://127.0.0.1:1/pypi/x/json")
    assert "\x1b" not in str(err.value)


def test_an_endless_answer_and_a_file_url_are_refused(tmp_path, monkeypatch):
    import http.server
    import threading

    from gpunode.knowledge import releases

    class Endless(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.end_headers()
            chunk = b" " * (1 << 16)
            try:
                for _ in range(64):  # 4 MiB, past the test's cap of 1 MiB
                    self.wfile.write(chunk)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(releases, "MAX_ANSWER", 1 << 20)
    try:
        with pytest.raises(releases.PypiError, match="the answer is longer than 1 MiB"):
            releases.project("x", f"http://127.0.0.1:{server.server_address[1]}/pypi")
    finally:
        server.shutdown()
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(releases.PypiError, match="not an http\\(s\\) address"):
        releases.project("x", f"file://{tmp_path}/fifo")
