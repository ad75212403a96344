"""demo: the smallest role that exercises every first resource kind and a handler.

It installs a package that a fresh container lacks (`hello`), renders an
environment file and a page, links a command, and runs a real long-lived
process from a systemd unit (python3's http.server), which a change of the
environment file or the unit restarts.

It is a role like a user's: its folder (gpunode_lab.paths.ROLES) and its templates' folder
(gpunode_lab.paths.TEMPLATES) go on the search path where it is used (tests/demo_role.py), and
nothing is registered by importing it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from gpunode import yamlsrc
from gpunode.engine import RolePlan
from gpunode.steps.apt import Packages
from gpunode.steps.files import Directory, Symlink, Template
from gpunode.steps.systemd import Service, Unit
from gpunode.steps.unitfmt import UnitSafe, env_lines, unit_path, unit_text


@cache
def _defaults() -> dict[str, Any]:
    return yamlsrc.table((Path(__file__).parent / "defaults.yml").read_text()) or {}  # libyaml (issue 45)


DEFAULTS: dict[str, Any] = _defaults()


def role(vars: dict[str, Any]) -> RolePlan:
    v = {**DEFAULTS, **vars}
    unit = v["demo_unit"]
    env_file = f"{v['demo_etc']}/demo.env"
    env = {"DEMO_BIND": v["demo_bind"], "DEMO_PORT": v["demo_port"], "DEMO_ROOT": v["demo_root"],
           "DEMO_GREETING": v["demo_greeting"]}
    steps = [
        Packages(v["demo_packages"]),
        Directory(v["demo_etc"]),
        Directory(v["demo_root"]),
        Template(env_file, template="demo/demo.env.j2",
                 vars={"unit": unit_text(unit, "demo_unit"), "env_lines": UnitSafe("\n".join(env_lines(env)))},
                 notify=[f"restart:{unit}"]),
        Template(f"{v['demo_root']}/index.html", template="demo/index.html.j2",
                 vars={"greeting": v["demo_greeting"]}, comment=None),
        Symlink("/usr/local/bin/gpunode-demo-hello", "/usr/bin/hello"),
        Unit(unit, template="demo/gpunode-demo.service.j2",
             vars={"env_file": unit_path(env_file, "demo_etc"), "bind": unit_text(v["demo_bind"], "demo_bind"),
                   "port": unit_text(v["demo_port"], "demo_port")}),
        Service(unit, enabled=True, running=True),
    ]
    return RolePlan("demo", steps)


def build(ctx) -> list[RolePlan]:
    """What provision calls (gpunode.roles.build): the same plan from the context's vars."""
    return [role(ctx.vars)]
