"""A proposed pin set for a new sglang release, built from that release's own metadata.

What the release says is taken from it: sglang's Requires-Dist pins torch, the kernel package
(sglang-kernel, formerly sgl-kernel) and flashinfer; torch's own Requires-Dist names its CUDA
(cuda-toolkit==13.0.3 -> 13.0); sglang's Requires-Python gives the lowest Python. What no
release metadata says (the driver floor, glibc, machines, Python ceiling, CCCL, libnuma, the
extra pins that work around a floating dependency) is copied from the newest pin set of the same
torch CUDA, and every copied value says so: a YAML comment on its line, and a line under
`unconfirmed`, which the resolver repeats as a warning until a maintainer checks it.

The proposal goes to gpunode/compat/proposed/<id>.yml for review, never into pinsets.yml.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from gpunode.errors import GpunodeError
from gpunode.knowledge.releases import Metadata
from gpunode.resolve.kb import KB, Pinset

FOLDER = Path(__file__).resolve().parents[1] / "compat" / "proposed"
KERNELS = ("sglang-kernel", "sgl-kernel")
FLASHINFER = ("flashinfer-python", "flashinfer-cubin")
# torch's Requires-Dist names its CUDA runtime by one of these, depending on the release
CUDA_RUNTIME = ("cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11")


class ProposalError(GpunodeError):
    """A release whose metadata does not say what a pin set needs."""


@dataclass
class Proposal:
    id: str
    version: str
    entry: dict[str, Any]                  # the pin set, as pinsets.yml holds it
    template: Pinset                       # the pin set values were copied from
    copied: dict[str, str] = field(default_factory=dict)   # dotted key -> why it is a copy
    notes: list[str] = field(default_factory=list)         # what a reviewer must look at

    def pins(self) -> dict[str, str]:
        """name -> requirement line of the proposed packages."""
        return {str(canonicalize_name(Requirement(p["req"]).name)): p["req"] for p in self.entry["packages"]}


def exact(req: Requirement) -> str | None:
    """The version of a `name==X` requirement, None for a range."""
    specs = list(req.specifier)
    return specs[0].version if len(specs) == 1 and specs[0].operator in ("==", "===") else None


def torch_cuda(torch: Metadata) -> str | None:
    """The CUDA major.minor a torch wheel on PyPI is built for, from its runtime requirement (None: a CPU build)."""
    pins = torch.pins()
    for name in CUDA_RUNTIME:
        req = pins.get(name)
        version = exact(req) if req else None
        if version:
            return ".".join(version.split(".")[:2])
    return None


def template_for(kb: KB, cuda: str | None) -> tuple[Pinset, str]:
    """The newest SGLang pin set of the same torch CUDA (else of the same CUDA major, else the newest)."""
    sglang = sorted((p for p in kb.pinsets if p.engine == "sglang"), key=lambda p: Version(p.version), reverse=True)
    if not sglang:
        raise ProposalError("pinsets.yml has no SGLang pin set to copy the rest of a proposal from",
                            hint="write the first SGLang pin set by hand")
    same = [p for p in sglang if p.torch_cuda == cuda]
    if same:
        return same[0], f"same torch CUDA {cuda}"
    major = cuda.split(".")[0] if cuda else None
    near = [p for p in sglang if p.torch_cuda and p.torch_cuda.split(".")[0] == major]
    if near:
        return near[0], f"no pin set has torch CUDA {cuda}; this one has CUDA {near[0].torch_cuda}, the same major"
    return sglang[0], f"no pin set has torch CUDA {cuda}; this is the newest"


def _pin(pins: dict[str, Requirement], name: str, sglang: Metadata) -> tuple[Requirement, str]:
    req = pins[name]
    version = exact(req)
    if version is None:
        raise ProposalError(f"sglang {sglang.version} asks for {req} without pinning one version",
                            hint=f"a pin set needs one version: choose it by hand (metadata: {sglang.source})")
    return req, version


def propose(kb: KB, sglang: Metadata, torch: Metadata, *, today: str,
            glibc: tuple[str | None, list[str]] | None = None) -> Proposal:
    """`glibc`: what the release's wheels need (wheel_floor in refresh.py) and what they lack; without it
    glibc_min is copied too."""
    pins = sglang.pins()
    if "torch" not in pins:
        raise ProposalError(f"sglang {sglang.version} does not require torch", hint=f"metadata: {sglang.source}")
    torch_req, torch_version = _pin(pins, "torch", sglang)
    if Version(torch.version) != Version(torch_version):
        raise ProposalError(f"torch metadata is for {torch.version}, sglang {sglang.version} pins {torch_version}",
                            hint="read torch's metadata for the pinned version")
    cuda = torch_cuda(torch)
    template, why = template_for(kb, cuda)
    copied: dict[str, str] = {}
    notes: list[str] = []

    def copy(key: str, value: Any) -> Any:
        copied[key] = f"copied from {template.id} ({why})"
        return value

    kernel = next((k for k in KERNELS if k in pins), None)
    if kernel is None:
        raise ProposalError(f"sglang {sglang.version} requires neither {' nor '.join(KERNELS)}",
                            hint=f"a pin set names its kernel package: read {sglang.source}")
    _, kernel_version = _pin(pins, kernel, sglang)
    packages: list[dict[str, str]] = [{"req": f"sglang=={sglang.version}"}]
    note = f"PyPI default build is CUDA {cuda}" if cuda else "PyPI build without CUDA"
    packages.append({"req": f"torch=={torch_version}", "note": note})
    packages.append({"req": f"{kernel}=={kernel_version}"})
    fi_version = None
    for name in FLASHINFER:
        if name in pins:
            req, version = _pin(pins, name, sglang)
            extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            packages.append({"req": f"{name}{extras}=={version}"})
            fi_version = fi_version or version
    own = {canonicalize_name(Requirement(p["req"]).name) for p in packages}
    for pkg in template.packages:
        name = canonicalize_name(pkg.name)
        if name in own or name in KERNELS or name in FLASHINFER or name in ("sglang", "torch"):
            continue
        asked = pins.get(name)
        locked = exact(Requirement(pkg.req))
        if asked is not None and locked is not None and not asked.specifier.contains(locked, prereleases=True):
            notes.append(f"{template.id}'s extra pin {pkg.req} dropped: sglang {sglang.version} asks for {asked}")
            continue
        copied[f"packages.{pkg.name}"] = f"copied from {template.id} ({why})"
        extra = {"req": pkg.req, "note": f"copied from {template.id}" + (f": {pkg.note}" if pkg.note else "")}
        packages.append(extra)

    entry: dict[str, Any] = {"id": f"{'cu' + cuda.split('.')[0] if cuda else 'cpu'}-sglang-{sglang.version}",
                             "engine": "sglang", "version": sglang.version, "status": "unconfirmed",
                             "packages": packages, "torch": {"version": torch_version, "cuda": cuda},
                             "kernel": {"package": kernel, "version": kernel_version,
                                        "links_libnuma": copy("kernel.links_libnuma", template.kernel_links_libnuma)}}
    if template.pip_cccl:
        entry["pip_cccl"] = copy("pip_cccl", template.pip_cccl)
    if fi_version:
        tf = template.flashinfer
        entry["flashinfer"] = {"version": fi_version}
        if tf:
            entry["flashinfer"].update(vendored_cccl=copy("flashinfer.vendored_cccl", tf.vendored_cccl),
                                       nvcc_min=copy("flashinfer.nvcc_min", dict(tf.nvcc_min)),
                                       jit_cache_index=copy("flashinfer.jit_cache_index", tf.jit_cache_index))
    entry["python"] = {"min": _python_min(sglang) or copy("python.min", template.python_min),
                       "max": copy("python.max", template.python_max)}
    if Version(entry["python"]["min"]) > Version(entry["python"]["max"]):
        notes.append(f"sglang {sglang.version} needs Python {sglang.requires_python}, above the copied maximum "
                     f"{template.python_max}: raise python.max once the lock resolves for it")
    if glibc is not None and glibc[0] is not None:
        entry["glibc_min"] = glibc[0]     # the highest of the wheels' lowest manylinux tags
        notes += glibc[1]
    else:
        entry["glibc_min"] = copy("glibc_min", template.glibc_min)
    entry["machines"] = copy("machines", list(template.machines))
    entry["driver_min"] = copy("driver_min", template.driver_min)
    entry["driver_native"] = copy("driver_native", template.driver_native)
    entry["spec_v2_default"] = copy("spec_v2_default", template.spec_v2_default)
    entry["unconfirmed"] = [f"proposed by inv kb.refresh on {today}: {', '.join(k for k in copied)} copied from "
                            f"{template.id} ({why}), not checked for sglang {sglang.version}"]
    read = "; glibc_min from the manylinux tags of its wheels" if "glibc_min" not in copied else ""
    entry["source"] = (f"PyPI metadata of sglang {sglang.version} ({sglang.source}) and torch {torch_version} "
                       f"({torch.source}){read}; the rest copied from pin set {template.id}")
    if cuda and cuda not in kb.nvcc:
        notes.append(f"torch {torch_version} is built for CUDA {cuda}, which nvcc_packages in pinsets.yml does not "
                     f"list: add nvcc_packages.\"{cuda}\" (and toolkit_cccl) before moving this pin set in")
    return Proposal(entry["id"], sglang.version, entry, template, copied, notes)


def _python_min(sglang: Metadata) -> str | None:
    m = re.search(r">=\s*(3\.\d+)", sglang.requires_python or "")
    return m.group(1) if m else None


def changes(p: Proposal) -> list[str]:
    """What the proposal changes against the pin set it copied from, one line each."""
    old = {str(canonicalize_name(x.name)): x.req for x in p.template.packages}
    new = p.pins()
    out = [f"sglang {p.template.version} -> {p.version} (pin set {p.template.id} -> proposed {p.id})"]
    for name, req in new.items():
        if name == "sglang":
            continue
        if name not in old:
            out.append(f"{name}: new pin {req}")
        elif _version_of(old[name]) != _version_of(req):
            out.append(f"{name}: {_version_of(old[name])} -> {_version_of(req)}")
    out += [f"{name}: no longer pinned (was {old[name]})" for name in old if name not in new]
    t = p.template
    if t.torch_cuda != p.entry["torch"]["cuda"]:
        out.append(f"torch CUDA: {t.torch_cuda} -> {p.entry['torch']['cuda']}")
    if t.glibc_min != p.entry["glibc_min"]:
        out.append(f"glibc_min: {t.glibc_min} -> {p.entry['glibc_min']}")
    if t.python_min != p.entry["python"]["min"]:
        out.append(f"python min: {t.python_min} -> {p.entry['python']['min']}")
    return out


def _version_of(req: str) -> str:
    r = Requirement(req)
    return exact(r) or str(r.specifier)


def render(p: Proposal, header: list[str]) -> str:
    """The proposal as a pinsets.yml entry under `pinsets:`, each copied value commented with its origin."""
    lines = [f"# {h}" for h in header] + ["pinsets:"]
    first = True
    for key, value in p.entry.items():
        lead = "  - " if first else "    "
        first = False
        if key == "packages":
            lines.append(f"{lead}packages:")
            for pkg in value:
                name = Requirement(pkg["req"]).name
                lines.append(f"      - {_flow(pkg)}" + _why(p, f"packages.{name}"))
        elif isinstance(value, dict) and any(f"{key}.{k}" in p.copied for k in value):
            lines.append(f"{lead}{key}:")
            lines += [f"      {k}: {_flow(v)}" + _why(p, f"{key}.{k}") for k, v in value.items()]
        else:
            lines.append(f"{lead}{key}: {_flow(value)}" + _why(p, key))
    return "\n".join(lines) + "\n"


def _why(p: Proposal, key: str) -> str:
    return f"   # {p.copied[key]}" if key in p.copied else ""


def _flow(value: Any) -> str:
    """One YAML flow value (JSON is YAML; strings stay quoted so "3.10" is not read as 3.1)."""
    return json.dumps(value)


def read(text: str) -> dict[str, Any]:
    """The one entry of a proposed pin set file."""
    doc = yaml.safe_load(text)
    return dict(doc["pinsets"][0])
