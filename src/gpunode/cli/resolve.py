"""inv resolve: facts -> plan, printed with its reasons; changes nothing anywhere.

    inv resolve --host kpro6 --ct 200 [--explain] [--json]    # probe the target once, then resolve
    inv resolve --facts snap/                                 # a saved facts snapshot
    inv resolve --nvidia-smi smi.txt --model /models/Qwen3.6-27B   # a node you cannot reach yet
"""

from __future__ import annotations

import os
import stat
from json import dumps
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpunode import userfiles
from gpunode.cli.common import inventory_path, load_inventory, parse_sets, select_targets, task, use_search_path
from gpunode.errors import FactError, GpunodeError, InventoryError, printable

if TYPE_CHECKING:  # the functions import what they run: `inv --list` stays fast
    from gpunode.facts.types import Facts, Model
    from gpunode.resolve.plan import Plan

HELP = {
    "host": "inventory host to probe",
    "ct": "container vmid on that host (omit for a plain SSH host)",
    "facts": "resolve a saved facts snapshot folder instead of probing",
    "nvidia_smi": "offline: a file with the node's nvidia-smi output (table, -q, -q -x, -L, --query-gpu CSV) "
                  "or its sglang.check_env / torch collect_env output",
    "model": "offline: the model directory (or its config.json) the node will serve",
    "explain": "show every decision with its reason, fact, rule and source",
    "json": "print the plan as JSON (docs/resolve.md) and nothing else; a refusal as a JSON refusal document",
    "inventory": "inventory folder or file (default: $GPUNODE_INVENTORY, gpunode.yaml's inventory:, ./inventory)",
    "set": "override a variable: -e key=value, or -e @vars.yml (a YAML file of them); repeatable",
}

WALK_DEPTH = 3  # as deep as the facts probe lists a model directory


def local_model(path: str) -> Model:
    """Model facts of a local directory, through the same parser the target probe feeds."""
    from gpunode.facts import model as model_facts

    given = Path(path)
    # exists(), not is_file(): a FIFO or a device named config.json is refused by userfiles by name,
    # not taken for a missing file
    if not given.exists() and (gone := userfiles.missing(given, "")):
        raise FactError(f"{path} {gone}", hint="check the path")
    folder = given.parent if given.exists() and not given.is_dir() else given
    if not os.path.lexists(folder / "config.json"):  # a link loop or to nothing is the reader's to name
        raise FactError(f"{path}: no config.json there", hint="pass a model directory or its config.json")
    lines = []
    for root, dirs, files in os.walk(folder):
        depth = len(Path(root).relative_to(folder).parts)
        if depth >= WALK_DEPTH:
            dirs[:] = []
        for name in files:
            full = Path(root, name)
            if any(ch < " " or ch == "\x7f" for ch in name) or name != name.encode("utf-8", "surrogateescape").decode(
                    "utf-8", "replace"):
                raise FactError(f"{ascii(str(full))}: a model file's name holds a line break, a control character or "
                                "bytes that are not UTF-8; staging and serving would break on it",
                                hint="rename the file (or move it out of the model folder)")
            try:
                st = full.stat()
            except OSError as exc:
                why = f"a symbolic link to {os.readlink(full)}, which is missing" if full.is_symlink() else exc.strerror
                raise FactError(f"{full}: cannot read it: {why}",
                                hint="fix or remove the link (the file it names is not there)") from None
            # as the probe's listing: a FIFO or a device is "? TYPE PATH", and the parser judges it
            odd = "" if stat.S_ISREG(st.st_mode) else "p" if stat.S_ISFIFO(st.st_mode) else \
                "c" if stat.S_ISCHR(st.st_mode) else "b" if stat.S_ISBLK(st.st_mode) else "s"
            rel = full.relative_to(folder)
            lines.append(f"? {odd} ./{rel}" if odd else f"{st.st_size} ./{rel}")

    def text(name: str) -> str | None:
        p = folder / name
        return userfiles.read_text(p, what=name, error=FactError) if p.exists() or p.is_symlink() else None

    header = None
    single = folder / "model.safetensors"
    # as the probe does (facts/model.py): a single file's header, else the first shard's, its name first
    sharded = (folder / "model.safetensors.index.json").exists() or not single.exists()
    first = single if not sharded else next(iter(sorted(folder.glob("*.safetensors"))), None)
    if first is not None and first.is_file():  # a FIFO there is named by the listing's check
        n = int.from_bytes(userfiles.read_bytes(first, what=first.name, error=FactError, limit=8, partial=True),
                           "little")
        size = first.stat().st_size
        if n > size - 8:  # a cut download: the header the file announces is not all there
            raise FactError(f"{first}: header is {n} bytes long but the file holds only {max(size - 8, 0)} after "
                            "its length", hint="download the file again; it was cut off")
        header = userfiles.decode(userfiles.read_bytes(first, what="safetensors header", error=FactError,
                                                       limit=n, start=8, partial=True),
                                  first, what="safetensors header", error=FactError) if n <= 100 << 20 else None
        if header is not None and sharded:
            header = f"{first.name}\n{header}"
    m = model_facts.parse_model(str(folder), "\n".join(lines), text("config.json"),
                                text("model.safetensors.index.json"), text("hf_quant_config.json"), header)
    return m  # with only a config (and index), parse_model estimates the size from them


def offline_facts(smi_file: str, model: str | None) -> Facts:
    from gpunode.facts import gpu_report
    from gpunode.facts.types import Facts, System

    text = userfiles.read_text(smi_file, what="nvidia-smi output", error=FactError)
    report = gpu_report.read_report(text)
    if not report.gpus:
        message, hint = gpu_report.refusal(smi_file, report)
        raise FactError(message, hint=hint)
    machine = report.reported.machine if report.reported else None
    return Facts(target=Path(smi_file).stem, gpus=report.gpus, driver=report.driver, reported=report.reported,
                 system=System(arch=machine or ""),
                 model=local_model(model) if model else None,
                 problems=(*report.problems, f"offline: only the {report.format} report and the model are known; "
                           "the system was not probed"))


def plan_for(c: Any, host: str | None, ct: str | None, facts_dir: str | None, nvidia_smi: str | None,
             model: str | None, inventory: str | None, sets: list[str] | None) -> Plan:
    from gpunode.resolve import resolve as resolve_plan

    facts, variables = inputs(c, host, ct, facts_dir, nvidia_smi, model, inventory, sets)
    return resolve_plan(facts, variables)


def inputs(c: Any, host: str | None, ct: str | None, facts_dir: str | None, nvidia_smi: str | None,
           model: str | None, inventory: str | None, sets: list[str] | None) -> tuple[Facts, dict[str, Any]]:
    """The facts and the variables to resolve them with."""
    from gpunode.facts import snapshot
    from gpunode.facts.parse import parse

    # The user's roles (beside the inventory, roles_path) declare variables too: the search path comes
    # first, or --set of a user role's variable is refused here that provision takes (issue 41).
    inv = load_inventory(inventory) if host else None
    if inv is None:
        given = inventory_path(inventory)
        use_search_path(given if given.exists() else None)
    overrides = parse_sets(sets)
    variables: dict[str, Any] = dict(overrides)
    target = None
    if inv is not None:
        (target,) = select_targets(inv, host, ct, None, overrides)
        variables = dict(target.vars)  # the plan's weights and model path come from model_source
    if facts_dir:
        facts = parse(snapshot.load(Path(facts_dir)))
    elif nvidia_smi:
        facts = offline_facts(nvidia_smi, model)
    elif target is not None:
        from gpunode.cli.session import Session
        from gpunode.facts.probe import gather

        with Session() as session:
            facts = parse(gather(session.transport(target), model_path=variables.get("model_source"),
                                 venv=variables.get("venv")))
    else:
        raise InventoryError("what to resolve? pass --host H [--ct N], --facts DIR, or --nvidia-smi FILE --model PATH",
                             hint="--nvidia-smi and --model work for a node you cannot reach yet")
    return facts, variables


@task(iterable=["set_"], help=HELP)
def resolve(c, host=None, ct=None, facts=None, nvidia_smi=None, model=None, explain=False, json=False,
            inventory=None, set_=None):
    """Show the plan the resolver makes for a target: engine, pins, flags, topology, fixes, with reasons."""
    from gpunode.resolve import resolve as resolve_plan
    from gpunode.resolve.explain import render
    from gpunode.resolve.report import refusal
    from gpunode.secrets import redact, redact_data

    if not json:
        print(printable(redact(render(plan_for(c, host, ct, facts, nvidia_smi, model, inventory, set_),
                                      decisions=explain))), end="")
        return
    # --json: a refusal is a JSON document on stdout too (docs/resolve.md, gpunode.refusal/1), and the
    # message still goes to stderr with exit code 2. Both masked as structures, before json.dumps: a
    # secret holding a quote is escaped in the JSON text.
    given: Facts | None = None
    try:
        given, variables = inputs(c, host, ct, facts, nvidia_smi, model, inventory, set_)
        plan = resolve_plan(given, variables)
    except GpunodeError as exc:
        print(dumps(redact_data(refusal(exc, given)), indent=2, ensure_ascii=False))
        raise
    print(dumps(redact_data(plan.to_dict()), indent=2, ensure_ascii=False))


ns = resolve
