"""base: packages, folders and uv."""

from __future__ import annotations

from gpunode.engine import RolePlan
from gpunode.resolve.actions import AptInstall
from gpunode.roles.context import RoleContext
from gpunode.steps.apt import Packages
from gpunode.steps.files import Directory, Symlink
from gpunode.steps.venv import Venv

TOOLS = "/opt/gpunode/tools"


def build(ctx: RoleContext) -> list[RolePlan]:
    v = ctx.vars
    packages = list(v["base_packages"])
    for fix in ctx.plan.fixes:  # e.g. libnuma1 when the kernel wheel links libnuma.so.1
        for action in fix.actions:
            if isinstance(action, AptInstall):
                packages += list(action.packages)
    steps: list = [Packages(names=sorted(set(packages)), on_progress=ctx.progress_for("apt", "percent"),
                            on_line=ctx.output)]
    steps += [Directory(path=d) for d in v["base_dirs"]]
    if v["base_uv"]:
        wheelhouse = v.get("wheelhouse") or ""
        # From a wheelhouse, uv's own wheel makes the tools venv and installs uv into it: no
        # `python3 -m venv` seeding pip (seconds) and no pip install (issue 45). From an index, pip
        # fetches it, as before. Either way the same spec: a venv made one way is a no-op the other.
        steps.append(Venv(path=TOOLS, requirements=[v["base_uv_requirement"]], no_index=bool(wheelhouse),
                          find_links=[wheelhouse] if wheelhouse else [], python="python3",
                          installer="uv" if wheelhouse else "pip", uv_from_wheel=bool(wheelhouse),
                          verify=[["uv", "--version"]], label="uv (tools venv)",
                          on_progress=ctx.progress_for("tools", "packages"), on_line=ctx.output))
        steps.append(Symlink(path="/usr/local/bin/uv", target=f"{TOOLS}/bin/uv"))
    return [RolePlan("base", steps)]
