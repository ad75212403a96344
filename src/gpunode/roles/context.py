"""What a role is given: the target's variables, its facts and the resolved plan.

A role reads what the resolver decided from `plan` (gpunode.resolve.plan.Plan, frozen; docs/extending.md,
"What a role reads from the plan"), its own variables from `vars`, and nothing from another role."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpunode.errors import InventoryError
from gpunode.facts.types import Facts

if TYPE_CHECKING:  # `inv status` reaches gpunode.roles without planning: the resolver and its data stay out
    from gpunode.resolve.plan import Plan


@dataclass
class RoleContext:
    target: str
    vars: dict[str, Any]
    facts: Facts
    plan: Plan
    #: (done, total, name, unit="bytes", step=""): where a long step stands (cli/progress.Feed)
    progress: Callable[..., None] | None = None
    #: every output line of a long step (-v), with the target's name to be added by the CLI
    output: Callable[[str], None] | None = None
    origins: dict[str, str] = field(default_factory=dict)  # variable -> file:line, "--set" or "role defaults"
    #: a fleet member's way out of its fleet router and back while a server is replaced (fleet/endpoint.MemberRoute)
    fleet: Any = None

    def progress_for(self, step: str, unit: str) -> Callable[[int, int, str], None] | None:
        """The (done, total, name) callback of one long step: progress events for `step`, counted in `unit`."""
        feed = self.progress
        if feed is None:
            return None

        def report(done: int, total: int, name: str = "") -> None:
            feed(done, total, name, unit=unit, step=step)
        return report

    def where(self, name: str) -> str:
        return self.origins.get(name, "the inventory or --set")

    def var(self, name: str) -> Any:
        if name not in self.vars:
            raise InventoryError(f"variable {name!r} is not set for {self.target}",
                                 hint=f"set {name} in the inventory (host, container or group vars) or with --set")
        return self.vars[name]
