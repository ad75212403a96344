"""node_metrics: a tiny Prometheus-style text endpoint beside the servers (an example user role).

It serves one metrics file, rendered from a template, with python3's http.server under a
systemd unit. Copy roles/node_metrics and templates/node_metrics next to your inventory
(or into a roles_path / templates_path folder) and it runs after the servers on every
`inv provision`; `--only node_metrics` runs it alone once base is in place.
"""

from __future__ import annotations

import re

from gpunode.engine import RolePlan
from gpunode.errors import InventoryError
from gpunode.roles.context import RoleContext
from gpunode.steps.files import Directory, Template
from gpunode.steps.systemd import Service, Unit
from gpunode.steps.unitfmt import UnitSafe, env_lines, unit_path, unit_text

DEPENDS = ("base",)    # what `--only node_metrics` checks is in place first
AFTER = ("servers",)   # where it runs in a whole provision
UNIT = "gpunode-node-metrics.service"  # gpunode-*: inv teardown stops and removes it


def removes(vars: dict) -> list[str]:
    """What `inv teardown` removes besides the unit: the role's folders."""
    return [vars["node_metrics_etc"], vars["node_metrics_root"]]


def build(ctx: RoleContext) -> list[RolePlan]:
    v = ctx.vars
    for key in v["node_metrics_labels"]:
        # printed as they are into the metrics file: a key like 'a="1"} 9\nforged{b' would add a line
        if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]{0,127}", str(key)) or str(key).startswith("__"):
            raise InventoryError(f"node_metrics_labels: {str(key)[:60]!r} is not a Prometheus label name",
                                 target=ctx.target, hint="label names are letters, digits and _, not starting "
                                 "with a digit or __")
    etc, root = v["node_metrics_etc"], v["node_metrics_root"]
    env_file = f"{etc}/node-metrics.env"
    env = {"METRICS_BIND": v["node_metrics_bind"], "METRICS_PORT": v["node_metrics_port"], "METRICS_ROOT": root}
    steps = [
        Directory(etc),
        Directory(root),
        Template(env_file, template="node_metrics/node-metrics.env.j2",
                 vars={"unit": unit_text(UNIT), "env_lines": UnitSafe("\n".join(env_lines(env)))},
                 notify=[f"restart:{UNIT}"]),
        Template(f"{root}/metrics", template="node_metrics/metrics.j2",
                 vars={"target": ctx.target, "labels": dict(v["node_metrics_labels"])}),
        Unit(UNIT, template="node_metrics/gpunode-node-metrics.service.j2",
             vars={"env_file": unit_path(env_file, "node_metrics_etc")}),
        Service(UNIT, enabled=True, running=True),
    ]
    return [RolePlan("node_metrics", steps)]
