"""Engine verification without a GPU driver: what may fail (libcuda.so.1 alone) and what may not.

The "kernel package" here is a real shared library built with the system's C
compiler, linked against a libcuda.so.1 (and a second library) that are then
deleted, so ldd and the dynamic loader report them missing exactly as on a
node without a driver. No messages are written by hand.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpunode import roles
from gpunode.resolve import resolve
from gpunode.roles.context import RoleContext
from tests.unit.resolve_facts import field_notes

# the shipped roles load as a user's do (gpunode.roles.module), not as gpunode.roles.<name>
_engine_verify = roles.module("engine", "verify")
ENGINE_IMPORT = _engine_verify.ENGINE_IMPORT
LIBS = _engine_verify.LIBS
TORCH = _engine_verify.TORCH
verify_commands = _engine_verify.verify_commands

# scripts/setup installs gcc for this; under CI a missing compiler fails instead of skipping.
needs_cc = pytest.mark.skipif(shutil.which("cc") is None and not os.environ.get("CI"),
                              reason="needs a C compiler to build a shared library (scripts/setup installs gcc)")
no_driver = pytest.mark.skipif(ctypes.util.find_library("cuda") is not None,
                               reason="this machine has a real libcuda; the missing-driver case cannot be made")


def _cc(*args: str | Path) -> None:
    subprocess.run(["cc", *map(str, args)], check=True, capture_output=True)


def kernel_dist(root: Path, links: tuple[str, ...]) -> Path:
    """An installed distribution `gpn-kernel` whose ops.so links the given (then deleted) libraries."""
    pkg, libs = root / "gpn_kernel", root / "gone"
    pkg.mkdir(parents=True)
    libs.mkdir()
    flags: list[str | Path] = []
    for soname in links:
        stem = soname.split(".so")[0][3:]
        _cc("-shared", "-fPIC", "-x", "c", "/dev/null", f"-Wl,-soname,{soname}", "-o", libs / f"lib{stem}.so")
        flags.append(f"-l{stem}")
    # --no-as-needed: an empty library uses no symbol of its links, and the linker would drop them
    _cc("-shared", "-fPIC", "-x", "c", "/dev/null", "-o", pkg / "ops.so", "-L", libs, "-Wl,--no-as-needed", *flags)
    shutil.rmtree(libs)
    (pkg / "__init__.py").write_text("import ctypes, os\n"
                                     "ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'ops.so'))\n")
    info = root / "gpn_kernel-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gpn-kernel\nVersion: 1.0\n")
    (info / "RECORD").write_text("gpn_kernel/__init__.py,,\ngpn_kernel/ops.so,,\ngpn_kernel-1.0.dist-info/RECORD,,\n")
    return root


def run(script: str, *args: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(path), "PATH": "/usr/bin:/bin"})


@needs_cc
@no_driver
def test_only_libcuda_missing_passes_without_a_driver(tmp_path):
    root = kernel_dist(tmp_path, ("libcuda.so.1",))
    libs = run(LIBS, "gpn-kernel", json.dumps(["libcuda.so.1"]), path=root)
    assert libs.returncode == 0, libs.stderr
    assert "gpn-kernel: 1 native libraries resolve, except libcuda.so.1" in libs.stdout
    imp = run(ENGINE_IMPORT, "gpn_kernel", "no-driver", path=root)
    assert imp.returncode == 0, imp.stderr
    assert "import gpn_kernel stopped at the missing GPU driver (OSError): libcuda.so.1: cannot open" in imp.stdout


@needs_cc
@no_driver
def test_libcuda_missing_fails_where_the_facts_say_a_driver_exists(tmp_path):
    root = kernel_dist(tmp_path, ("libcuda.so.1",))
    libs = run(LIBS, "gpn-kernel", "[]", path=root)
    assert libs.returncode == 1 and '"libcuda.so.1": ["gpn_kernel/ops.so"]' in libs.stderr
    imp = run(ENGINE_IMPORT, "gpn_kernel", "driver", path=root)
    assert imp.returncode == 1 and "libcuda.so.1: cannot open shared object file" in imp.stderr


@needs_cc
@no_driver
def test_a_missing_system_library_fails_even_without_a_driver(tmp_path):
    # sglang-kernel 0.4.1-0.4.2.post2 link libnuma.so.1, which Debian installs only with libnuma1
    root = kernel_dist(tmp_path, ("libcuda.so.1", "libgpnnuma.so.1"))
    libs = run(LIBS, "gpn-kernel", json.dumps(["libcuda.so.1"]), path=root)
    assert libs.returncode == 1
    assert "link libraries this system lacks" in libs.stderr
    assert '"libgpnnuma.so.1": ["gpn_kernel/ops.so"]' in libs.stderr
    assert "libcuda" not in libs.stderr


def test_plain_import_failures_are_not_excused_by_a_missing_driver(tmp_path):
    (tmp_path / "gpn_engine.py").write_text("import gpn_not_installed\n")
    imp = run(ENGINE_IMPORT, "gpn_engine", "no-driver", path=tmp_path)
    assert imp.returncode == 1 and "No module named 'gpn_not_installed'" in imp.stderr


def _ctx(facts) -> RoleContext:
    return RoleContext("kpro6/200", {}, facts, resolve(facts))


def test_field_notes_commands_check_torch_minor_kernel_libraries_import_and_pip():
    facts = field_notes()
    cmds = verify_commands(_ctx(replace(facts, system=replace(facts.system, libcuda=False))), ["torch==2.14.1"])
    scripts = {c[2]: c[3:] for c in cmds if c[1] == "-c"}
    assert scripts[TORCH] == ["13.0"]  # major.minor: the JIT's nvcc is pinned to it
    assert scripts[LIBS] == ["sglang-kernel", '["libcuda.so.1"]']
    assert scripts[ENGINE_IMPORT] == ["sglang.srt.entrypoints.http_server", "no-driver"]
    # uv (the default installer) makes the venv without pip: uv checks it; pip's own check with pip
    plan = resolve(facts)
    assert cmds[-1] == ["uv", "pip", "check", "--python", f"{plan.venv}/bin/python"]
    for chosen in ({"engine_installer": "pip"}, {"base_uv": False}):
        ctx = RoleContext("kpro6/200", chosen, facts, plan)
        assert verify_commands(ctx, ["torch==2.14.1"])[-1] == ["python", "-m", "pip", "check"]
    with_driver = {c[2]: c[3:] for c in verify_commands(_ctx(facts), ["torch==2.14.1"]) if c[1] == "-c"}
    assert with_driver[LIBS] == ["sglang-kernel", "[]"] and with_driver[ENGINE_IMPORT][1] == "driver"
