"""The PyPI half of `inv kb.refresh`: what is new since the pin sets, and a proposal for it.

    news(kb, projects)          # per package: newest on PyPI vs newest pinned, and the releases between
    uncovered(kb, sglang)       # the newest sglang release newer than every pin set's, if any
    write(kb, proposal, ...)    # compat/proposed/<id>.yml and its locks under compat/proposed/locks/<id>/
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from gpunode.errors import GpunodeError
from gpunode.knowledge import pinlocks, proposal, releases
from gpunode.knowledge.releases import Project, Release
from gpunode.resolve import pylock
from gpunode.resolve.kb import KB, Pinset
from gpunode.resolve.load import _pinset
from gpunode.resolve.yamlread import Reader

SHOWN = 6   # releases listed by name per package; more are counted


def watched(kb: KB) -> list[str]:
    """The packages whose releases make a new pin set: sglang, each kernel package the SGLang pin
    sets name, flashinfer-python and torch."""
    kernels = sorted({p.kernel_package for p in kb.pinsets if p.engine == "sglang" and p.kernel_package})
    return ["sglang", *kernels, "flashinfer-python", "torch"]


def pinned(kb: KB, name: str) -> list[str]:
    """Every version of `name` an SGLang pin set pins (newest last)."""
    key = canonicalize_name(name)
    found = set()
    for p in kb.pinsets:
        if p.engine != "sglang":
            continue
        for pkg in p.packages:
            req = Requirement(pkg.req)
            version = proposal.exact(req)
            if canonicalize_name(req.name) == key and version:
                found.add(Version(version).public)   # torch==2.9.1+cu129 pins PyPI's 2.9.1 release
    return sorted(found, key=Version)


@dataclass(frozen=True)
class News:
    name: str
    newest: Release | None      # on PyPI (not yanked, not a pre-release)
    pinned: str | None          # the newest any SGLang pin set pins
    newer: tuple[Release, ...]  # on PyPI and newer than `pinned`
    skipped: tuple[Release, ...]  # newer than `pinned` but yanked or a pre-release

    def line(self) -> str:
        newest = self.newest.version if self.newest else "none"
        head = f"{self.name}: newest on PyPI {newest}, newest pinned {self.pinned or 'none'}"
        if not self.newer:
            return head + " (nothing new)"
        names = [f"{r.version} ({r.uploaded[:10]})" for r in self.newer[-SHOWN:]]
        more = f"{len(self.newer) - SHOWN} older and " if len(self.newer) > SHOWN else ""
        kinds = [r.version + (" yanked" if r.yanked else " pre-release") for r in self.skipped]
        skipped = f"; skipped {', '.join(kinds)}" if kinds else ""
        return f"{head}; new: {more}{', '.join(names)}{skipped}"


def news(kb: KB, projects: dict[str, Project]) -> list[News]:
    out = []
    for name, proj in projects.items():
        versions = pinned(kb, name)
        top = versions[-1] if versions else None
        later = [r for r in proj.releases if top is None or Version(r.version) > Version(top)]
        out.append(News(name, proj.newest(), top, tuple(proj.newer_than(top)),
                        tuple(r for r in later if r.yanked or r.prerelease)))
    return out


def uncovered(kb: KB, sglang: Project) -> Release | None:
    """The newest final sglang release newer than every pin set's sglang (None: the pin sets cover it)."""
    versions = pinned(kb, "sglang")
    newer = sglang.newer_than(versions[-1] if versions else None)
    return newer[-1] if newer else None


def wheel_floor(projects: dict[str, Project], versions: dict[str, str],
                machines: Iterable[str]) -> tuple[str | None, list[str]]:
    """The glibc the pinned wheels need on every machine (the highest of each package's lowest manylinux
    tag; None when all are pure Python), and a note for each package without a wheel for a machine."""
    floor: str | None = None
    notes = []
    for name, version in versions.items():
        release = projects[name].get(version)
        if release is None:
            notes.append(f"{name} {version} is not in PyPI's release list of {name}")
            continue
        for machine in machines:
            has, need = releases.glibc_floor(release, machine)
            if not has:
                notes.append(f"{name} {version} has no Linux {machine} wheel on PyPI: drop {machine} from machines")
            elif need and (floor is None or Version(need) > Version(floor)):
                floor = need
    return floor, notes


def make(kb: KB, projects: dict[str, Project], version: str, *, today: str,
         say: Callable[[str], None] = print) -> proposal.Proposal:
    """The proposal for sglang `version`, from its own and its torch's metadata on PyPI (`projects`: at least
    sglang and torch; the kernel package's is read when it is not there)."""
    sglang, torch = projects["sglang"], projects["torch"]
    say(f"kb.refresh: reading sglang {version}'s requirements")
    meta = releases.metadata(sglang, version)
    pins = meta.pins()
    torch_version = proposal.exact(pins["torch"]) if "torch" in pins else None
    if torch_version is None:
        raise proposal.ProposalError(f"sglang {version} pins no torch version ({pins.get('torch')})",
                                     hint=f"read {meta.source}")
    say(f"kb.refresh: reading torch {torch_version}'s requirements (its CUDA)")
    torch_meta = releases.metadata(torch, torch_version)
    template, _ = proposal.template_for(kb, proposal.torch_cuda(torch_meta))
    wheels = {"sglang": version, "torch": torch_version}
    kernel = next((k for k in proposal.KERNELS if k in pins), None)
    if kernel and proposal.exact(pins[kernel]):
        if kernel not in projects:
            projects = {**projects, kernel: releases.project(kernel)}
        wheels[kernel] = str(proposal.exact(pins[kernel]))
    glibc = wheel_floor(projects, wheels, template.machines)
    return proposal.propose(kb, meta, torch_meta, today=today, glibc=glibc)


def as_pinset(kb: KB, p: proposal.Proposal, file: Path) -> Pinset:
    """The proposal read back as pinsets.yml's loader reads a pin set: it is valid there, or this raises."""
    text = file.read_text()
    return _pinset(Reader(proposal.read(text), f"pinsets[{p.id}]", str(file)), kb.indexes)


def write(kb: KB, p: proposal.Proposal, *, command: str, folder: Path = proposal.FOLDER, lock: bool = True,
          say: Callable[[str], None] = print) -> tuple[Path, list[pylock.Lock], list[str]]:
    """Write the proposal and (with `lock`) its lock for every target; returns the file, the locks made and
    why each other target could not be locked (uv's own words: that is what a reviewer needs to see)."""
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{p.id}.yml"
    header = [f"PROPOSED pin set for sglang {p.version}: made by `{command}` on "
              f"{time.strftime('%Y-%m-%d', time.gmtime())}, from PyPI's metadata.",
              "Review it, check each value marked 'copied', then move the entry into gpunode/compat/pinsets.yml",
              f"and its locks into gpunode/compat/locks/{p.id}/ (or run inv pinsets.lock --pinset {p.id}).",
              *(f"REVIEW: {n}" for n in p.notes)]
    tmp = file.with_suffix(".yml.new")
    tmp.write_text(proposal.render(p, header))
    tmp.replace(file)
    pinset = as_pinset(kb, p, file)
    locks, failed = [], []
    for t in pinlocks.targets(pinset) if lock else ():
        say(f"kb.refresh: locking {p.id} for {t.machine} python{t.python} (uv pip compile)")
        try:
            locks.append(pinlocks.make(kb, pinset, t, command=command, root=folder / "locks"))
        except GpunodeError as exc:
            failed.append(f"{t.machine} python{t.python}: {exc.message}\n{exc.evidence}".rstrip())
    return file, locks, failed


def lock_changes(kb: KB, p: proposal.Proposal, locks: Iterable[pylock.Lock]) -> list[str]:
    """The packages whose locked version differs from the copied-from pin set's lock of the same target;
    targets whose differences are the same share one line."""
    del kb
    groups: dict[str, list[str]] = {}
    for lock in locks:
        target = f"{lock.path.name} ({len(lock.packages)} packages)"
        old_file = pylock.ROOT / p.template.id / lock.path.name
        if not old_file.is_file():
            groups.setdefault(f"{p.template.id} has no lock for it", []).append(target)
            continue
        old = {canonicalize_name(x.name): x.version for x in pylock.read(old_file).packages}
        new = {canonicalize_name(x.name): x.version for x in lock.packages}
        diff = ([f"{n} {old[n]} -> {new[n]}" for n in sorted(new) if n in old and old[n] != new[n]]
                + [f"+{n} {new[n]}" for n in sorted(new) if n not in old]
                + [f"-{n} {old[n]}" for n in sorted(old) if n not in new])
        what = f"{len(diff)} differ from {p.template.id}'s lock" + (": " + ", ".join(diff) if diff else "")
        groups.setdefault(what, []).append(target)
    return [f"{', '.join(targets)}: {what}" for what, targets in groups.items()]
