"""The work that bench/vs_ansible.py gives both tools: one description, two renderings.

`Work` holds the sizes and paths; `gpunode_plan()` turns it into gpunode steps and
`ansible_vars()` into the variables bench/ansible/site.yml reads. Unit and env file
texts are made here once, so both tools write byte-identical files.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from gpunode.steps import render

# The wheelhouse's (lab share /mnt/lab/wheels/cpu) pins whose closure is 18 wheels.
REQUIREMENTS = ["requests==2.34.2", "aiohttp==3.14.5", "jinja2==3.1.6", "pyyaml==6.0.4", "packaging==26.4"]
WHEELHOUSE = "/mnt/lab/wheels/cpu"
PACKAGING_WHEEL = "packaging-26.4-py3-none-any.whl"
PACKAGES = ["python3-venv", "curl"]  # installed before the timed runs: both tools only check them
ROOT = "/opt/vsbench"
SHARDS_IN_CT = "/mnt/vsbench/shards"  # the host's shard folder, bind-mounted read-only
SHARDS_DEST = "/dev/shm/vsbench-model"
ENV_DIR = "/etc/vsbench"
BASE_PORT = 31000  # router; servers on BASE_PORT+1 ...


@dataclass(frozen=True)
class Work:
    headers: int = 300
    links: int = 20
    shards: int = 8
    shards_gib: float = 2.0
    servers: int = 8

    @classmethod
    def small(cls) -> Work:
        return cls(headers=60, links=20, shards=4, shards_gib=0.2, servers=8)

    @property
    def shard_bytes(self) -> int:
        return int(self.shards_gib * 2**30 / self.shards)

    def describe(self) -> str:
        return (f"apt check of {len(PACKAGES)} packages; venv with {len(REQUIREMENTS)} pins (18 wheels) offline; "
                f"{self.headers}-file header tree + {self.links} symlinks; {self.shards} shards, "
                f"{self.shards_gib:g} GiB into /dev/shm; {self.servers} env files + {self.servers} units + router; "
                f"{self.servers + 1} ports")

    # -- inputs on this machine --------------------------------------------------------------

    def header_names(self) -> list[str]:
        return [f"sub{i % 12:02d}/h{i:03d}.h" for i in range(self.headers)]

    def make_headers(self, root: Path) -> Path:
        """A header tree (made once): a tenth of the files executable, to show modes are kept."""
        tree = root / f"headers-{self.headers}"
        if (tree / ".complete").exists():
            return tree / "include"
        rng = random.Random(self.headers)
        for i, name in enumerate(self.header_names()):
            path = tree / "include" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            body = "".join(f"#define VS_{i}_{j} {rng.randrange(1 << 30)}\n" for j in range(rng.randrange(20, 120)))
            path.write_text(f"#pragma once\n{body}")
            path.chmod(0o755 if i % 10 == 0 else 0o644)
        (tree / ".complete").write_text("")
        return tree / "include"

    def make_shards(self, root: Path) -> Path:
        """Shard files of random bytes (made once per size) that the container sees at SHARDS_IN_CT."""
        folder = root / f"shards-{self.shards}x{self.shard_bytes}"
        if (folder.parent / f"{folder.name}.complete").exists():
            return folder
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(self.shards):
            path = folder / f"model-{i + 1:05d}-of-{self.shards:05d}.safetensors"
            with open(path, "wb") as out:
                left = self.shard_bytes
                while left:
                    chunk = os.urandom(min(left, 1 << 24))
                    out.write(chunk)
                    left -= len(chunk)
        (folder.parent / f"{folder.name}.complete").write_text("")
        return folder

    # -- what both tools write ---------------------------------------------------------------

    def links_list(self) -> list[tuple[str, str]]:
        names = self.header_names()
        step = max(1, len(names) // self.links)
        return [(f"{ROOT}/lib/link{k:02d}.h", f"{ROOT}/include/{names[k * step]}") for k in range(self.links)]

    def units(self) -> list[tuple[str, str, str, int]]:
        """(unit name, unit text, env file path or "", port) for every server, then the router."""
        out = []
        for n in range(1, self.servers + 1):
            name, env = f"vsbench-server-{n}.service", f"{ENV_DIR}/server-{n}.env"
            out.append((name, _unit(f"vsbench server {n}", ENV_DIR, "${PORT}", env=env), env, BASE_PORT + n))
        after = " ".join(u[0] for u in out)
        out.append(("vsbench-router.service", _unit("vsbench router", ROOT, str(BASE_PORT), after=after),
                    "", BASE_PORT))
        return out

    def env_text(self, port: int) -> str:
        return f"PORT={port}\nSHARDS={SHARDS_DEST}\n"

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/" for *_, port in self.units()]


def _unit(what: str, directory: str, port: str, *, env: str = "", after: str = "") -> str:
    order = f"After={after}\nWants={after}\n" if after else ""
    env_line = f"EnvironmentFile={env}\n" if env else ""
    return (f"[Unit]\nDescription={what} (gpunode vs Ansible bench)\n{order}\n"
            f"[Service]\n{env_line}"
            f"ExecStart=/usr/bin/python3 -m http.server --bind 127.0.0.1 --directory {directory} {port}\n"
            "Restart=on-failure\n\n[Install]\nWantedBy=multi-user.target\n")


def gpunode_plan(work: Work, headers: Path) -> list:
    """The work as one gpunode role (RolePlan) of typed steps."""
    from gpunode.engine import RolePlan
    from gpunode.steps.apt import Packages
    from gpunode.steps.files import Directory, File, Symlink
    from gpunode.steps.localtree import LocalTree
    from gpunode.steps.ports import Answering
    from gpunode.steps.systemd import Service, Unit
    from gpunode.steps.venv import Venv
    from gpunode.steps.weights import STAGE_SCRIPT, StagedWeights

    script = render.find("weights/stage-weights.sh").read_text()
    steps: list = [
        Packages(PACKAGES),
        Venv(f"{ROOT}/venv", requirements=REQUIREMENTS, find_links=[WHEELHOUSE], no_index=True, installer="pip"),
        LocalTree(str(headers), f"{ROOT}/include"),
        Directory(f"{ROOT}/lib"),
        *[Symlink(path, target) for path, target in work.links_list()],
        File(STAGE_SCRIPT, script, mode=0o755),
        StagedWeights(source=SHARDS_IN_CT, dest=SHARDS_DEST),
        Directory(ENV_DIR),
    ]
    units = work.units()
    steps += [File(env, work.env_text(port), notify=[f"restart:{name}"]) for name, _, env, port in units if env]
    steps += [Unit(name, content=text) for name, text, _, _ in units]
    steps += [Service(name, enabled=True, running=True) for name, *_ in units]
    steps.append(Answering(work.urls(), units=[u[0] for u in units]))
    return [RolePlan("vsbench", steps)]


def ansible_vars(work: Work, headers: Path) -> dict:
    """The variables of bench/ansible/site.yml (passed as --extra-vars @file)."""
    return {
        "packages": PACKAGES,
        "venv": f"{ROOT}/venv",
        "requirements": REQUIREMENTS,
        "wheelhouse": WHEELHOUSE,
        "headers_src": f"{headers}/",
        "headers_dest": f"{ROOT}/include",
        "links_dir": f"{ROOT}/lib",
        "links": [{"path": p, "target": t} for p, t in work.links_list()],
        "shards_src": SHARDS_IN_CT,
        "shards_dest": SHARDS_DEST,
        "env_dir": ENV_DIR,
        "env_files": [{"path": env, "content": work.env_text(port), "unit": name}
                      for name, _, env, port in work.units() if env],
        "units": [{"name": name, "content": text} for name, text, _, _ in work.units()],
        "urls": work.urls(),
    }
