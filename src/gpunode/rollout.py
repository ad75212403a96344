"""A group's targets in batches, as Ansible's `serial:` and `max_fail_percentage:` (issue 39): while one
batch of nodes rolls to a new generation, the others keep serving; a batch whose failures pass the limit
stops the group, and the targets not reached yet are held back, reported as such.

Ansible's meaning, kept: `serial` is a number of hosts or a percentage of the play's hosts (rounded
down, at least 1); `max_fail_percentage` applies to each batch, and the play stops when MORE than that
percentage of the batch failed; without it, only a batch that failed whole stops the rest.
(docs.ansible.com, playbooks_strategies: "Setting the batch size with serial", "Setting a maximum
failure percentage".)
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, TypeVar

from gpunode.engine.events import Emit, Start, TargetRecap
from gpunode.errors import InventoryError

T = TypeVar("T")


def batch_size(serial: Any, total: int, where: str = "serial") -> int:
    """`serial` (None/"" all at once, N, or "N%") -> how many targets a batch holds."""
    if serial in (None, "", 0, "0"):
        return max(1, total)
    text = str(serial).strip()
    m = re.fullmatch(r"([0-9]+)(%?)", text)
    if not m or isinstance(serial, bool):
        raise InventoryError(f"{where}={serial!r} is neither a number of targets nor a percentage",
                             hint="e.g. serial: 1, serial: 2 or serial: 25%")
    n = int(m.group(1))
    if m.group(2):
        if n > 100:
            raise InventoryError(f"{where}={serial!r}: a percentage is at most 100%", hint="e.g. serial: 25%")
        n = math.floor(total * n / 100)
    return max(1, min(n, max(1, total)))


def batches(items: Sequence[T], serial: Any) -> list[list[T]]:
    size = batch_size(serial, len(items))
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def max_fail(value: Any) -> float | None:
    if value in (None, ""):
        return None
    try:
        pct = float(value)
    except (TypeError, ValueError):
        pct = -1.0
    if isinstance(value, bool) or not 0 <= pct <= 100:
        raise InventoryError(f"max_fail_percentage={value!r} is not a percentage 0..100",
                             hint="e.g. max_fail_percentage: 25 (a batch with more than 25% failed stops the group)")
    return pct


def stops(batch: Sequence[TargetRecap], limit: float | None) -> str:
    """Why the group stops after this batch, or ""."""
    failed = [r for r in batch if not r.succeeded]
    if not batch or not failed:
        return ""
    pct = 100.0 * len(failed) / len(batch)
    names = ", ".join(r.target for r in failed)
    if limit is not None and pct > limit:
        return f"{pct:.0f}% of the batch failed ({names}), more than max_fail_percentage {limit:g}"
    if limit is None and len(failed) == len(batch):
        return f"every target of the batch failed ({names})"
    return ""


def held_back(name: str, why: str, *, check: bool, emit: Emit) -> TargetRecap:
    """The recap of a target the group did not reach: it was left as it was."""
    recap = TargetRecap(name, check=check)
    recap.error = f"not run: {why}"
    emit(Start(name, (), 0, check))
    emit(recap)
    return recap
