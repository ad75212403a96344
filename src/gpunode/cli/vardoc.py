"""docs/variables.md: every variable of the registry (gpunode/variables.py) with its type, its default
(written once: a shipped role's defaults.yml, the resolver's Choices or the fleet's endpoint.DEFAULTS)
and who declares it.

    python -m gpunode.cli.vardoc     # rewrite docs/variables.md
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from gpunode import roles
from gpunode.fleet import endpoint
from gpunode.resolve.choices import Choices
from gpunode.secrets import is_secret_name
from gpunode.variables import build, sources
from gpunode.vartypes import describe

DOC = Path(__file__).resolve().parents[3] / "docs" / "variables.md"


def render() -> str:
    """docs/variables.md: every variable, its type, default and readers."""
    defaults = {**{f.name: f.default for f in dataclasses.fields(Choices)}, **endpoint.DEFAULTS,
                **roles.defaults(roles.shipped())}
    docs = build(sources(product_only=True))
    lines = ["# Variables", "",
             "<!-- Rendered from the registry (src/gpunode/variables.py) by `python -m gpunode.cli.vardoc`; "
             "do not edit by hand. -->", "",
             "Every variable gpunode reads, from each role's `types.yml` and the resolver's, the facts probe's,",
             "onboard's, the fleet's and the rollout's declarations (`resolve/types.yml`, `facts/types.yml`,",
             "`pve/types.yml`, `fleet/types.yml`, `rollout.types.yml`), each typed and defaulted in one place",
             "(tests/unit/test_variables_registry.py). A name not listed",
             "here is refused wherever it is set (`--set`, `-e @file`, `vars:`, `group_vars/`, `host_vars/`, an",
             "INI inventory), with the closest known name; a value of the wrong type is refused at the file and",
             "line that set it. Meanings: each role's README and `defaults.yml`, and docs/resolve.md.", "",
             "| variable | type | default | declared by |", "| --- | --- | --- | --- |"]
    for name in sorted(docs):
        v = docs[name]
        default = defaults.get(name)
        shown = "" if default is None else f"`{json.dumps(default)}`"
        if is_secret_name(name) and default:
            shown = "(secret)"
        lines.append(f"| `{name}` | {describe(v.type).replace('|', chr(92) + '|')} | {shown} | "
                     f"{', '.join(v.readers)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    DOC.write_text(render())
    print(f"wrote {DOC}")
