"""Invoke tasks for the lab: `inv lab.up`, `inv lab.down`, `inv lab.status`, `inv lab.destroy`.

The lead wires `ns` into tasks.py. Tasks print; gpunode_lab itself never does.
"""

from __future__ import annotations

import json

from invoke import Collection

from gpunode.cli.common import task
from gpunode_lab import paths  # fixed paths only; gpunode_lab.node (which builds the lab) is imported by the tasks


def _progress(line: str) -> None:
    print(line, flush=True)


def _summary(st: dict) -> str:
    lines = [f"lab node {st['node']!r}: {'UP' if st['up'] else 'DOWN'}"]
    s = st["sshd"]
    lines.append(f"  sshd    {'running pid ' + str(s['pid']) if s['running'] else 'stopped'}  "
                 f"{s['user']}@{s['address']}:{s['port']}  key {s['key_file']}  known_hosts {s['known_hosts']}")
    lines.append(f"  pct     {st['pct']}")
    for vmid, ct in st["containers"].items():
        lines.append(f"  ct {vmid}  {ct['state']:<8} ({ct['profile']}, {ct['hostname']}, wanted {ct['wanted']})")
    shape = st["gpu_shape"] or "-"
    lines.append(f"  gpu     shape {shape}{'' if st['gpu_recording'] else ' (no recording mounted)'}")
    lines.append(f"  apt     {st['apt_packages']} packages in {paths.SHARE_APT}")
    return "\n".join(lines)


@task(help={"gpu_shape": "recorded nvidia-smi shape replayed in container 201 (tests/data/nvidia-smi/<shape>)",
            "cpu_profile": "prepare the cpu profile's wheelhouse and tiny model (needs PyPI the first time); "
                           "--no-cpu-profile skips it"})
def up(c, gpu_shape=paths.DEFAULT_GPU_SHAPE, cpu_profile=True):
    """Bring the lab up: sshd on 127.0.0.1:2222, containers 200/201 running, 202 stopped, pct stand-in."""
    from gpunode_lab import node

    st = node.up(gpu_shape, progress=_progress, cpu_profile_files=cpu_profile)
    print(_summary(st))


@task
def down(c):
    """Stop the lab's containers and sshd (containers and caches are kept)."""
    from gpunode_lab import node

    node.down(progress=_progress)


@task(help={"json_": "print the status as JSON"})
def status(c, json_=False):
    """Show whether the lab runs, and where to reach it."""
    from gpunode_lab import node
    from gpunode_lab.common import LabError

    st = node.status()
    print(json.dumps(st, indent=2, sort_keys=True) if json_ else _summary(st))
    if not st["up"]:
        raise LabError("the lab is not up", hint="run `inv lab.up`")


@task
def destroy(c):
    """Stop the lab and remove its containers and state (the download cache stays)."""
    from gpunode_lab import node

    node.destroy(progress=_progress)


ns = Collection("lab")
ns.add_task(up)
ns.add_task(down)
ns.add_task(status)
ns.add_task(destroy)
