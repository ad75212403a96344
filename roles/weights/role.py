"""weights: the staging script and the staged copy of the model."""

from __future__ import annotations

import posixpath

from gpunode.engine import RolePlan
from gpunode.roles.context import RoleContext
from gpunode.steps import render
from gpunode.steps.files import File
from gpunode.steps.weights import STAGE_SCRIPT, StagedWeights


def staged_path_for(variables: dict) -> str:
    """Where the servers load the model from: the staged copy, or the source itself."""
    source = str(variables["model_source"]).rstrip("/")
    if not variables.get("weights_stage", True):
        return source
    return posixpath.join(variables.get("weights_dest_root", "/dev/shm"), posixpath.basename(source))


def staged_path(ctx: RoleContext) -> str:
    ctx.var("model_source")
    return staged_path_for(ctx.vars)


def shm_space(ctx: RoleContext) -> tuple[int, int] | None:
    """(free, size) of /dev/shm from the facts, when the staged copy goes straight into it."""
    s = ctx.facts.system
    if posixpath.dirname(staged_path(ctx)) != "/dev/shm" or not s.shm_size_bytes:
        return None
    return s.shm_free_bytes, s.shm_size_bytes


def skipped(ctx: RoleContext) -> tuple[str, ...]:
    """The source's other copies of the weights, which are not staged (facts/served.py)."""
    model = ctx.facts.model
    return model.unserved if model is not None and model.exists else ()


def script_text() -> str:
    return render.find("weights/stage-weights.sh").read_text()


def build(ctx: RoleContext) -> list[RolePlan]:
    steps: list = [File(path=STAGE_SCRIPT, content=script_text(), mode=0o755)]
    if ctx.vars["weights_stage"]:
        servers = len(getattr(ctx.plan, "servers", []) or []) or 1
        steps.append(StagedWeights(source=str(ctx.var("model_source")).rstrip("/"), dest=staged_path(ctx),
                                   verify=ctx.vars["weights_verify"], on_progress=ctx.progress_for("weights", "bytes"),
                                   on_line=ctx.output,
                                   reserve_bytes=int(ctx.vars["weights_server_reserve_bytes"]) * servers,
                                   memory=ctx.facts.system.memory_bound(), space=shm_space(ctx),
                                   skip=skipped(ctx)))
    return [RolePlan("weights", steps)]
