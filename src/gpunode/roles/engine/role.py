"""engine: the resolved pin set in its own venv, verified; the router in its venv."""

from __future__ import annotations

import json

from gpunode.engine import RolePlan
from gpunode.roles.context import RoleContext
from gpunode.steps.venv import Venv

_VERSIONS = """
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

_TORCH = """
import sys, torch
want = sys.argv[1]
got = torch.version.cuda or "cpu"
if want != "any" and not got.startswith(want):
    sys.exit(f"torch {torch.__version__} is built for CUDA {got}, the plan needs {want}")
"""


def pins(requirements: list[str]) -> dict[str, str]:
    """name -> exact version for requirements pinned with ==."""
    out = {}
    for req in requirements:
        name, sep, version = req.partition("==")
        if sep:
            out[name.split("[")[0].strip()] = version.split(";")[0].strip()
    return out


def actions(ctx: RoleContext, phase: str, kind: str) -> list[dict]:
    return [a for f in ctx.plan.fixes if f.phase == phase for a in f.actions if a.get("kind") == kind]


def _packages(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def verify_commands(ctx: RoleContext, requirements: list[str]) -> list[list[str]]:
    plan = ctx.plan
    cmds = [["python", "-c", _VERSIONS, json.dumps(pins(requirements))]]
    torch_cuda = "cpu" if plan.engine == "vllm-cpu" else (plan.toolkit.nvcc or "any").split(".")[0]
    cmds.append(["python", "-c", _TORCH, torch_cuda])
    gpu_ready = bool(ctx.facts.gpus) and ctx.facts.system.libcuda
    if plan.engine == "vllm-cpu":
        cmds.append(["python", "-c", "import vllm.entrypoints.openai.api_server"])
    elif gpu_ready:
        module = {"sglang": "sglang.srt.entrypoints.http_server"}.get(plan.engine, "vllm.entrypoints.openai.api_server")
        cmds.append(["python", "-c", f"import {module}"])
        cmds.append(["python", "-m", "pip", "check"])
    else:
        # No driver here: the kernel packages cannot load; pip check still proves the set is consistent.
        cmds.append(["python", "-m", "pip", "check"])
    return cmds


def interpreter(version: str) -> str:
    """The plan names a Python version ("3.11"); the venv is made by that interpreter."""
    return f"python{version}" if version and version[0].isdigit() else (version or "python3")


def build(ctx: RoleContext) -> list[RolePlan]:
    v, plan = ctx.vars, ctx.plan
    wheelhouse = v.get("wheelhouse") or ""
    source = ({"no_index": True, "find_links": [wheelhouse]} if wheelhouse else
              {"index_url": plan.indexes.index_url, "extra_index_urls": list(plan.indexes.extra_index_urls)})
    requirements = [p.requirement for p in plan.packages]
    for action in actions(ctx, "install", "pip_install"):
        requirements += _packages(action["packages"])
    replace = [p for a in actions(ctx, "before_install", "pip_uninstall") for p in _packages(a["packages"])]
    remove = [p for a in actions(ctx, "after_install", "pip_uninstall") for p in _packages(a["packages"])]
    installer = v["engine_installer"] if v.get("base_uv", True) else "pip"
    steps = [Venv(path=plan.venv, python=interpreter(plan.python), requirements=requirements, replace=replace,
                  remove_after=remove, verify=verify_commands(ctx, requirements), installer=installer,
                  timeout=float(v["engine_install_timeout"]), label=f"engine venv ({plan.pinset})", **source)]
    if plan.router is not None and v.get("servers_router", True):
        steps.append(Venv(path=plan.router.venv, python=interpreter(plan.router.python), requirements=[plan.router.package],
                          installer=installer, label="router venv",
                          verify=[["python", "-c", "import " + plan.router.argv[2].split(".")[0]]]
                          if len(plan.router.argv) > 2 and plan.router.argv[1] == "-m" else [],
                          **source))
    return [RolePlan("engine", steps)]
