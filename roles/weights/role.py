"""weights: the staging script and the staged copy of the model."""

from __future__ import annotations

import posixpath

from gpunode.engine import RolePlan
from gpunode.resolve.choices import value as resolver_var
from gpunode.roles.context import RoleContext
from gpunode.steps import render
from gpunode.steps.files import File
from gpunode.steps.weights import STAGE_SCRIPT, StagedWeights

# Where this role runs (docs/extending.md): after cuda_fixes too, the order runs have always had
# (the recorded probe's name lists the roles in order, engine/recorded.py).
DEPENDS = ("base",)
AFTER = ("cuda_fixes",)


def shm_space(ctx: RoleContext) -> tuple[int, int] | None:
    """(free, size) of /dev/shm from the facts, when the staged copy goes straight into it."""
    s, w = ctx.facts.system, ctx.plan.weights
    if w is None or posixpath.dirname(w.dest) != "/dev/shm" or not s.shm_size_bytes:
        return None
    return s.shm_free_bytes, s.shm_size_bytes


def script_text() -> str:
    return render.find("weights/stage-weights.sh").read_text()


def build(ctx: RoleContext) -> list[RolePlan]:
    steps: list = [File(path=STAGE_SCRIPT, content=script_text(), mode=0o755)]
    w = ctx.plan.weights  # where to copy from and to: the resolver's (resolve/core.py _weights)
    if w is None and resolver_var(ctx.vars, "weights_stage"):
        ctx.var("model_source")  # nothing to stage without it: refused, naming the variable
    if w is not None and w.stage:
        servers = len(ctx.plan.servers) or 1
        steps.append(StagedWeights(source=w.source, dest=w.dest,
                                   verify=ctx.vars["weights_verify"], on_progress=ctx.progress_for("weights", "bytes"),
                                   on_line=ctx.output,
                                   reserve_bytes=int(ctx.vars["weights_server_reserve_bytes"]) * servers,
                                   memory=ctx.facts.system.memory_bound(), space=shm_space(ctx), skip=w.skip))
    return [RolePlan("weights", steps)]
