"""inv status / logs / history: what runs on the targets, its journal, and what gpunode changed."""

from __future__ import annotations

import json as jsonlib
import sys

from invoke import Exit

from gpunode.cli.common import forks_of, load_inventory, parse_int, parse_sets, reader_gone, select_targets, task

LIMIT_HELP = "only the targets matching this pattern (Ansible's): kpro*:!kpro6/202; hosts, host/vmid, groups"
TARGET_HELP = {
    "host": "inventory host (a Proxmox host, or a plain SSH host)",
    "ct": "container vmid on that host (omit for a plain SSH host)",
    "group": "every target of an inventory group",
    "json": "one JSON document per target on stdout (docs/fleet.md)",
    "inventory": "inventory folder or file (default: $GPUNODE_INVENTORY, gpunode.yaml's inventory:, ./inventory)",
    "set": "override a variable: -e key=value, or -e @vars.yml (a YAML file of them); repeatable",
    "limit": LIMIT_HELP,
}


def say(text: str) -> None:
    """Print a block; a reader that went away (`| head`) ends the task quietly."""
    try:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        reader_gone()
        raise Exit(code=0) from None


def targets_of(inventory, host, ct, group, set_, limit=None):
    return select_targets(load_inventory(inventory), host, ct, group, parse_sets(set_), limit)


def _status_of(session, target, sample: float):
    from gpunode.errors import GpunodeError
    from gpunode.fleet import gather, status
    from gpunode.fleet.endpoint import CLIENT_KEY
    from gpunode.steps.secretfiles import curl_auth

    try:
        text = gather.gather(session.transport(target), curl_auth(str(target.vars.get("server_api_key") or "")),
                             sample, curl_auth(str(target.vars.get(CLIENT_KEY) or "")))
    except GpunodeError as exc:
        report = status.Report(target.name)
        report.notes.append(str(exc))
        return report, f"{target.name}: unreachable: {exc.message}"
    return status.parse(target.name, text), None


@task(iterable=["set_"], help={**TARGET_HELP, "sample": "seconds between the two metrics samples that give "
                               "tokens/s (default 1; 0: one sample, no rate)",
                               "forks": "how many targets are asked at once with --group (default 8)"})
def status(c, host=None, ct=None, group=None, json=False, inventory=None, set_=None, sample=None, forks=None,
           limit=None):
    """Is everything up: units, readiness, model, engine, uptime, restarts, GPU memory, load, router workers."""
    from concurrent.futures import ThreadPoolExecutor

    from gpunode.cli.session import Session
    from gpunode.fleet import render
    from gpunode.secrets import redact

    seconds = parse_int(1 if sample is None else sample, "--sample", 0, 60, "e.g. --sample 2")
    forks_n = forks_of(forks, 8)
    targets = targets_of(inventory, host, ct, group, set_, limit)
    with Session() as session, ThreadPoolExecutor(max_workers=min(forks_n, len(targets))) as pool:
        results = list(pool.map(lambda t: _status_of(session, t, seconds), targets))
    down: list[str] = []
    for report, unreachable in results:
        problems = [unreachable] if unreachable else [f"{report.target}: {d}" for d in report.down()]
        down += problems
        if json:
            doc = report.to_dict()
            if unreachable:
                doc.update(up=False, down=[unreachable])
            say(redact(jsonlib.dumps(doc)))
        else:
            lines = [f"{report.target}: UNREACHABLE", *[f"  {n}" for n in report.notes]] if unreachable \
                else render.status_lines(report)
            say(redact("\n".join(lines)))
    if down:
        raise Exit(redact("down: " + "; ".join(down)), code=1)


@task(iterable=["set_"], help={**TARGET_HELP, "server": "the server's name (cpu0, gpu3; inv status lists them)",
                               "router": "the router's journal", "since": 'from this time: "1 hour ago", today, '
                               '"2026-12-03 10:00"', "lines": "at most this many lines (default 100)",
                               "follow": "keep printing new lines until Ctrl-C (one target)"})
def logs(c, host=None, ct=None, group=None, inventory=None, server=None, router=False, since=None, lines=None,
         follow=False, set_=None, json=False, limit=None):
    """The journal of a server's unit, the router's, or of every gpunode unit."""
    from gpunode.cli.session import Session
    from gpunode.errors import InventoryError
    from gpunode.fleet import logs as fleetlogs
    from gpunode.secrets import redact_log

    unit = fleetlogs.unit_for(server, router)
    count = parse_int(100 if lines is None else lines, "--lines", 1, 1_000_000, "e.g. --lines 200")
    argv = fleetlogs.argv(unit, since, count, follow)
    targets = targets_of(inventory, host, ct, group, set_, limit)
    if follow and len(targets) > 1:
        raise InventoryError("--follow reads one target's journal", hint="pass --host H [--ct N] instead of --group")
    with Session() as session:
        for target in targets:
            transport = session.transport(target)
            if len(targets) > 1:
                say(f"==> {target.name} <==")
            out = _Through(sys.stdout.buffer) if follow else None
            try:
                result = transport.run(argv, sink=out, timeout=None if follow else 120)
            finally:
                if out is not None:
                    out.flush()
            text = result.stdout
            if result.exit_code == 3 and text.startswith("@@nounit"):
                raise fleetlogs.missing(unit, target.name, text)
            if not result.ok:
                raise InventoryError(f"journalctl failed on {target.name}: {(result.stderr or text).strip()[:300]}",
                                     target=target.name, hint='check --since (e.g. --since "1 hour ago")')
            if not follow and text:
                say(redact_log(text))


class _Through:
    """A sink that writes what the target prints as each line ends (for --follow), masked: a
    line is the unit redaction works on, so a key split over two reads is still found."""

    def __init__(self, out) -> None:
        self.out = out
        self.rest = b""

    def write(self, data: bytes) -> int:
        from gpunode.secrets import redact_log

        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        if lines:
            text = b"\n".join(lines).decode("utf-8", "replace") + "\n"
            self.out.write(redact_log(text).encode())
            self.out.flush()
        return len(data)

    def flush(self) -> None:
        from gpunode.secrets import redact_log

        if self.rest:
            self.out.write(redact_log(self.rest.decode("utf-8", "replace")).encode())
            self.rest = b""
        self.out.flush()


@task(iterable=["set_"], help={**TARGET_HELP, "run": "only this run id", "last": "only the last N runs",
                               "verbose": "every change of each run (default: the first 12)"})
def history(c, host=None, ct=None, group=None, json=False, inventory=None, set_=None, run=None, last=None,
            verbose=0, limit=None):
    """The runs gpunode made on a target, from its journal: who, when, what changed; then the kept generations."""
    from gpunode.cli.session import Session
    from gpunode.engine import DEFAULT_STATE_DIR
    from gpunode.engine.journal import read
    from gpunode.fleet import generations, render
    from gpunode.secrets import redact_log

    keep = parse_int(last, "--last", 1, 100_000, "e.g. --last 5") if last is not None else None
    targets = targets_of(inventory, host, ct, group, set_, limit)
    with Session() as session:
        for target in targets:
            notes: list[str] = []
            transport = session.transport(target)
            records = render.runs(read(transport, DEFAULT_STATE_DIR, notes))
            gens, _ = generations.read(transport)
            if run:
                records = [r for r in records if r["run"] == run]
            if keep:
                records = records[-keep:]
            # the journal is written redacted; what reads it back masks too, for runs of older versions
            if json:
                say(redact_log(jsonlib.dumps({"type": "history", "target": target.name, "runs": records,
                                              "notes": notes, "generations": [g.__dict__ for g in gens]})))
                continue
            say(redact_log("\n".join([*render.history_lines(target.name, records, verbose),
                                       *[f"  note: {n}" for n in notes], *generations.lines(gens)])))


PROMETHEUS_HELP = {**{k: v for k, v in TARGET_HELP.items() if k != "json"},
                   "out": "write the file_sd JSON to this file, replaced in one step (default: print it); "
                   "point a Prometheus file_sd_configs at it (docs/prometheus.md)",
                   "forks": "how many targets are asked at once (default 8)"}


@task(iterable=["set_"], help=PROMETHEUS_HELP)
def prometheus_targets(c, host=None, ct=None, group=None, inventory=None, set_=None, limit=None, out=None, forks=None):
    """Prometheus file_sd targets: every server's, router's and fleet router's metrics endpoint, with labels."""
    from gpunode.cli.session import Session

    targets = targets_of(inventory, host, ct, group, set_, limit)
    with Session() as session:
        text, lost, notes = write_targets(session, targets, out, forks_of(forks, 8))
    if not out:
        say(text)
    for note in notes:
        sys.stderr.write(f"note: {note}\n")
    if lost:
        raise Exit("unreachable (their entries " + ("kept as the file had them" if out else "left out") + "): " +
                   "; ".join(lost), code=1)


def write_targets(session, targets, out: str | None, forks: int, *, keep_others: bool = False):
    """Ask each target what runs and write the file_sd file (when `out`): (its text, the unreachable
    targets' messages, notes). keep_others: the file's entries of targets not asked stay."""
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from gpunode import durable, userfiles
    from gpunode.errors import InventoryError
    from gpunode.fleet import scrape

    if out is not None:
        userfiles.check_writable(out, what="the targets file", flag="--out")
    with ThreadPoolExecutor(max_workers=max(1, min(forks, len(targets)))) as pool:
        results = list(pool.map(lambda t: _status_of(session, t, 0), targets))
    lost = [unreachable for _, unreachable in results if unreachable]
    old = userfiles.read_text(out, what="the targets file", error=InventoryError) \
        if out and (lost or keep_others) and Path(out).exists() else None
    entries = scrape.carried(old, [t.name for t in targets], others=True) if keep_others else []
    for target, (report, unreachable) in zip(targets, results, strict=True):
        entries += scrape.carried(old, [target.name]) if unreachable else scrape.groups(target, report)
    text = scrape.document(entries)
    if out:
        try:
            durable.write_atomic(userfiles.check_writable(out, what="the targets file", flag="--out"), text.encode())
        except OSError as exc:
            raise InventoryError(f"--out {out}: cannot write the targets file: {exc.strerror or exc}",
                                 hint="check the folder's permissions and free space") from None
    local = scrape.on_loopback(entries)
    notes = [f"the endpoints of {', '.join(local)} listen on loopback: only a Prometheus on each node reaches them "
             "(docs/prometheus.md)"] if len(local) > 1 else []
    return text, lost, notes

ns = [status, logs, history, prometheus_targets]
