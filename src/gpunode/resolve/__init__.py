"""The resolver: facts + inventory variables -> a plan with a reason for every decision.

    from gpunode.resolve import resolve, explain
    plan = resolve(facts, {"mem_fraction": 0.85})
    print(explain(plan)); print(plan.to_json())

Pure: no I/O except reading the knowledge base shipped in gpunode/compat/.
"""

from gpunode.resolve.core import resolve
from gpunode.resolve.load import load as load_kb
from gpunode.resolve.plan import SCHEMA, Plan

__all__ = ["SCHEMA", "Plan", "explain", "load_kb", "resolve"]

# Import the submodule gpunode.resolve.explain now: its first import (from anywhere, later)
# would otherwise rebind the package's `explain` from the function below to the module.
from gpunode.resolve import explain as _explain_module  # noqa: E402,F401


def explain(plan: Plan) -> str:
    from gpunode.resolve.explain import render

    return render(plan)
