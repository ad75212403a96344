"""Invoke entry point. Stays thin: the task tree lives in gpunode.cli.main; the lab's tasks
(`inv lab.*`) come from the lab's own package, lab/gpunode_lab, which the wheel does not hold."""

import sys
from pathlib import Path

from invoke import Collection

from gpunode.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent / "lab"))  # a checkout without `pip install -e lab`
from gpunode_lab.tasks import ns as lab  # noqa: E402

# A tree of its own: the product's (`gpunode` console script) stays without the lab.
ns = Collection()
for task in main.ns.tasks.values():
    ns.add_task(task)
for collection in main.ns.collections.values():
    ns.add_collection(collection)
ns.add_collection(lab)
