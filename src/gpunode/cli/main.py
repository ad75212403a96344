"""The task tree, shared by `inv` (through tasks.py) and the `gpunode` console script."""

from __future__ import annotations

import importlib

from invoke import Collection, Program, Task

from gpunode import __version__

# One module per area; each exposes `ns`. Imported by name so that a missing
# optional dependency of one area (e.g. proxmoxer for onboard) names itself.
AREAS = ("lab", "hostkeys", "facts", "resolve", "provision", "wheelhouse", "unlock", "onboard")

ns = Collection()
for _area in AREAS:
    _tasks = importlib.import_module(f"gpunode.cli.{_area}").ns
    (ns.add_task if isinstance(_tasks, Task) else ns.add_collection)(_tasks)


def main() -> None:
    Program(namespace=ns, name="gpunode", binary="gpunode", version=__version__).run()
