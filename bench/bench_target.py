"""The target a bench runs on: a lab container (the default) or, with --local, this machine."""

from __future__ import annotations

import argparse
from typing import Any


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--local", action="store_true", help="bench this machine instead of a lab container")
    ap.add_argument("--host", default="lab")
    ap.add_argument("--ct", type=int, default=200)
    ap.add_argument("--inventory", default="inventory")


def open_target(args: argparse.Namespace) -> tuple[Any, Any]:
    """The transport to bench through and the session to close after (None for --local). gpunode's
    SSH side is imported only for a remote target, so a GPU node without paramiko can still bench
    itself."""
    if args.local:
        from gpunode.transport import LocalTransport

        return LocalTransport(), None
    from gpunode import inventory, roles
    from gpunode.cli.session import Session

    session = Session()
    inv = inventory.load(args.inventory)
    return session.transport(inv.target(args.host, args.ct, defaults=roles.defaults())), session
