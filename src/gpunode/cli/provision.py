"""inv provision: facts -> plan -> roles -> engine, on one container, one host or a group."""

from __future__ import annotations

import sys

from invoke import Exit

from gpunode.cli.common import forks_of, load_inventory, parse_sets, select_targets, task

HELP = {
    "host": "inventory host (a Proxmox host, or a plain SSH host)",
    "ct": "container vmid on that host (omit for a plain SSH host)",
    "group": "provision every target of an inventory group, in parallel",
    "check": "show what would change and the diffs (-v: the plan too); change nothing",
    "diff": "show diffs of changed files",
    "only": "run only these roles (comma-separated) after checking what they depend on is in place "
            "(Ansible's -t/--tags: gpunode's roles are its tags)",
    "skip-tags": "run every role but these (comma-separated), as Ansible's --skip-tags",
    "json": "one JSON event per line on stdout (schema: docs/events.md)",
    "inventory": "inventory folder or file (default: $GPUNODE_INVENTORY, gpunode.yaml's inventory:, ./inventory)",
    "set": "override a variable: -e key=value, or -e @vars.yml (a YAML file of them); repeatable",
    "limit": "only the targets matching this pattern (Ansible's): kpro*:!kpro6/202; hosts, host/vmid, groups",
    "forks": "how many targets run at once with --group (default 4)",
    "facts": "use a saved facts snapshot instead of probing (plan only; implies --check)",
    "commands": "print the exact commands each change would run (implies --check; steps whose apply is a "
                "fixed list of commands: files, directories, links, units, services)",
    "ask-become-pass": "ask once for the sudo password of hosts with become (else $GPUNODE_BECOME_PASSWORD)",
    "verbose": "-v: every step (also those with nothing to do) and, with --check, the plan; -vv: also the "
               "commands of each change (--check) and what long steps print on the target (installer, staging, "
               "readiness), each line prefixed with the target; -vvv: also the traceback of an internal error",
}


@task(iterable=["set_"], help=HELP)
def provision(c, host=None, ct=None, group=None, check=False, diff=False, only=None, json=False,
              inventory=None, set_=None, forks=None, facts=None, verbose=0, commands=False, limit=None,
              ask_become_pass=False, skip_tags=None):
    """Provision inference servers: packages, engine venv, CUDA fixes, weights, units, router, readiness."""
    # Imported here, not at the top: `inv --list` and `inv --help` must not pay for SSH, the
    # resolver and the templates (tests/unit/test_cli_import_light.py).
    from pathlib import Path

    from rich.console import Console

    from gpunode import pipeline, rollout
    from gpunode.cli.habits import as_typed
    from gpunode.cli.progress import Feed, LiveLines
    from gpunode.cli.session import Session
    from gpunode.engine.lock import Owner
    from gpunode.engine.runner import new_run_id
    from gpunode.errors import GpunodeError, printable
    from gpunode.fleet import provision as fleet
    from gpunode.report import HumanReport, JsonLines
    from gpunode.secrets import redact

    if only is not None and not any(r.strip() for r in str(only).split(",")):
        from gpunode.errors import InventoryError

        # `--only ''` names no role: it was read as no --only, and every role ran (issue 41)
        raise InventoryError(f"--only {str(only)[:40]!r} names no role", hint="e.g. --only engine, or leave --only out")
    forks = forks_of(forks, 4)
    inv = load_inventory(inventory)
    only = _roles_wanted(only, skip_tags)  # a mistyped role name is caught before any target is contacted
    sets = parse_sets(set_)
    targets = select_targets(inv, host, ct, group, sets, limit)
    chosen = list(targets)  # a fleet router's own target too, for the Prometheus targets file
    every = fleet.every_target(inv, sets) if any(t.vars.get("fleet_router") for t in targets) else []
    fleet.check_router_only(targets, lambda: every or fleet.every_target(inv, sets))
    fleet.check_members(targets, every)
    targets = fleet.firewall_sources(targets, every)
    # A target that only holds a fleet router gets the router's run alone (provision_fleets).
    targets = [t for t in targets if not t.vars.get("fleet_router_only")]
    if ask_become_pass:
        from gpunode import become

        become.ask()  # once, before any target is contacted, as ansible-playbook -K
    check = check or bool(facts) or commands
    console = Console(stderr=True) if json else Console()
    run_id = new_run_id()
    live = None if json else LiveLines(console)
    verbose = int(verbose or 0)
    sink = JsonLines(sys.stdout, redact=redact, run_id=run_id) if json else HumanReport(
        console, redact=lambda text: as_typed(redact(text)), live=live, commands=commands or verbose >= 2,
        show_ok=verbose >= 1, brief=verbose == 0)
    streamed = verbose >= 2  # -vv: the target's own lines, and (in check mode) the commands of each change

    def show_plan(name: str, plan) -> None:
        if json:
            sink.plan(name, plan.to_dict())
        elif check and verbose:
            from gpunode.resolve.explain import render

            console.print(f"[bold]{printable(name)}[/bold]: plan")
            console.print(printable(redact(render(plan))), markup=False, highlight=False, soft_wrap=True)

    # A fleet member's servers leave the fleet router while each is replaced (docs/upgrade.md).
    routes = fleet.member_routes(targets, every) if every else {}
    with Session() as session:
        try:
            if pipeline.multinode(targets):
                from gpunode.fleet import prechecks

                prechecks.multinode(targets, inv)  # before any node is contacted
                if only or facts:
                    raise Exit("--only and --facts do not apply to a multinode group: its plan needs every "
                               "node's live facts together (docs/multinode.md)", code=2)
                # every node's facts first: one plan is made from all of them (docs/multinode.md)
                jobs = pipeline.prepare_group([(t, session.transport(t)) for t in targets],
                                              progress=lambda name: Feed(name, sink),
                                              output=(lambda name: _streamer(console, name, redact)) if streamed
                                              else None)
                for job in jobs:
                    show_plan(job.target.name, job.plan)
                # all ranks start together: the head's readiness waits for every node
                recaps = pipeline.provision(jobs, check=check, diff=diff or check, emit=sink,
                                            forks=max(forks, len(jobs)), owner=Owner.current(run_id))
            elif only or facts:
                # --only checks its dependencies first and --facts reads a snapshot: facts before the engine.
                jobs, lost = [], {}
                for target in targets:
                    try:
                        jobs.append(pipeline.prepare(target, session.transport(target), only=only,
                                                     progress=Feed(target.name, sink),
                                                     facts_dir=Path(facts) if facts else None,
                                                     output=_streamer(console, target.name, redact) if streamed
                                                     else None, fleet=routes.get(target.name)))
                    except GpunodeError as exc:  # the others go on; the recap says UNREACHABLE or FAILED
                        lost[target.name] = pipeline.stopped(target, exc, check=check, emit=sink)
                        continue
                    show_plan(target.name, jobs[-1].plan)
                done = {r.target: r for r in (pipeline.provision(jobs, check=check, diff=diff or check, emit=sink,
                                                                 forks=forks, owner=Owner.current(run_id))
                                              if jobs else [])}
                recaps = [lost.get(t.name) or done[t.name] for t in targets]
            else:
                # Lock, facts and every step's probe in one round trip per target.
                pairs = [(pipeline.Planner(t, progress=Feed(t.name, sink),
                                           output=_streamer(console, t.name, redact) if streamed else None,
                                           fleet=routes.get(t.name)),
                          session.transport(t)) for t in targets]
                # serial / max_fail_percentage (the group's, as Ansible's): batch by batch, docs/upgrade.md
                first = targets[0].vars if targets else {}
                limit = rollout.max_fail(first.get("max_fail_percentage"))
                recaps, why = [], ""
                for batch in rollout.batches(pairs, first.get("serial")):
                    if why:
                        recaps += [rollout.held_back(p.target.name, why, check=check, emit=sink) for p, _ in batch]
                        continue
                    got = pipeline.provision_live(batch, check=check, diff=diff or check, emit=sink, forks=forks,
                                                   owner=Owner.current(run_id),
                                                   on_plan=lambda p: show_plan(p.target.name, p.plan))
                    recaps += got
                    why = rollout.stops(got, limit)
                if every and not any(r.failed or r.error for r in recaps):
                    # The fleet routers: their workers are the servers the targets above now run.
                    more, notes = fleet.provision_fleets([p for p, _ in pairs], every, session.transport,
                                                         check=check, diff=diff or check, emit=sink,
                                                         owner=Owner.current(run_id))
                    recaps += more
                    for note in notes:
                        console.print(f"note: {printable(note)}", markup=False, highlight=False)
        finally:
            if live is not None:
                live.stop()
        written = check or _prometheus_targets(session, chosen, forks, console)
    sink.finish(recaps)
    code = exit_code(recaps) or (0 if written else EXIT_FAILED)
    if code:
        raise Exit(code=code)


def _roles_wanted(only: str | None, skip: str | None) -> str | None:
    """--only (or --tags) less --skip-tags, every name checked against the roles the search path has."""
    from gpunode import roles
    from gpunode.errors import InventoryError

    if only:
        roles.select(only)
    if skip is None:
        return only
    everything = roles.order()
    skipped = [r.strip() for r in str(skip).split(",") if r.strip()]
    for name in skipped or [str(skip)]:
        if name not in everything:
            raise InventoryError(f"--skip-tags: unknown role {name[:40]!r}", hint=f"roles: {', '.join(everything)}")
    left = [r for r in (roles.select(only)[0] if only else everything) if r not in skipped]
    if not left:
        raise InventoryError("--skip-tags leaves no role to run", hint=f"roles: {', '.join(everything)}")
    return ",".join(left)


#: ansible-playbook's exit codes (its TaskQueueManager): a target that could not be reached wins
#: over a failed one, as in Ansible's strategy plugins.
EXIT_FAILED = 2
EXIT_UNREACHABLE = 4


def exit_code(recaps) -> int:
    """0 when every target succeeded; 4 when any was unreachable; else 2 when any failed."""
    if any(r.unreachable for r in recaps):
        return EXIT_UNREACHABLE
    return EXIT_FAILED if any(r.failed or r.error for r in recaps) else 0


def _prometheus_targets(session, targets, forks: int, console) -> bool:
    """The config files' `prometheus_targets`: this run's targets in that file_sd file as they run
    now, the other targets' entries kept (docs/prometheus.md). False when it could not be written."""
    from gpunode import settings
    from gpunode.cli.fleet import write_targets
    from gpunode.errors import GpunodeError, printable
    from gpunode.secrets import redact

    path = settings.current().prometheus_targets
    if not path:
        return True
    try:
        _, lost, notes = write_targets(session, targets, path, forks, keep_others=True)
    except GpunodeError as exc:
        console.print(printable(redact(f"error: prometheus_targets {path} not updated: {exc}")), markup=False,
                      highlight=False)
        return False
    for note in [*notes, *(f"unreachable, its entries in {path} kept: {x}" for x in lost)]:
        console.print(printable(redact(f"note: {note}")), markup=False, highlight=False)
    return True


def _streamer(console, name: str, redact):
    """-v: one remote line, printed above the live progress lines (on stderr with --json)."""
    def show(line: str) -> None:
        console.print(redact(f"{name} | {line}"), markup=False, highlight=False, soft_wrap=True)

    return show


ns = provision
