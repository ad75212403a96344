"""A pin set's full lock (PEP 751 pylock.toml, made by gpunode/knowledge/pinlocks.py), read.

    gpunode/compat/locks/<pinset>/pylock.<machine>-py<XY>.toml

find() is what the resolver asks (resolve/locks.py): the lock of a pin set for a machine and Python.
Each lock lists the one wheel per package that fits its target, with its sha256; a header line
`gpunode-inputs` fingerprints what the pin set asked for (pinlocks.stale compares it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from gpunode import durable
from gpunode.errors import InventoryError
from gpunode.resolve import versions
from gpunode.resolve.kb import Pinset

ROOT = Path(__file__).resolve().parents[1] / "compat" / "locks"
ALSO_GLIBC = "2.36"


@dataclass(frozen=True)
class Target:
    machine: str        # "x86_64" | "aarch64"
    python: str         # "3.12"
    glibc: str          # the pin set's glibc floor: wheels for it run on every newer glibc

    @property
    def platform(self) -> str:
        return f"{self.machine}-manylinux_{self.glibc.replace('.', '_')}"

    @property
    def also(self) -> str | None:
        """A newer glibc whose own best wheels the lock lists too (Debian 12's: `pip download` for it picks
        manylinux_2_34 wheels where the floor's resolution took manylinux_2_17 ones of the same version)."""
        return ALSO_GLIBC if versions.parse(ALSO_GLIBC) > versions.parse(self.glibc) else None

    @property
    def name(self) -> str:
        return f"pylock.{self.machine}-py{self.python.replace('.', '')}.toml"  # PEP 751: no dot in the name


@dataclass(frozen=True)
class Locked:
    name: str
    version: str
    hashes: tuple[str, ...]     # sha256 of the target's wheel(s)
    where: str                  # the wheel's URL or local path when locked


@dataclass(frozen=True)
class Lock:
    path: Path
    inputs: str                 # fingerprint of the pin set's request (header `gpunode-inputs`)
    packages: tuple[Locked, ...]
    text: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    def requirements(self) -> list[str]:
        """pip/uv requirement lines with hashes: install with --require-hashes --no-deps."""
        return [f"{p.name}=={p.version} " + " ".join(f"--hash=sha256:{h}" for h in p.hashes)
                for p in self.packages]

    def version(self, name: str) -> str | None:
        key = _norm(name)
        return next((p.version for p in self.packages if _norm(p.name) == key), None)


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def path(p: Pinset, t: Target, root: Path = ROOT) -> Path:
    return root / p.id / t.name


def read(file: Path) -> Lock:
    """The lock in `file`. Parsing its TOML costs ~20 ms a lock (tomllib is pure Python), paid once per run
    and process, so the parsed packages are kept under the user's cache dir, keyed by the file's content and
    this module's code: an edited lock or a changed parser misses the cache, an unreadable entry is ignored."""
    text = file.read_text()
    key = _cache_key(text)
    cached = _MEMO.get(key) or _cached(key)
    if cached is not None:
        return Lock(file, cached[0], cached[1], text)
    lock = parse(file, text)
    _MEMO[key] = (lock.inputs, lock.packages)
    _store(key, lock)
    return lock


def parse(file: Path, text: str) -> Lock:
    """The lock's TOML, parsed (read() without its cache)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InventoryError(f"{file}: not a valid pylock.toml ({exc})",
                             hint="regenerate it: inv pinsets.lock --pinset " + file.parent.name) from None
    fingerprint = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                        if line.startswith("# gpunode-inputs:")), "")
    out = []
    for pkg in doc.get("packages", []):
        wheels = pkg.get("wheels") or []
        hashes = tuple(w["hashes"]["sha256"] for w in wheels if "sha256" in w.get("hashes", {}))
        extra = doc.get("tool", {}).get("gpunode", {}).get("wheels", {}).get(pkg.get("name"), [])
        hashes += tuple(w["sha256"] for w in extra if w["sha256"] not in hashes)
        if not hashes:
            raise InventoryError(f"{file}: {pkg.get('name')} has no wheel with a sha256",
                                 hint="locks list wheels only; regenerate with inv pinsets.lock")
        out.append(Locked(pkg["name"], str(pkg["version"]), hashes, wheels[0].get("url") or wheels[0].get("path", "")))
    return Lock(file, fingerprint, tuple(out), text)


_MEMO: dict[str, tuple[str, tuple[Locked, ...]]] = {}


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpunode" / "pinlocks"


def _cache_key(text: str) -> str:
    return hashlib.sha256(Path(__file__).read_bytes() + b"\0" + text.encode()).hexdigest()


def _cached(key: str) -> tuple[str, tuple[Locked, ...]] | None:
    try:
        doc = json.loads((cache_dir() / f"{key}.json").read_text())
        packages = tuple(Locked(str(n), str(v), tuple(str(h) for h in hs), str(w)) for n, v, hs, w in doc["packages"])
        if doc["key"] != key or not all(p.hashes for p in packages):
            return None
        found = (str(doc["inputs"]), packages)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent, half-written by another tool or from another format: parse the lock itself
    _MEMO[key] = found
    return found


def _store(key: str, lock: Lock) -> None:
    doc = {"key": key, "inputs": lock.inputs,
           "packages": [[p.name, p.version, p.hashes, p.where] for p in lock.packages]}
    with contextlib.suppress(OSError):  # a read-only or full cache dir only costs the next run the parse
        durable.write_atomic(cache_dir() / f"{key}.json", json.dumps(doc).encode())


def find(p: Pinset, machine: str, python: str, root: Path = ROOT) -> Lock | None:
    file = root / p.id / Target(machine, versions.major_minor(python), "").name
    return read(file) if file.is_file() else None
