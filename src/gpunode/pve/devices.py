"""NVIDIA device nodes on a Proxmox host -> the container's devN passthrough entries.

devN (pve-container since PVE 8.1) passes one device node; the container fails to start
when the node is missing on the host ("Device /dev/nvidia0 does not exist"), so entries are
made only for nodes that exist. /dev/nvidia-uvm appears only after something used the
driver on the host (nvidia-modprobe -u -c=0 or one nvidia-smi run), a known trap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpunode.errors import PveError

# The probe: `ls -al /dev/nvidia*` lists the nodes by full path and the nvidia-caps folder's
# entries under a "/dev/nvidia-caps:" header. It exits 2 with nothing on stdout when no node exists.
PROBE = "ls -al /dev/nvidia* 2>&1; true"
_GPU = re.compile(r"^/dev/nvidia(\d+)$")
# Passed when present, not required: tools-only or display nodes, MIG capabilities.
OPTIONAL = ("/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")


def parse_ls(text: str) -> list[str]:
    """Character-device paths from `ls -al /dev/nvidia*` (plus /dev/nvidia-caps/ entries)."""
    found: list[str] = []
    folder = "/dev"
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith(":") and line.startswith("/"):
            folder = line[:-1]
            continue
        if not line.startswith("c"):
            continue  # directories, "total N", ls's own complaints
        name = line.split()[-1]
        path = name if name.startswith("/") else f"{folder}/{name}"
        if path.startswith("/dev/nvidia"):
            found.append(path)
    return found


def gpu_index(path: str) -> int | None:
    m = _GPU.match(path)
    return int(m.group(1)) if m else None


def passthrough(found: Iterable[str], gpus: Iterable[int], host: str = "") -> list[str]:
    """The device nodes to pass for these GPU indices, in devN order; PveError when one is missing.

    Required: /dev/nvidiaN of each GPU, /dev/nvidiactl, /dev/nvidia-uvm. Passed when present:
    nvidia-uvm-tools, nvidia-modeset, /dev/nvidia-caps/* (MIG).
    """
    have = set(found)
    wanted = sorted(set(gpus))
    missing = [f"/dev/nvidia{i}" for i in wanted if f"/dev/nvidia{i}" not in have]
    if missing:
        present = sorted(i for i in (gpu_index(p) for p in have) if i is not None)
        raise PveError(f"GPU device node(s) {', '.join(missing)} do not exist on host {host}",
                       evidence=f"present: {', '.join(sorted(have)) or 'no /dev/nvidia* at all'}",
                       hint=f"GPUs there: {present or 'none'}; is the NVIDIA driver loaded on the host "
                       "(`nvidia-smi` there)? pass --gpus with existing indices", target=host)
    if not wanted:
        return []
    for needed, fix in (("/dev/nvidiactl", "load the NVIDIA driver on the host"),
                        ("/dev/nvidia-uvm", "run `nvidia-modprobe -u -c=0` on the host (and load nvidia-uvm at "
                         "boot: echo nvidia-uvm > /etc/modules-load.d/nvidia-uvm.conf)")):
        if needed not in have:
            raise PveError(f"{needed} does not exist on host {host}; CUDA in the container needs it",
                           hint=fix + "; a container whose devN node is missing does not start", target=host)
    out = [f"/dev/nvidia{i}" for i in wanted] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    out += [p for p in OPTIONAL if p in have]
    out += sorted(p for p in have if p.startswith("/dev/nvidia-caps/"))
    return out
