"""The provisioning pipeline: facts -> plan -> roles -> engine, per target.

    prepare():  one probe round trip for facts, the pure resolver, role steps
    provision(): --only dependency check, then the engine on every target
    provision_live(): both in the engine's round trip: lock, facts and step probes
                 together (engine/recorded.py), then the plan and the roles locally

Nothing here prints: progress and events go to callbacks the CLI provides.
"""

from __future__ import annotations

import contextlib
import ipaddress
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode import roles
from gpunode.engine import RolePlan, TargetRecap, recorded, run_target, run_targets
from gpunode.engine.events import Emit, Start
from gpunode.engine.lock import Owner
from gpunode.engine.runner import DEFAULT_STATE_DIR, Begun, begin, finish, new_run_id
from gpunode.errors import FactError, GpunodeError, InventoryError, StepError
from gpunode.facts import snapshot
from gpunode.facts.parse import parse
from gpunode.facts.probe import collect, gather, inline
from gpunode.facts.types import Facts
from gpunode.inventory import Target
from gpunode.resolve.plan import Plan
from gpunode.transport.base import Transport


@dataclass
class Job:
    """One target, ready to run: its transport, facts, plan and role steps."""

    target: Target
    transport: Transport
    facts: Facts
    plan: Plan
    roles: list[RolePlan]
    needed: list[RolePlan] = field(default_factory=list)
    needed_names: list[str] = field(default_factory=list)


def check_model(facts: Facts, target: str) -> None:
    """Refuse before anything changes when the model folder is missing or incomplete."""
    model = facts.model
    if model is None:
        return
    if not model.exists:
        raise FactError(f"model folder {model.path} does not exist on {target}",
                        target=target, hint="check model_source in the inventory and that the host folder is "
                        "mounted into the container (Proxmox mpN: entry)")
    if model.missing_shards:
        shown = ", ".join(model.missing_shards[:5]) + (" ..." if len(model.missing_shards) > 5 else "")
        raise FactError(f"model folder {model.path} is missing {len(model.missing_shards)} of the shards that "
                        f"model.safetensors.index.json lists: {shown}", target=target,
                        hint="finish copying the model (a download may have stopped), then re-run")


def check_driver(raw: snapshot.RawFacts, facts: Facts, target: Target) -> None:
    """Refuse before anything changes when the user-space driver differs from the kernel module."""
    from gpunode.facts import driver_match

    found = driver_match.check(raw, facts)
    if found is None:
        return
    ct = target.container
    text, hint = driver_match.message(found, target.name, ct is not None, target.host.name,
                                      ct.vmid if ct else None, list(ct.gpus or []) if ct else None)
    raise FactError(text, target=target.name, evidence=found.evidence, hint=hint)


def checked_facts(raw: snapshot.RawFacts, target: Target, facts: Facts | None = None) -> Facts:
    """The target's facts from the probe's output (or `facts`, parsed from it and amended), refused
    here when the model or the driver cannot serve: the same checks on every way through provision."""
    facts = parse(raw) if facts is None else facts
    check_model(facts, target.name)
    check_driver(raw, facts, target)
    return facts


def context(target: Target, facts: Facts, plan: Plan, *, vars: dict[str, Any] | None = None,
            progress: Callable[..., None] | None = None, output: Callable[[str], None] | None = None,
            fleet: Any = None) -> roles.RoleContext:
    """What the target's roles are given: the one place provision makes it (one target, --only and
    --facts, the live round trip and a multi-node group alike). vars: the ones the plan was made from,
    when the caller has them (target_vars(target) otherwise)."""
    return roles.RoleContext(target=target.name, vars=target_vars(target) if vars is None else vars,
                             facts=facts, plan=plan,
                             progress=progress, output=output, origins=dict(target.origins), fleet=fleet)


def target_vars(target: Target) -> dict[str, Any]:
    """A copy of the target's variables; role defaults are its lowest layer (Inventory.target(defaults=...)).
    Where the model is staged and loaded from is the plan's (Plan.weights, Plan.model.path).
    A fleet member's servers listen on its fleet address unless the inventory gives `host`
    (docs/fleet.md 'Keys'): reachable by the router, not on every interface of the node."""
    v = dict(target.vars)
    if v.get("fleet_router") and not v.get("fleet_router_only") and not v.get("host"):
        from gpunode.fleet.endpoint import address_of

        # a container without fleet_address stays as it was: fleet/provision.check_members refuses it by name
        with contextlib.suppress(InventoryError):
            v["host"] = address_of(target)
    return v


class Planner:
    """The facts probe for the lock shell's round trip, and the roles made from its output: the
    engine's Prelude for one target (all roles, no --only)."""

    def __init__(self, target: Target, progress: Callable[..., None] | None = None,
                 resolve: Callable[..., Plan] | None = None, output: Callable[[str], None] | None = None,
                 fleet: Any = None):
        self.target = target
        self.fleet = fleet  # fleet/endpoint.MemberRoute of a fleet member
        self.vars = target_vars(target)
        self.progress = progress
        self.output = output
        self.resolve = resolve
        self.names, _ = roles.select(None)
        self.facts: Facts | None = None
        self.plan: Plan | None = None
        self.prelude = recorded.Prelude(recorded.key_for(self.names), self.script, self.build)

    def script(self, nonce: str) -> str:
        # "$d": the lock shell's state folder, where the facts cache is (facts/cache.py)
        return inline(nonce, self.vars.get("model_source"), self.vars.get("venv"), state_ref='"$d"', subshell=False)

    def build(self, output: str, nonce: str) -> list[RolePlan]:
        from gpunode.resolve import resolve as default_resolve

        raw = collect(self.target.name, output, nonce, self.vars.get("model_source"), self.vars.get("venv"), None)
        self.facts = checked_facts(raw, self.target)
        self.plan = (self.resolve or default_resolve)(self.facts, self.vars)
        ctx = context(self.target, self.facts, self.plan, vars=self.vars, progress=self.progress, output=self.output,
                      fleet=self.fleet)
        return roles.build(self.names, ctx)


def provision_live(pairs: Sequence[tuple[Planner, Transport]], *, check: bool = False, diff: bool = False,
                   emit: Emit, forks: int = 4, owner: Owner | None = None,
                   on_plan: Callable[[Planner], None] | None = None,
                   state_dir: str = DEFAULT_STATE_DIR) -> list[TargetRecap]:
    """Every target: lock + facts + probes in one round trip and its plan (in parallel); then
    report or apply (in parallel) on every target whose facts and plan were accepted.

    A target that cannot be reached (engine.begin: a ConnectError) is reported unreachable in its
    recap and the others go on, as Ansible does; so is a target whose facts or plan are refused
    (its model folder missing, no stack fits): its recap carries the refusal, its lock is released
    and nothing changes on it. Anything else (a bug) is raised once every lock taken is released."""
    owner = owner or Owner.current(new_run_id())
    guard = threading.Lock()

    def safe_emit(item: Any) -> None:
        with guard:
            emit(item)

    def open_one(pair: tuple[Planner, Transport]) -> Begun:
        planner, transport = pair
        return begin(transport, planner.prelude, check=check, diff=diff, emit=safe_emit, owner=owner,
                     state_dir=state_dir)

    # One target (the usual no-op of one node) needs no worker thread to start and hand over to.
    pool: Executor = ThreadPoolExecutor(max_workers=max(1, min(forks, len(pairs)))) if len(pairs) > 1 else _Here()
    with pool:
        futures = [pool.submit(open_one, pair) for pair in pairs]
        begun: list[Begun | TargetRecap] = []
        failure: BaseException | None = None
        for (planner, _), f in zip(pairs, futures, strict=True):
            try:
                begun.append(f.result())
            except GpunodeError as exc:  # refused at its facts or plan: this target only
                begun.append(stopped(planner.target, exc, check=check, emit=safe_emit))
            except BaseException as exc:  # noqa: BLE001 - raised below, once every lock is released
                failure = failure or exc
        if failure is not None:
            for b in begun:
                if isinstance(b, Begun) and b.held is not None:
                    b.held.release()
            raise failure
        if on_plan is not None:
            for planner, _ in pairs:
                if planner.plan is not None:
                    on_plan(planner)
        return list(pool.map(lambda b: b if isinstance(b, TargetRecap) else finish(b), begun))


class _Here(Executor):
    """An executor that runs each call at once, in the calling thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - the future carries it, as a worker's would
            future.set_exception(exc)
        return future


def prepare(target: Target, transport: Transport, *, only: str | None = None,
            progress: Callable[..., None] | None = None, facts_dir: Path | None = None,
            resolve: Callable[..., Plan] | None = None, output: Callable[[str], None] | None = None,
            fleet: Any = None) -> Job:
    """progress: the target's Feed (cli/progress.py); output: each line long steps print (-v);
    fleet: a fleet member's fleet/endpoint.MemberRoute."""
    from gpunode.resolve import resolve as default_resolve

    v = target_vars(target)
    if facts_dir is not None:
        raw = snapshot.load(facts_dir)
    else:
        raw = gather(transport, model_path=v.get("model_source"), venv=v.get("venv"))
    facts = checked_facts(raw, target)
    plan = (resolve or default_resolve)(facts, v)
    ctx = context(target, facts, plan, vars=v, progress=progress, output=output, fleet=fleet)
    run_names, needed_names = roles.select(only)
    return Job(target, transport, facts, plan, roles.build(run_names, ctx), roles.build(needed_names, ctx),
               needed_names)


def multinode(targets: Sequence[Target]) -> bool:
    """Whether the targets are one multi-node group (docs/multinode.md): every one says multinode: true."""
    flags = [bool(target_vars(t).get("multinode")) for t in targets]
    if any(flags) and not all(flags):
        named = ", ".join(t.name for t, f in zip(targets, flags, strict=True) if not f)
        raise InventoryError(f"some targets say multinode: true and others do not ({named}); a multi-node server "
                             "runs on all of its nodes together", hint="select exactly the group's nodes "
                             "(--group), with multinode: true as a group variable")
    return all(flags) and len(targets) > 0


def prepare_group(pairs: Sequence[tuple[Target, Transport]], *, progress: Callable[[str], Any] | None = None,
                  output: Callable[[str], Any] | None = None) -> list[Job]:
    """A multi-node group: every node's facts (with its route to the head and its InfiniBand ports), then
    one plan per node from all of them (resolve/multinode.py), then each node's roles. The first target
    is the head. progress/output: the target's name -> its callback."""
    from dataclasses import replace

    from gpunode.facts import network
    from gpunode.resolve.multinode import Member, node_address, resolve_group

    head = node_address(pairs[0][0])
    try:
        ipaddress.ip_address(head)
    except ValueError:
        # `ip route get` and NCCL's interface choice need the address the nodes' network uses
        raise InventoryError(f"the head {pairs[0][0].name}'s address {head!r} is not an IP address",
                             target=pairs[0][0].name, hint="set multinode_address: to the head's IP address on "
                             "the nodes' network (e.g. multinode_address: 10.0.0.1)") from None
    members = []
    for target, transport in pairs:
        v = target_vars(target)
        raw = gather(transport, model_path=v.get("model_source"), venv=v.get("venv"), extra=network.snippets(head))
        facts = checked_facts(raw, target, replace(parse(raw), network=network.from_raw(raw, head)))
        members.append(Member(facts, node_address(target)))
    plans = resolve_group(members, target_vars(pairs[0][0]))
    jobs = []
    names, _ = roles.select(None)
    for (target, transport), member, plan in zip(pairs, members, plans, strict=True):
        ctx = context(target, member.facts, plan, progress=progress(target.name) if progress else None,
                      output=output(target.name) if output else None)
        jobs.append(Job(target, transport, member.facts, plan, roles.build(names, ctx)))
    return jobs


def stopped(target: Target, exc: GpunodeError, *, check: bool, emit: Emit) -> TargetRecap:
    """The recap of a target that could not be reached or whose facts or plan were refused, before
    any step: reported as the engine reports one (unreachable for a ConnectError), so the other
    targets go on (--only and --facts runs prepare every target before the engine)."""
    recap = TargetRecap(target.name, check=check)
    recap.stopped_by(exc)
    emit(Start(target.name, (), 0, check))
    emit(recap)
    return recap


def check_dependencies(job: Job) -> None:
    """--only: the roles it depends on must already be in place (a check run finds nothing to do)."""
    if not job.needed:
        return
    pending: list[str] = []

    def collect(event: Any) -> None:
        if getattr(event, "kind", "") == "step" and event.status in ("changed", "failed"):
            pending.append(f"{event.role}: {event.reason}")

    recap = run_target(job.transport, job.needed, check=True, emit=collect)
    if recap.error:
        raise StepError(f"could not check the roles --only depends on: {recap.error}", target=job.target.name)
    if pending:
        raise StepError(
            f"--only needs {', '.join(job.needed_names)} in place first, but {len(pending)} step(s) would change",
            target=job.target.name, evidence="\n".join(pending[:10]),
            hint="run without --only (or include those roles) once; then --only works",
        )


def provision(jobs: Sequence[Job], *, check: bool = False, diff: bool = False, emit: Emit,
              forks: int = 4, owner: Owner | None = None) -> list[TargetRecap]:
    """owner: who runs, with the run id that the journal and the JSON events both carry."""
    for job in jobs:
        if not check:
            check_dependencies(job)
    if len(jobs) == 1:
        return [run_target(jobs[0].transport, jobs[0].roles, check=check, diff=diff, emit=emit, owner=owner)]
    return run_targets([(j.transport, j.roles) for j in jobs], forks=forks, check=check, diff=diff, emit=emit,
                       owner=owner)
