"""A Python virtual environment holding one resolved pin set.

The lock manifest (<venv>/gpunode-lock.json) is written last, only after the
install and its verification passed. A re-run compares the resolved spec's
hash and the site-packages listing with it and does nothing when they match;
an install cut off halfway has no manifest, and the venv is then made again
from nothing (pip and uv would skip a package whose metadata landed but whose
files did not).

With a pin set's full lock (gpunode/knowledge/pinlocks.py), `locked` holds its lines
(name==version --hash=...): they are written to <venv>/gpunode-requirements.txt
and installed with --require-hashes --no-deps, so nothing outside the lock gets
in; the lock's name and digest are part of the spec, so a changed lock means a
reinstall and `--check` names the packages whose versions moved.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpunode import shell
from gpunode.steps.base import Batched, Change, Command, NoChange, Outcome, Probe, Step, run_all
from gpunode.steps.progress import InstallSink, Line, Progress
from gpunode.steps.reads import FileRead
from gpunode.transport.base import WRITE, Transport, write_argv

MANIFEST = "gpunode-lock.json"
LOCKED = "gpunode-requirements.txt"

# venv_probe.sh: every line but one is the shell's own work (the probe is a subshell of the batch,
# engine/probe.py): pyvenv.cfg is read with `read` (starting python would cost a process start on
# every no-op; `version*` is python -m venv's `version =` and uv venv's `version_info =`),
# site-packages is listed by _NAMES. Only the manifest costs a process: `cat` starts faster than
# dash reads 5 KB with `read`, byte by byte (and in the batch one process reads every manifest: the
# probe runs without that line, _HEAD + _TAIL).
_PROBE = shell.script("gpunode.steps", "venv_probe.sh")
_HEAD, _TAIL = _PROBE.split('[ ! -f "$v/gpunode-lock.json" ] || cat "$v/gpunode-lock.json"\n')
# The entries of site-packages, one per line: a glob, no ls (hashed here, by listing_hash). The glob
# runs inside the folder: `*` there costs dash a quarter of what "$v"/lib/.../* does (300 entries in
# a vLLM venv: 1.4 ms against 5.8 ms), and a match needs no test of its own (only "no match", which
# leaves the pattern). It changes the folder, so it comes last in the probe.
_NAMES = _TAIL.split('echo "@@section listing"\n')[1]
#: In the batch, the manifests of all venvs are read by one process (steps/reads.py).
READ = FileRead(_PROBE, _HEAD + _TAIL, 0, MANIFEST, "@@section manifest\n")

# A venv without its manifest holds an install that did not finish (cut off, a full disk), and what
# is in it cannot be trusted: an installer skips a package whose metadata landed but whose files did
# not (torch without torch_shm_manager after ENOSPC, issue 29), so it is made again from nothing.
# One with a manifest is updated in place, its manifest removed first: cut off, it is made again too.
# With uv as the installer the venv needs no pip (uv installs, `uv pip check` checks): `uv venv` makes
# it in a tenth of a second where `python3 -m venv` spends seconds installing pip (bench/coldpath.py).
# uv is handed the interpreter's path, so it never looks for (or downloads) a Python of its own.
_CREATE = ('if [ -f "$1/gpunode-lock.json" ]; then rm -f "$1/gpunode-lock.json"; else rm -rf "$1"; fi; '
           '[ -x "$1/bin/python" ] || { rm -rf "$1" && mkdir -p "$(dirname "$1")" && '
           'if [ "$3" = uv ]; then py=$(command -v "$2") || { echo "$2: not found" >&2; exit 127; }; '
           'uv venv -q --no-python-downloads --python "$py" "$1"; else "$2" -m venv "$1"; fi; }')
# The venv that installs uv (uv_from_wheel): uv unpacked from its wheel makes it and installs into it.
_CREATE_UV_WHEEL = shell.script("gpunode.steps", "venv_uv_wheel.sh")
_UV_RUN = shell.script("gpunode.steps", "venv_uv_run.sh")

# The manifest, written last (after the verification): the spec's hash ($2) and JSON (stdin) come
# from here, the site-packages listing's hash and the time from the target itself, so the whole
# apply is a fixed list of commands. The hash is listing_hash's (the same pipeline); the file goes
# through the transports' own atomic writer (temp file, fsync, rename: transport/base.WRITE).
_MANIFEST = r"""set -e
v=$1
listing=$( (""" + _NAMES + r""") | grep -vx __pycache__ | LC_ALL=C sort | sha256sum | cut -c1-16)
now=$(date -u +%Y-%m-%dT%H:%M:%SZ) spec=$(cat)
printf '{"spec_hash": "%s",\n "spec": %s,\n "listing": "%s",\n "verified_at": "%s"}\n' \
  "$2" "$spec" "$listing" "$now" | sh -c """ + shell.quote(WRITE) + r""" sh "$v/gpunode-lock.json" 644 "" ""
"""


def listing_hash(names: list[str]) -> str:
    """What `ls site-packages | grep -vx __pycache__ | LC_ALL=C sort | sha256sum | cut -c1-16` printed
    (the manifests of earlier runs hold that). __pycache__ is left out: the first import of a
    top-level module (typing_extensions.py) by the running server creates it after the verification."""
    kept = sorted((n for n in names if n and n != "__pycache__"), key=lambda n: n.encode("utf-8", "surrogateescape"))
    return hashlib.sha256("".join(n + "\n" for n in kept).encode("utf-8", "surrogateescape")).hexdigest()[:16]


@dataclass
class Venv(Step):
    """A venv at `path` with exactly `requirements` installed and verified.

    + path: /opt/gpunode/venvs/<pinset>
    + python: interpreter that creates it ("python3", "/usr/bin/python3.12")
    + requirements: pinned requirement strings
    + index_url / extra_index_urls / find_links / no_index: where packages come from
    + replace: packages to uninstall first (sgl-kernel before sglang-kernel: same import dir)
    + remove_after: packages to uninstall after (CUDA torchvision beside a CPU torch)
    + verify: argv lists run with the venv's bin first on PATH; each must exit 0
    + installer: "uv" (fast; needs uv on the target) or "pip"
    + uv_from_wheel: uv is what this venv installs (the tools venv): uv comes out of its wheel in
      find_links for the making and the install (installer uv; no pip, no python3 -m venv)
    + locked: the full lock's requirement lines with hashes (empty: install `requirements` unlocked)
    + lock: the lock's name and digest ("cu13-latest/pylock.x86_64-py312.toml@1a2b..."), kept in the manifest
    + unlocked_why: why no lock is used (said in the plan's line)
    """

    path: str
    python: str = "python3"
    requirements: list[str] = field(default_factory=list)
    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    no_index: bool = False
    replace: list[str] = field(default_factory=list)
    remove_after: list[str] = field(default_factory=list)
    verify: list[list[str]] = field(default_factory=list)
    installer: str = "pip"
    uv_from_wheel: bool = False
    locked: list[str] = field(default_factory=list)
    lock: str = ""
    unlocked_why: str = ""
    timeout: float = 3600.0
    #: (done, total, name) in packages while the installer runs; its output lines for -v
    on_progress: Progress | None = field(default=None, repr=False, compare=False)
    on_line: Line | None = field(default=None, repr=False, compare=False)

    @property
    def id(self) -> str:
        return f"venv:{self.path}"

    def spec(self) -> dict:
        out = {"requirements": sorted(self.requirements), "index_url": self.index_url,
               "extra_index_urls": self.extra_index_urls, "find_links": self.find_links,
               "no_index": self.no_index, "replace": sorted(self.replace),
               "remove_after": sorted(self.remove_after), "python": self.python}
        if self.locked:
            # the versions by name (for the delta) and the lock's identity; an unlocked spec keeps its old hash
            out["lock"] = self.lock
            out["locked"] = sorted(line.split(" ", 1)[0] for line in self.locked)
        return out

    def installing(self) -> list[str]:
        """The lock's lines less the packages `remove_after` uninstalls right after the install: with
        --no-deps nothing needs them installed, and fetching them is for nothing (the CPU engine's
        CUDA triton, torchvision, torchaudio and torchcodec: 305 MB of its 969 MB of wheels). The
        uninstall still runs, for a venv that had them from before."""
        gone = {_name(n) for n in self.remove_after}
        return [line for line in self.locked if _name(line.split("==", 1)[0].split(" ", 1)[0]) not in gone]

    def _what(self) -> str:
        if self.locked:
            return f"{len(self.installing())} locked packages ({self.lock.split('@')[0]})"
        return f"{len(self.requirements)} pinned packages" + (f" (unlocked: {self.unlocked_why})"
                                                                if self.unlocked_why else "")

    def spec_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.spec(), sort_keys=True).encode()).hexdigest()[:16]

    def probe(self) -> list[str]:
        return shell.sh(_PROBE, self.path)

    def batched(self) -> Batched:
        return READ.batched(self.path)

    def check(self, probe: Probe) -> Outcome:
        sections: dict[str, list[str]] = {}
        current = ""
        for line in probe.output.splitlines():
            if line.startswith("@@section "):
                current = line.split(" ", 1)[1]
                sections[current] = []
            elif current:
                sections[current].append(line)
        if not sections.get("python"):
            return Change(f"create venv {self.path} and install {self._what()}")
        try:
            manifest = json.loads("\n".join(sections.get("manifest", [])) or "null")
        except json.JSONDecodeError:
            manifest = None
        if not manifest:
            return Change(f"remake {self.path} and install {self._what()} "
                          "(no lock manifest: a previous install did not finish)")
        if manifest.get("spec_hash") != self.spec_hash():
            return Change(f"reinstall {self.path}: {_spec_delta(manifest.get('spec', {}), self.spec())}")
        if manifest.get("listing") != listing_hash(sections.get("listing", [])):
            return Change(f"re-verify {self.path}: site-packages changed since it was verified")
        what = (f"lock {self.lock}" if self.locked else
                f"{len(self.requirements)} requirements, spec {self.spec_hash()[:8]}")
        return NoChange(f"{self.path} matches the resolved pin set ({what}, "
                        f"verified {manifest.get('verified_at', '?')})")

    def commands(self) -> list[Command]:
        def run(argv: list[str], what: str, **more: Any) -> Command:
            return Command(tuple(argv), what, failure=f"{what} in {self.path} failed", hint=_RESUME,
                           timeout=self.timeout, **more)

        listed = f"{self.path}/{LOCKED}"
        if self.uv_from_wheel:
            create = shell.sh(_CREATE_UV_WHEEL, self.path, self.python, self._uv_version(), *self.find_links)
            out = [run(create, "creating the venv with uv from its wheel")]
        else:
            out = [run(shell.sh(_CREATE, self.path, self.python, self.installer), "creating the venv")]
        if self.replace:
            out.append(run(self._pip("uninstall", *self.replace), f"removing {', '.join(self.replace)}"))
        if self.locked:
            # With --no-deps the lock's lines are every package that goes in.
            out.append(Command(tuple(write_argv(listed, 0o644, None, "")), f"writing {listed}",
                               stdin=("\n".join(self.installing()) + "\n").encode()))
            install = self._pip("install", *self._source_args(), "--require-hashes", "--no-deps", "-r", listed)
            out.append(run(_merged(install), f"installing the locked pin set ({self.lock})", watched=True))
        else:
            out.append(run(_merged(self._pip("install", *self._source_args(), *self.requirements)),
                           "installing the pin set", watched=True))
        if self.remove_after:
            out.append(run(self._pip("uninstall", *self.remove_after), f"removing {', '.join(self.remove_after)}"))
        bin_ = f"{self.path}/bin"
        for argv in self.verify:
            out.append(run(["env", f"PATH={bin_}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                            f"VIRTUAL_ENV={self.path}", *argv], f"verifying with `{shell.join(argv)[:80]}`"))
        out.append(run(shell.sh(_MANIFEST, self.path, self.spec_hash()), "writing the lock manifest",
                       stdin=json.dumps(self.spec(), sort_keys=True).encode()))
        return out

    def apply(self, target: Transport) -> None:
        # The installer's lines become progress; unlocked, pip and uv say how many packages there are.
        sink = InstallSink(self.on_progress, self.on_line, total=len(self.installing()), label=self.title)
        sink.start(f"installing {self._what()} with {self.installer}")
        run_all(self.commands(), target, sink)
        sink.finish("installed and verified")

    def _pip(self, verb: str, *args: str) -> list[str]:
        py = f"{self.path}/bin/python"
        if self.installer == "uv" or self.uv_from_wheel:
            # From a wheelhouse, uv's cache would only duplicate it (GBs for a CUDA stack).
            extra = ["--python", py] + (["--offline", "--no-cache"] if self.no_index else [])
            uv = shell.sh(_UV_RUN, self.path) if self.uv_from_wheel else ["uv"]
            return [*uv, "pip", verb, *extra, *args]
        if verb == "uninstall":
            return [py, "-m", "pip", "uninstall", "-y", "--disable-pip-version-check", *args]
        return [py, "-m", "pip", verb, "--disable-pip-version-check", "--no-input", *args]

    def _uv_version(self) -> str:
        """uv's pinned version, for its wheel's name (uv==0.13.9 -> 0.13.9); * when it is not pinned."""
        for req in self.requirements:
            name, sep, version = req.partition("==")
            if sep and name.strip().lower() == "uv" and re.fullmatch(r"[0-9A-Za-z.]+", version.strip()):
                return version.strip()
        return "*"

    def _source_args(self) -> list[str]:
        args: list[str] = []
        if self.no_index:
            args.append("--no-index")
        if self.index_url:
            args += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            args += ["--extra-index-url", url]
        if self.extra_index_urls and self.locked and self.installer == "uv":
            # uv takes a package from the first index that has its name; a locked version may be on the other one
            args += ["--index-strategy", "unsafe-best-match"]
        for link in self.find_links:
            args += ["--find-links", link]
        return args


_RESUME = ("re-run after fixing the cause: a venv without its lock manifest (written only once the install is "
           "verified) is made again from nothing")


def _merged(argv: list[str]) -> list[str]:
    """uv writes its lines to stderr, pip to stdout: one stream, read as it comes."""
    return shell.sh('exec "$@" 2>&1', *argv)


def _spec_delta(old: dict, new: dict) -> str:
    parts = []
    if old.get("lock") != new.get("lock"):
        parts.append(f"lock {old.get('lock') or 'none'} -> {new.get('lock') or 'none'}")
        moved = _moved(old.get("locked", []), new.get("locked", []))
        if moved:
            parts.append(moved)
    before, after = set(old.get("requirements", [])), set(new.get("requirements", []))
    if after - before:
        parts.append("+" + ", +".join(sorted(after - before)))
    if before - after:
        parts.append("-" + ", -".join(sorted(before - after)))
    for key in ("index_url", "extra_index_urls", "find_links", "python", "replace", "remove_after"):
        if old.get(key) != new.get(key):
            parts.append(f"{key} {old.get(key)!r} -> {new.get(key)!r}")
    return "; ".join(parts) or "the resolved spec changed"


def _moved(old: list[str], new: list[str], shown: int = 12) -> str:
    """Locked packages whose version changed, appeared or went ("torch 2.11.0 -> 2.14.1")."""
    a = dict(x.partition("==")[::2] for x in old)
    b = dict(x.partition("==")[::2] for x in new)
    lines = [f"{n} {a.get(n, 'none')} -> {b.get(n, 'none')}" for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]
    more = f" and {len(lines) - shown} more" if len(lines) > shown else ""
    return ", ".join(lines[:shown]) + more


def _name(name: str) -> str:
    """A distribution name as installers compare it (PEP 503: case and - _ . alike)."""
    return name.strip().lower().replace("_", "-").replace(".", "-")
