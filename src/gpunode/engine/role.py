"""What a role hands the engine: its name, its steps in order, its own handlers.

A role's role.py (roles/<name>/, or a user's folder on the search path) exposes
`build(ctx) -> list[RolePlan]` (gpunode.roles calls it; one role may hand several,
as servers does with its services); the engine never sees variables, templates or
inventory, only these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpunode.engine.handlers import Handler, resolve
from gpunode.errors import StepError
from gpunode.steps.base import Step


@dataclass
class RolePlan:
    name: str
    steps: list[Step]
    handlers: dict[str, Handler] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for step in self.steps:
            if step.id in seen:
                raise StepError(
                    f"role {self.name} has two steps with the id {step.id}",
                    hint="give one of them a different path/name; ids key the journal and the events",
                )
            seen.add(step.id)
            for name in step.notify:
                if resolve(name, self.handlers) is None:
                    raise StepError(
                        f"step {step.id} of role {self.name} notifies an unknown handler {name!r}",
                        hint="declare it in the role's handlers, or use daemon-reload, "
                        "restart:<unit> or reload:<unit>",
                    )
