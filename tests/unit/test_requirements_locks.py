"""The two locks (issue 30): requirements.lock pins what gpunode runs with and nothing else, so a
runtime install pulls no pytest, mypy or ruff; requirements-dev.lock (what scripts/setup installs
for the tests and CI) pins the same versions of those plus the dev extra's tools."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins(name: str) -> dict[str, str]:
    text = (ROOT / name).read_text()
    return {canonicalize_name(n): v for n, v in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)}


def names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def test_the_runtime_lock_pins_every_dependency_and_no_dev_tool():
    runtime, dev_only = pins("requirements.lock"), names(PROJECT["optional-dependencies"]["dev"])
    assert names(PROJECT["dependencies"]) <= set(runtime)
    assert not dev_only & set(runtime), f"dev tools in requirements.lock: {sorted(dev_only & set(runtime))}"
    assert not {"pytest", "mypy", "ruff", "hypothesis", "pluggy", "iniconfig"} & set(runtime)


def test_the_dev_lock_has_the_runtime_pins_and_the_tools():
    runtime, dev = pins("requirements.lock"), pins("requirements-dev.lock")
    drift = {n: (v, dev.get(n)) for n, v in runtime.items() if dev.get(n) != v}
    assert not drift, f"requirements.lock and requirements-dev.lock pin these differently: {drift}"
    assert names(PROJECT["optional-dependencies"]["dev"]) <= set(dev)


def test_setup_installs_the_dev_lock():
    """scripts/setup (README's first command, CI's .ci/run) gives the tests their tools."""
    setup = (ROOT / "scripts" / "setup").read_text()
    assert re.search(r"^\.venv/bin/pip install -q -r requirements-dev\.lock", setup, re.M)
