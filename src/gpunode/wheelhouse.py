"""A pin set's wheels downloaded once per node, for containers that install offline.

`inv wheelhouse --pinset X --host kpro6` runs `pip download` on the Proxmox
host (or, without --host, on this workstation) into a folder that the
containers see through a bind mount; provisioning with `wheelhouse: <mount>`
then installs with --no-index from it. One download per node instead of one
per container, and containers need no route to the package indexes.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.errors import InventoryError
from gpunode.resolve import load_kb, pylock
from gpunode.resolve.kb import KB, Pinset


@dataclass(frozen=True)
class Download:
    requirements: tuple[str, ...]
    index_url: str
    extra_index_urls: tuple[str, ...]
    python: str
    platforms: tuple[str, ...]
    locked: tuple[str, ...] = ()    # the lock's lines (name==version --hash=...); empty: no lock
    lock: str = ""

    def unlocked(self) -> tuple[str, ...]:
        """The requirements the lock does not cover (all of them without a lock)."""
        names = {line.split("==")[0].lower() for line in self.locked}
        return tuple(r for r in self.requirements if r.split("==")[0].split("[")[0].lower() not in names)

    def locked_argv(self, dest: str, listing: str, pip: tuple[str, ...] = ("python3", "-m", "pip")) -> list[str]:
        """Download exactly the lock's wheels; `listing` is a file holding `locked`."""
        return [*self._base(dest, pip), "--no-deps", "--require-hashes", "-r", listing]

    def argv(self, dest: str, pip: tuple[str, ...] = ("python3", "-m", "pip")) -> list[str]:
        return self._base(dest, pip) + list(self.unlocked())

    def _base(self, dest: str, pip: tuple[str, ...]) -> list[str]:
        out = [*pip, "download", "--dest", dest, "--only-binary", ":all:", "--python-version", self.python,
               "--implementation", "cp", "--index-url", self.index_url]
        for url in self.extra_index_urls:
            out += ["--extra-index-url", url]
        for platform in self.platforms:
            out += ["--platform", platform]
        return out


def platforms(glibc: str, machine: str) -> tuple[str, ...]:
    """Every manylinux tag a glibc runs, newest first (pip does not widen an explicit tag by itself)."""
    major, minor = (int(x) for x in glibc.split(".")[:2])
    tags = [f"manylinux_{major}_{m}_{machine}" for m in range(minor, 16, -1)]
    return (*tags, f"manylinux2014_{machine}", f"linux_{machine}")


def pinset_download(pid: str, *, python: str, glibc: str = "2.36", machine: str = "x86_64",
                    extra: tuple[str, ...] = (), kb: KB | None = None) -> Download:
    kb = kb or load_kb()
    p: Pinset | None = kb.pinset(pid)
    if p is None:
        known = ", ".join(x.id for x in kb.pinsets)
        raise InventoryError(f"unknown pin set {pid!r}", hint=f"pin sets in gpunode/compat/pinsets.yml: {known}")
    indexes = [kb.indexes[x.index].url for x in p.packages]
    primary = "https://pypi.org/simple"
    extras = tuple(dict.fromkeys(u for u in indexes if u != primary))
    reqs = [x.req for x in p.packages]
    if p.torch_cuda and p.torch_cuda in kb.nvcc:
        reqs += list(kb.nvcc[p.torch_cuda].packages)  # the pip nvcc the CUDA fixes may install
    reqs += [r.package for r in kb.routers.values()]
    lock = pylock.find(p, machine, python)
    return Download(tuple(dict.fromkeys([*reqs, *extra])), primary, extras, python, platforms(glibc, machine),
                    tuple(lock.requirements()) if lock else (), f"{p.id}/{lock.path.name}" if lock else "")
