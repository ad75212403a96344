"""CUDA on the target: toolkits (system /usr/local/cuda-X.Y and pip's nvidia/*
layouts inside the venv) and the driver's user-space libraries (libcuda.so,
libnvidia-ml.so) plus libnuma.so.1, which sgl-kernel links against.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from gpunode.facts.cache import Group
from gpunode.facts.snippet import LIB_DIRS, Snippet
from gpunode.facts.types import CudaToolkit

_LIB_GLOBS = " ".join(f'"{d}"/libcuda.so* "{d}"/libnvidia-ml.so* "{d}"/libnuma.so*' for d in LIB_DIRS)


def lib_scan(dirs: tuple[str, ...]) -> str:
    """Shell text that sets $gn_libs to the driver's libraries (libcuda.so*, libnvidia-ml.so*,
    libnuma.so*) in these folders, for the libs and nvidia cache groups. One glob per folder
    finds all three (and a few more, such as libcudart, that a `case` leaves out), skipping a
    folder that is one already listed (/lib -> usr/lib on a merged /usr): a GPU host's lib folder
    holds thousands of files and each glob reads all of them (3000 files, six globs, 5.5 ms of
    every no-op in a container against 0.9 ms for one). A name that the shell would split or glob
    again is no library the loader is asked for (libcuda.so.1 and its kin): left out."""
    return f"""gn_libs= gn_seen=
for gn_d in {' '.join(dirs)}; do
  [ -d "$gn_d" ] || continue
  for gn_s in $gn_seen; do [ "$gn_d" -ef "$gn_s" ] && continue 2; done
  gn_seen="$gn_seen $gn_d"
  for gn_f in "$gn_d"/lib[cn][uv][dim]*.so*; do
    case $gn_f in *[[:space:]*?[]*) ;; */libcuda.so*|*/libnvidia-ml.so*|*/libnuma.so*) gn_libs="$gn_libs $gn_f";; esac
  done
done"""


LIB_SCAN = lib_scan(LIB_DIRS)

# ldconfig -p reads /etc/ld.so.cache; the links are those files.
LIBS = Group("libs", ("/etc/ld.so.cache", "$gn_libs"), setup=(LIB_SCAN,))

_TOOLKIT_DIRS = ("/usr/local/cuda", "/usr/local/cuda-*", "/opt/cuda", "/usr/lib/cuda")
# nvcc --version and the version files: their folders, the files, the nvcc on PATH and the venv's.
TOOLKITS = Group("cuda_toolkits", (
    *_TOOLKIT_DIRS, *(f"{d}/{f}" for d in _TOOLKIT_DIRS for f in ("version.json", "version.txt", "bin/nvcc")),
    '"$gn_nvcc"', '"$GN_VENV"/lib/python3*/site-packages/nvidia/*/bin/nvcc'),
    setup=(r"""gn_nvcc=; set -f; IFS=:; for dir in $PATH; do
  if [ -f "$dir/nvcc" ] && [ -x "$dir/nvcc" ]; then gn_nvcc=$dir/nvcc; break; fi; done; unset IFS; set +f""",),
    fresh='venv=$GN_VENV nvcc=$gn_nvcc')

SNIPPETS = (
    # ldconfig's cache can be stale after a bind mount, so look at the files too.
    Snippet("libs", rf"""
ldconfig -p 2>/dev/null | grep -E 'lib(cuda|nvidia-ml|numa)\.so' | sed 's/^[[:space:]]*/ldconfig: /'
set --
for f in {_LIB_GLOBS}; do
  if [ -e "$f" ] || [ -L "$f" ]; then set -- "$@" "$f"; fi
done
# One stat for every link ("path -> target"), readlink per file where stat cannot.
[ $# = 0 ] || QUOTING_STYLE=literal stat -c 'file: %N' -- "$@" 2>/dev/null || for f; do
  echo "file: $f -> $(readlink "$f")"; done
true""", cached=LIBS),
    Snippet("cuda_toolkits", r"""
for d in /usr/local/cuda /usr/local/cuda-* /opt/cuda /usr/lib/cuda; do
  [ -d "$d" ] || continue
  echo "@toolkit $d $(readlink -f "$d")"
  if [ -r "$d/version.json" ]; then echo "@version.json"; cat "$d/version.json"; echo
  elif [ -r "$d/version.txt" ]; then echo "@version.txt"; cat "$d/version.txt"; fi
  [ -x "$d/bin/nvcc" ] && { echo "@nvcc $d/bin/nvcc"; "$d/bin/nvcc" --version; }
done
p=$(command -v nvcc) && { echo "@path-nvcc $(readlink -f "$p")"; "$p" --version; }
if [ -n "$GN_VENV" ]; then
  for n in "$GN_VENV"/lib/python3*/site-packages/nvidia/*/bin/nvcc; do
    [ -x "$n" ] && { echo "@nvcc $n"; "$n" --version; }
  done
fi
true""", cached=TOOLKITS),
)


@dataclass(frozen=True)
class Libs:
    libcuda: bool = False                 # libcuda.so.1 present
    libcuda_unversioned: bool = False     # plain libcuda.so, which Triton looks for
    libcuda_version: str | None = None    # from libcuda.so.<version>
    nvml_version: str | None = None       # from libnvidia-ml.so.<version>
    libnuma: bool = False


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """Split '@header args' blocks: [(header line, body lines)]."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("@"):
            out.append((line[1:], []))
        elif out:
            out[-1][1].append(line)
    return out


def parse_libs(text: str) -> Libs:
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("ldconfig:"):
            # "ldconfig: libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"
            names.add(line.split()[1])
            target = line.rsplit("=>", 1)[-1].strip()
            names.add(target.rsplit("/", 1)[-1])
        elif line.startswith("file:"):
            # "file: PATH -> TARGET" (readlink; stat %N), "file: PATH" (stat %N of a plain file);
            # coreutils before 8.26 quotes both names of %N
            path, _, link = line[len("file:"):].partition(" -> ")
            path, link = path.strip().strip("'‘’"), link.strip().strip("'‘’")
            names.add(path.strip().rsplit("/", 1)[-1])
            if link.strip():
                names.add(link.strip().rsplit("/", 1)[-1])
    return Libs(
        libcuda="libcuda.so.1" in names,
        libcuda_unversioned="libcuda.so" in names,
        libcuda_version=_lib_version(names, "libcuda.so."),
        nvml_version=_lib_version(names, "libnvidia-ml.so."),
        libnuma=any(n.startswith("libnuma.so.1") for n in names),
    )


def _lib_version(names: set[str], prefix: str) -> str | None:
    """'580.65.06' from libcuda.so.580.65.06 (libcuda.so.1 is only the soname)."""
    versions = [n[len(prefix):] for n in names if n.startswith(prefix)]
    versions = [v for v in versions if re.fullmatch(r"\d+\.\d+(\.\d+)?", v)]
    return max(versions, key=lambda v: tuple(int(x) for x in v.split("."))) if versions else None


def parse_nvcc(lines: list[str]) -> str | None:
    """'Cuda compilation tools, release 12.8, V12.8.93' -> '12.8'."""
    for line in lines:
        m = re.search(r"release (\d+\.\d+)", line)
        if m:
            return m.group(1)
    return None


def parse_toolkits(text: str, venv: str | None = None) -> tuple[CudaToolkit, ...]:
    """System toolkits (one per real folder) and pip nvcc layouts inside the venv."""
    found: dict[str, CudaToolkit] = {}
    aliases: dict[str, str] = {}          # /usr/local/cuda -> /usr/local/cuda-12.8
    current: str | None = None
    for header, body in blocks(text):
        kind, _, rest = header.partition(" ")
        if kind == "toolkit":
            path, _, real = rest.partition(" ")
            current = real.strip() or path
            aliases[path] = current
            if current not in found:
                found[current] = CudaToolkit(path=current, version="", kind="system")
        elif kind == "version.json" and current:
            version = _json_cuda_version("\n".join(body))
            if version and not found[current].version:
                found[current] = CudaToolkit(current, version, "system")
        elif kind == "version.txt" and current:
            m = re.search(r"CUDA Version (\d+\.\d+)", "\n".join(body))
            if m and not found[current].version:
                found[current] = CudaToolkit(current, m.group(1), "system")
        elif kind == "nvcc":
            version = parse_nvcc(body)
            root = rest.strip().removesuffix("/bin/nvcc")
            root = aliases.get(root, root)
            if "/site-packages/nvidia/" in root:
                found.setdefault(root, CudaToolkit(root, version or "", "pip"))
            elif root not in found or (version and not found[root].version):
                found[root] = CudaToolkit(root, version or "", "system")
        elif kind == "path-nvcc":
            # The nvcc on PATH counts only when it is none of the toolkits above
            # (often it is /usr/local/cuda/bin/nvcc or a wrapper script around one).
            version = parse_nvcc(body)
            root = rest.strip().removesuffix("/bin/nvcc")
            if version and root not in found and not any(t.version == version for t in found.values()):
                found[root] = CudaToolkit(root, version, "system")
    return tuple(t for t in found.values() if t.version)


def _json_cuda_version(text: str) -> str | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    full = (data.get("cuda") or {}).get("version", "")
    m = re.match(r"(\d+\.\d+)", full)
    return m.group(1) if m else None
