"""`inv teardown`: remove what gpunode installed on a target.

What goes: the gpunode-* units (stopped and disabled first: stopping gpunode-firewall.service
deletes its nftables table inet gpunode), /etc/gpunode (env, secrets and firewall
files), the venvs and the tools venv under /opt/gpunode, /usr/local/lib/gpunode, the demo
role's files, the /usr/local/bin/uv link into the tools venv, the paths each user role's
`removes(vars)` names (gpunode.roles.removals), and staged weights: folders under
weights_dest_root (/dev/shm) that hold gpunode's
staging manifest or progress file (.gpunode-manifest, .gpunode-progress: a staging cut
before its end has only the latter), so a model folder gpunode did not stage is never
touched, and the work folders of cut staging runs beside them (.gpunode-work.NAME). Staged
folders are looked for under weights_dest_root and under every tmpfs mount, so a root an
earlier run used (before weights_dest_root changed) is found too. A venv_root of the
inventory's own is searched for venvs holding gpunode's lock manifest (only those go, never
the folder itself). The servers' shared-memory leftovers in /dev/shm (NCCL's nccl-*, torch's
torch_*, Python's psm_* and sem.mp-*) go once the units are stopped, each only if no process
maps or holds it open. The journal and lock in /var/lib/gpunode stay unless --purge, and so
does the JIT cache /var/cache/gpunode (kernels compiled for this GPU: a provision after the
teardown starts warm; a cuda_jit_cache of the inventory's own is never removed). apt packages
stay (other software may use them).

Two round trips: `plan()` lists what exists (that is all --check does), `apply()` removes
exactly that list under the target's lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpunode import shell
from gpunode.engine import journal, lock
from gpunode.engine.lock import Owner
from gpunode.transport.base import Transport

# The kept generations (steps/rolling.py) go with the units and venvs they name: without them a rollback
# would bring back units whose venv is gone.
PATHS = ("/etc/gpunode", "/opt/gpunode/venvs", "/opt/gpunode/tools", "/usr/local/lib/gpunode",
         "/var/lib/gpunode/generations",
         "/etc/gpunode-demo", "/var/lib/gpunode-demo", "/usr/local/bin/gpunode-demo-hello")
#: Removed only with --purge: compiled kernels take minutes to make again (a first start's JIT).
CACHE = "/var/cache/gpunode"

#: What the servers' libraries leave in /dev/shm when a process dies without cleaning up.
SEGMENTS = ("nccl-*", "torch_*", "psm_*", "sem.mp-*")

_LIST = shell.script("gpunode.fleet", "teardown-list.sh")
_APPLY = shell.script("gpunode.fleet", "teardown-apply.sh")


@dataclass
class Removal:
    target: str
    units: list[str] = field(default_factory=list)                 # unit file paths
    paths: list[tuple[int, str]] = field(default_factory=list)     # (KiB, path)
    staged: list[tuple[int, str]] = field(default_factory=list)    # (KiB, staged model folder)
    segments: list[tuple[int, str]] = field(default_factory=list)  # (KiB, a server's /dev/shm leftover)
    state: list[tuple[int, str]] = field(default_factory=list)     # the journal's folder, with --purge

    @property
    def empty(self) -> bool:
        return not (self.units or self.paths or self.staged or self.segments or self.state)

    def lines(self) -> list[str]:
        out = [f"unit   {u}" for u in self.units]
        out += [f"{kind:<6} {p}  ({kib / 1024:.1f} MiB)" for kind, rows in
                (("path", self.paths), ("staged", self.staged), ("shm", self.segments), ("state", self.state))
                for kib, p in rows]
        return out

    def to_dict(self) -> dict:
        return {"target": self.target, "units": self.units, "paths": [p for _, p in self.paths],
                "staged": [p for _, p in self.staged], "segments": [p for _, p in self.segments],
                "state": [p for _, p in self.state]}


def parse_listing(target: str, text: str) -> Removal:
    r = Removal(target)
    section = ""
    for line in text.splitlines():
        if line.startswith("@@section "):
            section = line.split()[1]
            continue
        if not line.strip():
            continue
        if section == "units":
            r.units.append(line.strip())
            continue
        size, _, path = line.partition(" ")
        row = (int(size) if size.isdigit() else 0, path.strip())
        {"paths": r.paths, "staged": r.staged, "segments": r.segments, "state": r.state}.get(section, []).append(row)
    return r


def plan(target: Transport, weights_root: str, state_dir: str, purge: bool, venv_root: str = "",
         extra: Sequence[str] = ()) -> Removal:
    """extra: the user roles' paths (gpunode.roles.removals), listed after gpunode's own."""
    result = target.run(shell.sh(_LIST, weights_root.rstrip("/") or "/dev/shm", state_dir, "1" if purge else "0",
                                 venv_root.rstrip("/"), " ".join(f"/dev/shm/{p}" for p in SEGMENTS),
                                 *PATHS, *([CACHE] if purge else []), *(p for p in extra if p not in PATHS)),
                        timeout=120)
    result.check("listing what gpunode installed")
    return parse_listing(target.name, result.stdout)


def apply(target: Transport, removal: Removal, owner: Owner, state_dir: str, purge: bool) -> list[str]:
    """Remove the listed things under the lock; what is still there afterwards ([] = all gone)."""
    paths = [p for _, p in (*removal.paths, *removal.staged)]
    by = f"{owner.user}@{owner.workstation}"
    with lock.acquire(target, state_dir, owner):
        if not purge:  # the journal stays: it records the teardown
            journal.update(target, state_dir, owner.run_id, entries=[journal.Entry(
                owner.run_id, by, "fleet", "step", "teardown",
                f"removed {len(removal.units)} unit(s) and {len(paths)} path(s): "
                + ", ".join([u.rsplit("/", 1)[-1] for u in removal.units] + paths))])
        segments = [p for _, p in removal.segments]
        result = target.run(shell.sh(_APPLY, state_dir, "1" if purge else "0", str(len(removal.units)),
                                     str(len(segments)), *removal.units, *segments, *paths), timeout=600)
        result.check("removing what gpunode installed")
    return [line.split(" ", 1)[1] for line in result.stdout.splitlines() if line.startswith("@@left ")]
