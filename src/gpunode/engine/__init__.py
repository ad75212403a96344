"""The engine: runs roles' steps on targets with check mode, diffs, handlers, a journal and a lock."""

from gpunode.engine.events import SCHEMA_VERSION, Emit, Event, TargetRecap
from gpunode.engine.handlers import CommandHandler, Handler, SystemctlHandler
from gpunode.engine.lock import Owner, break_lock
from gpunode.engine.role import RolePlan
from gpunode.engine.runner import DEFAULT_STATE_DIR, run_target, run_targets

__all__ = [
    "DEFAULT_STATE_DIR",
    "SCHEMA_VERSION",
    "CommandHandler",
    "Emit",
    "Event",
    "Handler",
    "Owner",
    "RolePlan",
    "SystemctlHandler",
    "TargetRecap",
    "break_lock",
    "run_target",
    "run_targets",
]
