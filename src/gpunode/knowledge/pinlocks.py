"""Full locks of the pin sets: every package of a pin set's closure, with hashes, per machine and Python.

A pin set names only its top-level packages; the ~200 others would float from
day to day (a new nvcc or `kernels` release already broke pin sets). `inv
pinsets.lock` resolves each pin set with uv for one target at a time
(`--python-platform <machine>-manylinux_<glibc_min>`, `--python-version X.Y`,
wheels only) and writes a PEP 751 lock, which lists the one wheel per package
that fits that target with its sha256:

    gpunode/compat/locks/<pinset>/pylock.<machine>-py<XY>.toml

Its header (TOML comments) says the command, date, platform and Python, and
`gpunode-inputs`, a fingerprint of what the pin set asked for: a lock whose
fingerprint no longer matches pinsets.yml is stale. The engine role installs
from the lock (`requirements()`: name==version --hash, `--require-hashes
--no-deps`), so an install is the locked set or nothing.

The lock resolves the pin set plus the pip nvcc packages the pip-nvcc fix may
add (as `inv wheelhouse` does), so that the fix installs from the lock too.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from gpunode.errors import InventoryError, StepError, tail
from gpunode.resolve import versions
from gpunode.resolve.kb import KB, Pinset
from gpunode.resolve.pylock import ROOT, Lock, Target, parse, path

PYPI = "https://pypi.org/simple"
SCHEMA = "gpunode.pinlock/1"


def targets(p: Pinset) -> list[Target]:
    """Every machine the pin set lists times every Python minor in its range."""
    lo, hi = versions.parse(p.python_min).release, versions.parse(p.python_max).release
    pys = [f"3.{m}" for m in range(lo[1], hi[1] + 1)] if lo[0] == hi[0] == 3 else [p.python_min]
    return [Target(m, py, p.glibc_min or "2.17") for m in p.machines for py in pys]


def request(kb: KB, p: Pinset) -> list[str]:
    reqs = [x.req for x in p.packages]
    if p.torch_cuda and p.torch_cuda in kb.nvcc:
        reqs += list(kb.nvcc[p.torch_cuda].packages)  # what the pip-nvcc fix installs
    return list(dict.fromkeys(reqs))


def inputs(kb: KB, p: Pinset, t: Target) -> str:
    """What the lock was made from; a change here without a new lock makes the lock stale."""
    doc = {"requirements": request(kb, p), "indexes": sorted({kb.indexes[x.index].url for x in p.packages}),
           "python": t.python, "platform": t.platform}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def stale(kb: KB, p: Pinset, t: Target, lock: Lock) -> list[str]:
    """Why a lock no longer fits its pin set (empty: it fits)."""
    why = []
    if lock.inputs != inputs(kb, p, t):
        why.append(f"pinsets.yml changed since the lock was made (inputs {lock.inputs or '?'} -> {inputs(kb, p, t)})")
    for req in request(kb, p):
        r = Requirement(req)
        have = lock.version(r.name)
        if have is None or not r.specifier.contains(have, prereleases=True):
            why.append(f"{r.name} is pinned {str(r.specifier).removeprefix('==')} but locked {have}")
    return why


def uv() -> str:
    here = Path(sys.executable).with_name("uv")
    if here.exists():
        return str(here)
    raise StepError("uv is not installed in this Python's environment", target="localhost",
                    hint="pip install uv (it is in gpunode's dev extra)")


def compile_argv(kb: KB, p: Pinset, t: Target, out: Path, req: Path, *, without: tuple[str, ...] = (),
                 find_links: tuple[str, ...] = ()) -> list[str]:
    argv = [uv(), "pip", "compile", str(req), "--python-version", t.python, "--python-platform", t.platform,
            "--only-binary", ":all:", "--index-url", PYPI, "--quiet", "--no-header", "--format", "pylock.toml",
            "-o", str(out)]
    extra = [kb.indexes[x.index].url for x in p.packages if x.index != "pypi" and x.index not in without]
    for url in dict.fromkeys(extra):
        argv += ["--extra-index-url", url]
    if extra:
        # the PyTorch indexes mirror numpy, sympy, ...: take each package's best version, not the first index's
        argv += ["--index-strategy", "unsafe-best-match"]
    for link in find_links:
        argv += ["--find-links", link]
    return argv


def clean_env() -> dict[str, str]:
    """This machine's pip.conf and UV_* settings stay out, so the lock does not depend on where it was made."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env.update(UV_NO_CONFIG="1", PIP_CONFIG_FILE=os.devnull)
    if "UV_CACHE_DIR" in os.environ:
        env["UV_CACHE_DIR"] = os.environ["UV_CACHE_DIR"]
    return env


def make(kb: KB, p: Pinset, t: Target, *, command: str, without: tuple[str, ...] = (),
         find_links: tuple[str, ...] = (), root: Path = ROOT) -> Lock:
    """Resolve one target and write its lock (atomically: a failed resolve leaves the old lock)."""
    dest = path(p, t, root)
    dest.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpunode-lock-") as work:
        req, body = Path(work) / "requirements.in", Path(work) / t.name
        req.write_text("\n".join(request(kb, p)) + "\n")
        proc = subprocess.run(compile_argv(kb, p, t, body, req, without=without, find_links=find_links),
                              capture_output=True, text=True, env=clean_env(), timeout=900)
        if proc.returncode != 0:
            raise StepError(f"uv could not lock pin set {p.id} for {t.platform} python{t.python}", target="localhost",
                            evidence=tail(proc.stderr, 12),
                            hint="an index that cannot be reached here: pass --without ID and --find-links DIR "
                                 "with its wheels, or lock on a machine that reaches it")
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        header = [f"# {SCHEMA}: full lock of pin set {p.id} (gpunode/compat/pinsets.yml), one wheel per package",
                  f"# made by: {command}",
                  f"# on {stamp} with {_uv_version()}, for python {t.python} on {t.platform}",
                  "# resolved: uv pip compile --only-binary :all: against " + ", ".join(
                      [PYPI, *[kb.indexes[x.index].url for x in p.packages
                               if x.index != "pypi" and x.index not in without], *find_links]),
                  *_caveats(kb, p, without, find_links),
                  f"# gpunode-inputs: {inputs(kb, p, t)}",
                  f"# took {time.monotonic() - started:.0f} s; regenerate: inv pinsets.lock --pinset {p.id}", ""]
        text = "\n".join(header) + body.read_text() + _also(kb, p, t, body, req, without, find_links)
        tmp = dest.with_name(f".{t.name}.new")
        tmp.write_text(text)
        try:
            lock = parse(tmp, text)
        except InventoryError:
            tmp.unlink()
            raise
        os.replace(tmp, dest)
        return Lock(dest, lock.inputs, lock.packages, text)


def _also(kb: KB, p: Pinset, t: Target, body: Path, req: Path, without: tuple[str, ...],
          find_links: tuple[str, ...]) -> str:
    """[tool.gpunode.wheels]: the newer glibc's wheels of the same versions (read() adds their hashes)."""
    if t.also is None:
        return ""
    newer = Target(t.machine, t.python, t.also)
    other = body.with_name(newer.name.replace("pylock.", "pylock.also"))
    proc = subprocess.run(compile_argv(kb, p, newer, other, req, without=without, find_links=find_links),
                          capture_output=True, text=True, env=clean_env(), timeout=900)
    if proc.returncode != 0:
        return ""  # the floor's lock alone is still complete
    base = {(x["name"], str(x["version"])): {w["hashes"]["sha256"] for w in x.get("wheels", [])}
            for x in tomllib.loads(body.read_text()).get("packages", [])}
    lines = []
    for x in tomllib.loads(other.read_text()).get("packages", []):
        have = base.get((x["name"], str(x["version"])))
        new = [w for w in x.get("wheels", []) if have is not None and w["hashes"]["sha256"] not in have]
        if new:
            items = ", ".join(f'{{ url = "{w.get("url") or w.get("path")}", sha256 = "{w["hashes"]["sha256"]}" }}'
                              for w in new)
            lines.append(f'"{x["name"]}" = [{items}]')
    if not lines:
        return ""
    return (f"\n# The same versions' best wheels for {newer.platform}, where they differ (any of a package's\n"
            "# hashes is accepted; a version that differs there is not listed: the floor's wheel runs on it).\n"
            "[tool.gpunode.wheels]\n" + "\n".join(lines) + "\n")


def _caveats(kb: KB, p: Pinset, without: tuple[str, ...], find_links: tuple[str, ...]) -> list[str]:
    out = []
    for x in p.packages:
        if x.index in without:
            out.append(f"# NOTE: {x.req} belongs to {kb.indexes[x.index].url}, which was not reachable; its wheel "
                       f"and sha256 were taken from {', '.join(find_links) or '?'} (not checked against that index)")
    return out


def _uv_version() -> str:
    proc = subprocess.run([uv(), "--version"], capture_output=True, text=True)
    return proc.stdout.strip() or "uv"
