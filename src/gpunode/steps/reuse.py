"""Two probe answers reused from the last applying run while builtins say they still hold.

`dpkg-query` and `systemctl show` are the two process starts left in a no-op's round trip
that answer the same thing run after run (issue 9). Each is wrapped in shell text (reuse_dpkg.sh,
reuse_units.sh) that the batch runs in its own shell, as a function call (engine/inline.py): it
prints the stored answer when a test made of shell builtins says that nothing it depends on has
changed, and otherwise runs the program,
prints its answer as it is and, under the exclusive lock only, stores it. The stores live in
the lock shell's state folder (`$GN_STATE`); outside the lock shell (unset) nothing is reused.

dpkg-query: dpkg never edits /var/lib/dpkg/status in place, it writes a new file and renames
it over the old one, and keeps what it has not written back yet in /var/lib/dpkg/updates/. So
the answer holds while the status file is the same inode as a hard link taken before the
query (`[ A -ef B ]`) and updates/ is empty. Any install, removal or hold since then fails
the test.

systemctl show: only a plain "loaded, enabled, active, running" answer is stored (or "active,
exited": a oneshot with RemainAfterExit=yes, such as the weights' staging unit), and it is
reused while the unit's signature is the same: the PIDs in its cgroup (a restart, a crash or a
stop changes them), whether systemd's /run/systemd/units/invocation:<unit> link is there
(systemd makes it when the unit starts and removes it when the unit stops or fails; it is what
tells an exited oneshot that was stopped from one still active), which `*.wants`/`*.requires`
links name it (enable, disable), and which of its unit file paths exist and are symlinks (mask).
Neither PIDs nor the link: no reuse. A unit with a drop-in folder is always asked. What the
signature misses: a stop that is still in progress (ActiveState=deactivating with the old PIDs
alive) reads as running until the next run. The answers of one list of units are stored together,
as shell assignments that the next run sources in one read, and rewritten only when a unit was
asked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from gpunode import shell
from gpunode.steps.base import inline

# The dpkg-query of steps/apt.py (its FORMAT) and the systemctl show of steps/systemd.py (its
# PROPERTIES, and their count: 5) are written out in these scripts; tests/unit/test_engine_inline.py
# checks that they agree.
PACKAGES = inline(shell.script("gpunode.steps", "reuse_dpkg.sh"))
# Per unit: its signature (empty: ask systemd), then its stored block or a place in ONE
# systemctl show of every unit that is asked; the blocks come out in the order of "$@".
# $1 names the store (reuse-units-<key>: one per list of units), sourced in one read: a line
# `gn_old_<i>='<signature>' gn_out_<i>='<block>'` for each unit of the list (empty where none is
# stored). Line by line with `read`, the store cost dash one read(2) per byte.
UNITS = inline(shell.script("gpunode.steps", "reuse_units.sh"))


def key(names: Sequence[str]) -> str:
    """The store's name for one list of packages or units."""
    return hashlib.sha256("\0".join(names).encode()).hexdigest()[:16]


def packages(names: Sequence[str]) -> list[str]:
    """`dpkg-query -W -f=FORMAT -- names` as the reusing shell."""
    return ["sh", "-c", PACKAGES, "sh", key(names), *names]


def units(names: Sequence[str]) -> list[str]:
    """One `systemctl show` of these units as the reusing shell."""
    return ["sh", "-c", UNITS, "sh", key(names), *names]
