"""Invoke entry point. Stays thin: the task tree lives in gpunode.cli.main; the lab's tasks
(`inv lab.*`) come from the lab's own package, lab/gpunode_lab, which the wheel does not hold."""

import atexit
import os
import sys
from pathlib import Path

from invoke import Collection

from gpunode.cli import main
from gpunode.cli.common import quiet_when_reader_gone_at_exit

sys.path.insert(0, str(Path(__file__).resolve().parent / "lab"))  # a checkout without `pip install -e lab`
from gpunode_lab.tasks import ns as lab  # noqa: E402

# A tree of its own: the product's (`gpunode` console script) stays without the lab.
ns = Collection()
for task in main.ns.tasks.values():
    ns.add_task(task)
for collection in main.ns.collections.values():
    ns.add_collection(collection)
ns.add_collection(lab)


def _reader_gone(kind, value, traceback):
    """`inv --list | true`: Invoke's own program printed the list outside any task, so neither
    gpunode.cli.main's handler nor a task's sees the closed pipe; end quietly with 0, as
    `gpunode --list | true` does, instead of a traceback and 1. Anything else: Python's own report."""
    if issubclass(kind, BrokenPipeError):
        from gpunode.cli.common import reader_gone

        reader_gone()
        os._exit(0)  # sys.exit is not allowed in an excepthook; nothing is left to flush but the closed stdout
    sys.__excepthook__(kind, value, traceback)


sys.excepthook = _reader_gone
atexit.register(quiet_when_reader_gone_at_exit)  # what is still buffered when the run ends
