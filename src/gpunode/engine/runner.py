"""Run roles on targets: lock, one batched probe, check, apply, handlers, journal, recap.

A no-op re-run costs one command per target: the lock shell, which runs the
batched probe (every step's probe and the handlers left pending by an earlier
run) as soon as it holds the lock and sends its output back on its first line;
when nothing is to be applied the lock is released at once. Each
step that changes costs its apply plus one journal command; once something
has changed, the next changing step is probed again just before it applies,
because the earlier change may already have done its work.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from gpunode.engine import journal, lock, passes, probe, recorded
from gpunode.engine.events import CHANGED, FAILED, OK, SKIPPED, Emit, Event, Start, TargetRecap, discard
from gpunode.engine.handlers import Handler, ordered, resolve
from gpunode.engine.journal import Entry, Pending
from gpunode.engine.metered import Metered
from gpunode.engine.role import RolePlan
from gpunode.errors import ConnectError, GpunodeError, KeptBack, LockError, RolledBack
from gpunode.steps.base import Change, NoChange, Outcome, Step
from gpunode.transport.base import Transport, probe_deadline

DEFAULT_STATE_DIR = "/var/lib/gpunode"


def new_run_id() -> str:
    # os.urandom, not uuid4: uuid imports platform (~4 ms of every provision's start, issue 45)
    return time.strftime("%Y%m%d-%H%M%S-") + os.urandom(3).hex()


def _message(exc: BaseException) -> str:
    if isinstance(exc, GpunodeError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


@dataclass
class _Run:
    """The state of one run on one target."""

    target: Transport
    roles: Sequence[RolePlan]
    check: bool
    diff: bool
    emit: Emit
    state_dir: str
    owner: lock.Owner
    recap: TargetRecap
    pending: list[Pending] = field(default_factory=list)
    notifiers: dict[Pending, list[str]] = field(default_factory=dict)
    changed_something: bool = False  # since this role's steps were last probed
    stale: bool = False  # anything changed since the first batched probe
    facts_touched: bool = False  # a step that may change the facts was applied (Step.changes_facts)
    stopped: str = ""  # why later steps are skipped, once something failed
    steps_reported: int = 0

    @property
    def commands(self) -> Transport:
        """Where steps and handlers run their commands: fenced (engine/lock.Fenced), so that they end
        with this run and never outlive its lock."""
        return lock.Fenced(self.target, self.state_dir)

    # -- events ------------------------------------------------------------------

    def event(self, kind: str, role: str, step: str, status: str, reason: str,
              started: float, diff: str = "", commands: tuple[str, ...] = ()) -> None:
        shown = diff if (self.diff or self.check) else ""
        ev = Event(kind, self.recap.target, role, step, status, reason,
                   time.monotonic() - started, shown, self.check, commands)
        self.recap.count(ev)
        self.steps_reported += kind == "step"
        self.emit(ev)

    # -- check -------------------------------------------------------------------

    def items(self) -> tuple[list[passes.Item], dict[tuple[int, int], BaseException]]:
        return _items(self.roles, self.state_dir)

    def plan(self, results: Sequence[probe.Probe],
             broken: dict[tuple[int, int], BaseException]) -> list[list[Outcome | BaseException]]:
        """Every step's check against its share of the one batched probe."""
        self.pending = journal.parse_pending(results[-1].output)
        plans: list[list[Outcome | BaseException]] = []
        i = 0
        for r, role in enumerate(self.roles):
            row: list[Outcome | BaseException] = []
            for s, step in enumerate(role.steps):
                row.append(broken.get((r, s)) or _check(step, results[i]))
                i += 1
            plans.append(row)
        return plans

    def report_plan(self, plans: list[list[Outcome | BaseException]]) -> None:
        for role, row in zip(self.roles, plans, strict=True):
            for step, outcome in zip(role.steps, row, strict=True):
                started = time.monotonic()
                if isinstance(outcome, BaseException):
                    self.event("step", role.name, step.title, FAILED, _message(outcome), started)
                elif isinstance(outcome, Change):
                    commands = tuple(c.shown() for c in step.commands() or ())
                    self.event("step", role.name, step.title, CHANGED, outcome.summary, started, outcome.diff,
                               commands)
                    for name in step.notify:
                        self.notifiers.setdefault((role.name, name), []).append(step.id)
                else:
                    self.event("step", role.name, step.title, OK, outcome.reason, started)
            for name in self._due(role):
                why = self._why((role.name, name))
                self.event("handler", role.name, name, CHANGED, f"would run ({why})", time.monotonic(),
                           commands=_shown(resolve(name, role.handlers)))
        self._report_foreign(would=True)

    # -- apply -------------------------------------------------------------------

    def apply(self, plans: list[list[Outcome | BaseException]]) -> None:
        if self._refuse(plans):
            return
        for role, row in zip(self.roles, plans, strict=True):
            if self.stale and not self.stopped:
                # Earlier roles changed the target (and their handlers ran): what this role's
                # steps saw in the first probe may be stale, even for steps that were no-ops then
                # (a restarted server is no longer "answering"). One batch re-probes them all;
                # every later role too, since the first probe is older still for them.
                row = self._replan(role)
                self.changed_something = False
            for step, outcome in zip(role.steps, row, strict=True):
                if self.stopped:
                    self.event("step", role.name, step.title, SKIPPED, self.stopped, time.monotonic())
                    continue
                self._apply_step(role, step, outcome)
            self._fire(role, self._due(role))
        self._report_foreign(would=False)

    def _refuse(self, plans: list[list[Outcome | BaseException]]) -> bool:
        """A check that refused (a model too big for /dev/shm, a masked unit, a folder where a
        file must go) is not something the steps before it fix: stop before changing anything,
        not after minutes of installs. True when a check refused."""
        first = next((step.title for role, row in zip(self.roles, plans, strict=True)
                      for step, outcome in zip(role.steps, row, strict=True)
                      if isinstance(outcome, BaseException)), None)
        if first is None:
            return False
        self.stopped = f"not run: {first} refused, so nothing was changed"
        for role, row in zip(self.roles, plans, strict=True):
            for step, outcome in zip(role.steps, row, strict=True):
                if isinstance(outcome, BaseException):
                    self._kept_back(outcome)
                    self.event("step", role.name, step.title, FAILED, _message(outcome), time.monotonic())
                else:
                    self.event("step", role.name, step.title, SKIPPED, self.stopped, time.monotonic())
            self._fire(role, self._due(role))  # handlers pending from earlier runs stay pending
        self._report_foreign(would=False)
        return True

    def _apply_step(self, role: RolePlan, step: Step, outcome: Outcome | BaseException) -> None:
        started = time.monotonic()
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            if isinstance(outcome, Change) and self.changed_something:
                outcome = _check(step, self._reprobe(step))
                if isinstance(outcome, BaseException):
                    raise outcome
            if isinstance(outcome, NoChange):
                self.event("step", role.name, step.title, OK, outcome.reason, started)
                return
            new = [(role.name, n) for n in step.notify if (role.name, n) not in self.pending]
            if new:
                self.pending.extend(new)
                journal.update(self.target, self.state_dir, self.owner.run_id, pending=self.pending)
            for name in step.notify:
                self.notifiers.setdefault((role.name, name), []).append(step.id)
            self.changed_something = self.stale = True
            self.facts_touched = self.facts_touched or step.changes_facts
            step.apply(self.commands)
            entry = Entry(self.owner.run_id, self._by(), role.name, "step", step.id, outcome.summary)
            journal.update(self.target, self.state_dir, self.owner.run_id, entries=[entry])
            self.event("step", role.name, step.title, CHANGED, outcome.summary, started, outcome.diff)
        except Exception as exc:  # noqa: BLE001 - one target's failure must not stop the others
            self.stopped = f"not run: {step.title} failed"
            self._kept_back(exc)
            self.event("step", role.name, step.title, FAILED, _message(exc), started)

    def _kept_back(self, exc: BaseException) -> None:
        """The engine refused the new servers before they changed: the recap says so as a rollback's does."""
        if isinstance(exc, KeptBack):
            self.recap.rolled_back = exc.recap

    def _replan(self, role: RolePlan) -> list[Outcome | BaseException]:
        items, broken = _items([role])
        results = probe.run_batch(self.target, items)
        return [broken.get((0, s)) or _check(step, results[s]) for s, step in enumerate(role.steps)]

    def _reprobe(self, step: Step) -> probe.Probe:
        """The step's probe again, refused on the target if this run lost its lock meanwhile."""
        script = lock.guard("$1", "$2") + '\nshift 2\n"$@" </dev/null 2>&1'
        result = self.target.script(script, self.state_dir, self.owner.run_id, *step.probe(), timeout=probe_deadline())
        if lock.lost(result.exit_code, result.stdout):
            raise lock.lost_error(self.target.name, self.state_dir)
        return probe.Probe(result.exit_code, result.stdout)

    def _fire(self, role: RolePlan, names: list[str]) -> None:
        """Run each handler once, in order; forget one only after it succeeded."""
        done: list[Pending] = []
        entries: list[Entry] = []
        try:
            for name in names:
                key = (role.name, name)
                started = time.monotonic()
                if self.stopped:
                    self.event("handler", role.name, name, SKIPPED,
                               f"dropped: {self.stopped}, so its unit runs what its files say" if key in done else
                               f"kept pending for the next run: {self.stopped}", started)
                    continue
                handler = resolve(name, role.handlers)
                if handler is None:
                    done.append(key)
                    self.event("handler", role.name, name, SKIPPED,
                               f"dropped: role {role.name} no longer declares handler {name}", started)
                    continue
                why = self._why(key)
                try:
                    handler.run(self.commands)
                except RolledBack as exc:
                    # The role's files are the generation before again, and so are its servers: none of
                    # its restarts is due any more (a later run that changes them notifies them anew).
                    self.stopped = f"not run: rolled back ({exc.why})"
                    self.recap.rolled_back = exc.message
                    done.extend((role.name, n) for n in names if (role.name, n) in self.pending)
                    self.event("handler", role.name, name, FAILED, _message(exc), started)
                    continue
                except Exception as exc:  # noqa: BLE001 - stays pending, reported as failed
                    self.stopped = f"not run: handler {name} failed"
                    self.event("handler", role.name, name, FAILED, _message(exc), started)
                    continue
                done.append(key)
                self.changed_something = self.stale = True
                entries.append(Entry(self.owner.run_id, self._by(), role.name, "handler", name, f"ran ({why})"))
                self.event("handler", role.name, name, CHANGED, f"ran ({why})", started)
        finally:
            if done:
                self.pending = [p for p in self.pending if p not in done]
                journal.update(self.target, self.state_dir, self.owner.run_id, entries=entries, pending=self.pending)

    def _due(self, role: RolePlan) -> list[str]:
        names = [n for r, n in self.pending if r == role.name]
        if self.check:
            names += [n for r, n in self.notifiers if r == role.name]
        return ordered(names, role.handlers)

    def _report_foreign(self, *, would: bool) -> None:
        """Handlers left pending by roles that are not part of this run: generic ones fire
        (their name says what to do), role-specific ones wait for a run of their role."""
        mine = {r.name for r in self.roles}
        foreign = [p for p in self.pending if p[0] not in mine]
        for role_name in dict.fromkeys(r for r, _ in foreign):
            plan = RolePlan(role_name, [], {})
            names = [n for r, n in foreign if r == role_name]
            runnable = [n for n in names if resolve(n, {}) is not None]
            for name in names:
                if name not in runnable:
                    self.event("handler", role_name, name, SKIPPED,
                               f"kept pending until a run includes role {role_name}", time.monotonic())
            if would:
                for name in ordered(runnable, {}):
                    self.event("handler", role_name, name, CHANGED,
                               "would run (pending from an earlier run)", time.monotonic(),
                               commands=_shown(resolve(name, {})))
            else:
                self._fire(plan, ordered(runnable, {}))

    def _why(self, key: Pending) -> str:
        steps = self.notifiers.get(key)
        if steps:
            return "notified by " + ", ".join(dict.fromkeys(steps))
        return "pending from an earlier run"

    def _by(self) -> str:
        return f"{self.owner.user}@{self.owner.workstation}"


def _shown(handler: Handler | None) -> tuple[str, ...]:
    return tuple(c.shown() for c in handler.commands()) if handler is not None else ()


def _items(roles: Sequence[RolePlan], state_dir: str | None = None) -> tuple[list[passes.Item],
                                                                         dict[tuple[int, int], BaseException]]:
    """Every step's probe of all roles as it joins the batch (Step.batched), then, given the state
    folder, the pending handlers' (the last one). A step whose probe cannot be built is reported as
    failed (`broken`); `true` holds its place."""
    items: list[passes.Item] = []
    broken: dict[tuple[int, int], BaseException] = {}
    for r, role in enumerate(roles):
        for s, step in enumerate(role.steps):
            try:
                items.append(step.batched())
            except Exception as exc:  # noqa: BLE001 - reported as that step's failure
                broken[(r, s)] = exc
                items.append(["true"])
    if state_dir is not None:
        items.append(journal.pending_probe(state_dir))
    return items, broken


def _check(step: Step, result: probe.Probe) -> Outcome | BaseException:
    try:
        return step.check(result)
    except Exception as exc:  # noqa: BLE001 - reported as that step's failure
        return exc


def run_target(
    target: Transport,
    roles: Sequence[RolePlan],
    *,
    check: bool = False,
    diff: bool = False,
    emit: Emit = discard,
    state_dir: str = DEFAULT_STATE_DIR,
    owner: lock.Owner | None = None,
    lock_wait: float = 0.0,
) -> TargetRecap:
    """Converge one target to `roles` (or, with check, only say what would change)."""
    return finish(_begin(target, None, roles, check=check, diff=diff, emit=emit, state_dir=state_dir, owner=owner,
                         lock_wait=lock_wait))


@dataclass
class Begun:
    """A target after its first round trip (lock, facts, probes) and planning, not yet applied."""

    run: _Run
    metered: Metered
    held: lock.TargetLock | None
    plans: list[list[Outcome | BaseException]]
    started: float
    error: BaseException | None = None
    prelude: recorded.Prelude | None = None
    #: the digest of the batch recorded on the target (an applying run's own, once begun)
    digest: str = ""
    #: Start was emitted already (the roles were known before the first round trip)
    announced: bool = False


def begin(target: Transport, prelude: recorded.Prelude, *, check: bool = False, diff: bool = False,
          emit: Emit = discard, state_dir: str = DEFAULT_STATE_DIR, owner: lock.Owner | None = None,
          lock_wait: float = 0.0) -> Begun:
    """Lock, facts and every step's probe in one round trip (two when the steps' batch is not the
    one recorded on the target); the roles come from `prelude.build` on the facts. Emits nothing.

    A target that another run holds, or that cannot be reached (a ConnectError: ssh refused, the
    container stopped), comes back with `error` set: finish() reports it (unreachable), as
    run_target does, and the other targets go on. A refusal of the facts or the plan is raised,
    with the lock released: the caller reports that target (pipeline.provision_live) and the others go on."""
    return _begin(target, prelude, (), check=check, diff=diff, emit=emit, state_dir=state_dir, owner=owner,
                  lock_wait=lock_wait)


def _begin(target: Transport, prelude: recorded.Prelude | None, roles: Sequence[RolePlan], *, check: bool,
           diff: bool, emit: Emit, state_dir: str, owner: lock.Owner | None, lock_wait: float) -> Begun:
    """The first round trip, for roles given (run_target: Start is emitted at once, and any failure
    is the target's own) or built from the facts (begin: see there)."""
    started = time.monotonic()
    metered = Metered(target)
    run = _Run(metered, list(roles), check, diff, emit, state_dir, owner or lock.Owner.current(new_run_id()),
               TargetRecap(target.name, check=check))
    if prelude is None:
        emit(Start(target.name, tuple(r.name for r in roles), sum(len(r.steps) for r in roles), check))
    own: tuple[type[BaseException], ...] = (LockError, ConnectError) if prelude is not None else (Exception,)
    held: lock.TargetLock | None = None
    digest = ""
    try:
        nonce = probe.new_nonce()
        if prelude is None:
            items, broken = run.items()
            folded = passes.fold(items)
            script = probe.build(folded.argvs, nonce)
            if len(script) <= probe.INLINE_LIMIT:
                # Lock, pending handlers and every step's probe in one round trip.
                held = _acquire(metered, state_dir, run.owner, check, lock_wait, script)
                results = probe.fill(metered, folded,
                                     probe.parse_for(target.name, held.probed, len(folded.argvs), nonce))
            else:
                held = _acquire(metered, state_dir, run.owner, check, lock_wait)
                results = probe.run_batch(metered, items)
        else:
            held = _acquire(metered, state_dir, run.owner, check, lock_wait, recorded.first_trip(prelude, nonce),
                            fresh=not check)
            first = held.probed
            run.roles = list(prelude.build(first, nonce))
            if held.fresh:  # a new target: its facts were accepted, now take the lock (nothing recorded yet)
                held = _acquire(metered, state_dir, run.owner, check, lock_wait)
            items, broken = run.items()
            results, digest = recorded.results(metered, first, nonce, items, key=prelude.key, state_dir=state_dir,
                                               run_id=run.owner.run_id, record=not check)
        return Begun(run, metered, held, run.plan(results, broken), started, prelude=prelude, digest=digest,
                     announced=prelude is None)
    except own as exc:
        if held is not None:
            with contextlib.suppress(Exception):  # a lost connection may not release: the lock shell ends with it
                held.release()
        return Begun(run, metered, None, [], started, exc, announced=prelude is None)
    except BaseException:
        if held is not None:
            held.release()
        raise


def finish(begun: Begun) -> TargetRecap:
    """Report (check) or apply what begin() planned; the recap, as run_target returns it."""
    run, held = begun.run, begun.held
    recap = run.recap
    if not begun.announced:
        run.emit(Start(recap.target, tuple(r.name for r in run.roles), sum(len(r.steps) for r in run.roles),
                       run.check))
    try:
        if begun.error is not None:
            raise begun.error
        if held is not None and (run.check or not (run.pending or _changes(begun.plans))):
            held.release()  # nothing will be applied: the lock goes in the round trip that took it
        if run.check:
            run.report_plan(begun.plans)
        else:
            run.apply(begun.plans)
            if run.facts_touched and not run.stopped and held is not None and begun.prelude is not None:
                _record_next(run, begun.prelude, begun.digest)
    except Exception as exc:  # noqa: BLE001 - the recap carries it; other targets go on
        recap.stopped_by(exc)
        # Steps that were never reported did not run.
        recap.skipped += sum(len(r.steps) for r in run.roles) - run.steps_reported
    finally:
        if held is not None:
            held.release()
        recap.duration = time.monotonic() - begun.started
        recap.round_trips = begun.metered.commands
        run.emit(recap)
    return recap


def _record_next(run: _Run, prelude: recorded.Prelude, digest: str) -> None:
    """The next run's batch, from the facts as this run left them (recorded.record_next). Only
    ever saves the next run a round trip, so nothing here may fail this one."""
    with contextlib.suppress(Exception):  # the next run then probes twice, as it did before
        recorded.record_next(run.target, prelude, lambda roles: _items(roles, run.state_dir)[0],
                             state_dir=run.state_dir, run_id=run.owner.run_id, recorded=digest)


def _changes(plans: list[list[Outcome | BaseException]]) -> bool:
    return any(isinstance(outcome, Change) for row in plans for outcome in row)


def _acquire(target: Transport, state_dir: str, owner: lock.Owner, check: bool, wait: float,
             script: str = "", fresh: bool = False) -> lock.TargetLock:
    deadline = time.monotonic() + wait
    while True:
        try:
            return lock.acquire(target, state_dir, owner, shared=check, probe=script, fresh=fresh)
        except LockError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)  # polling a lock held by another run, up to the caller's deadline


def run_targets(
    jobs: Sequence[tuple[Transport, Sequence[RolePlan]]],
    *,
    forks: int = 4,
    emit: Emit = discard,
    owner: lock.Owner | None = None,
    **options,
) -> list[TargetRecap]:
    """run_target on many targets, `forks` at a time; recaps in the order of `jobs`."""
    owner = owner or lock.Owner.current(new_run_id())
    guard = threading.Lock()

    def safe_emit(item) -> None:
        with guard:
            emit(item)

    with ThreadPoolExecutor(max_workers=max(1, forks)) as pool:
        futures = [pool.submit(run_target, t, roles, emit=safe_emit, owner=owner, **options) for t, roles in jobs]
        return [f.result() for f in futures]
