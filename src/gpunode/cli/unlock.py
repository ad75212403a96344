"""inv unlock: end the run that holds a target's lock (after a half-open connection, say)."""

from __future__ import annotations

from gpunode.cli.common import load_inventory, select_targets, task


@task(help={"host": "inventory host", "ct": "container vmid on that host", "inventory": "inventory folder or file"})
def unlock(c, host=None, ct=None, inventory=None):
    """Break a target's gpunode lock: ends the lock's holder process on the target, names who held it."""
    from gpunode.cli.session import Session
    from gpunode.engine import DEFAULT_STATE_DIR, break_lock
    from gpunode.secrets import redact

    inv = load_inventory(inventory)
    with Session() as session:
        for target in select_targets(inv, host, ct, None, {}):
            # redact: a record left by an older gpunode may still hold a registered secret.
            print(redact(break_lock(session.transport(target), DEFAULT_STATE_DIR)))


ns = unlock
