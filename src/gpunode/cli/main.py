"""The task tree, shared by `inv` (through tasks.py) and the `gpunode` console script."""

from __future__ import annotations

from invoke import Collection, Program

from gpunode import __version__
from gpunode.cli import hostkeys

ns = Collection()
ns.add_collection(hostkeys.ns)


def main() -> None:
    Program(namespace=ns, name="gpunode", binary="gpunode", version=__version__).run()
