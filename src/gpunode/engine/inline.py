"""Probe scripts that run in the batch's own shell, as a function call, not a subshell each.

A subshell is a fork, ~0.25 ms in a container, and a no-op pays one per probe; the passes
(one stat, one sha256sum, one grep of the manifests), the reused answers of dpkg-query and
systemctl and the pending handlers need none. engine/probe.py runs a script marked here as

    gn_probe() { SCRIPT
    }
    gn_probe ARGS </dev/null 2>&1

so its positional parameters are its own, as in `sh -c SCRIPT sh ARGS`, which it must still run
as (a re-probe may). That asks of the script: no exit, return, cd, exec, trap, eval or set of
options (its last command gives its status); every variable it assigns named gn_*, so that the
batch's own ($GN, $GN_STATE, ...) and the other probes' stay as they were. The facts probe's
sections do the same (facts/probe.py, Snippet.inline). tests/unit/test_engine_inline.py checks
every marked script and runs them between two dumps of the shell's state.

The set lives with the step protocol (steps/base.inline), so that a step marks its own scripts.
"""

from __future__ import annotations

from gpunode.steps.base import INLINE as SAFE
from gpunode.steps.base import inline as mark

__all__ = ["SAFE", "mark"]
