"""The task tree, shared by `inv` (through tasks.py) and the `gpunode` console script."""

from __future__ import annotations

import importlib
import os
import sys

from invoke import Collection, Task

from gpunode import __version__
from gpunode.cli import habits

# One module per area; each exposes `ns`. Imported by name so that a missing
# optional dependency of one area (e.g. proxmoxer for onboard) names itself.
AREAS = ("hostkeys", "graph", "facts", "resolve", "provision", "wheelhouse", "unlock", "onboard", "pinsets",
         "bench", "doctor", "fleet", "audit", "control", "kb", "tune")

ns = Collection()
for _area in AREAS:
    _tasks = importlib.import_module(f"gpunode.cli.{_area}").ns
    for _one in _tasks if isinstance(_tasks, list) else [_tasks]:  # a list: several top-level tasks
        (ns.add_task if isinstance(_one, Task) else ns.add_collection)(_one)
habits.tree = ns  # the tasks an error's hint may name, with the user's -i (cli.habits.as_typed)


def main(argv: list[str] | None = None, namespace: Collection | None = None) -> None:
    """Run the CLI (namespace: another task tree, e.g. tasks.py's with the lab's). Each task turns
    its own errors into messages (cli.common.task); this is the last resort for what escapes
    outside a task, e.g. while invoke converts an option's value."""
    from gpunode.cli.program import GpunodeProgram

    habits.program = "gpunode"  # the console script: its hints name `gpunode ...`, not `inv ...`
    import atexit

    from gpunode.cli.common import quiet_when_reader_gone_at_exit
    from gpunode.errors import INTERNAL_EXIT, GpunodeError, internal_report, printable
    from gpunode.secrets import redact

    atexit.register(quiet_when_reader_gone_at_exit)
    program = GpunodeProgram(namespace=namespace if namespace is not None else ns, name="gpunode", binary="gpunode",
                      version=__version__)
    try:
        program.run(argv)
    except BrokenPipeError:  # `gpunode --list | true`: invoke printed the list outside any task
        from gpunode.cli.common import reader_gone

        reader_gone()
        sys.exit(0)
    except GpunodeError as exc:
        print(printable(redact(habits.as_typed(f"error: {exc}"))), file=sys.stderr)
        sys.exit(2)
    except ValueError as exc:
        if os.environ.get("GPUNODE_DEBUG"):
            raise
        # invoke's own int()/float() of an option value: say so without quoting the value.
        print(f"error: an option's value has the wrong type ({type(exc).__name__}); see `gpunode --help <task>`",
              file=sys.stderr)
        sys.exit(2)
    except Exception as exc:
        if os.environ.get("GPUNODE_DEBUG"):
            raise
        print(internal_report(exc), file=sys.stderr)
        sys.exit(INTERNAL_EXIT)
