"""What a role is given: the target's variables, its facts and the resolved plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpunode.errors import InventoryError
from gpunode.facts.types import Facts


@dataclass
class RoleContext:
    target: str
    vars: dict[str, Any]
    facts: Facts
    plan: Any  # gpunode.resolve.plan.Plan
    progress: Callable[[int, int, str], None] | None = None

    def var(self, name: str) -> Any:
        if name not in self.vars:
            raise InventoryError(f"variable {name!r} is not set for {self.target}",
                                 hint=f"set {name} in the inventory (host, container or group vars) or with --set")
        return self.vars[name]
