"""inv audit: check container configs made by hand (files, or `pct config N` read over SSH)."""

from __future__ import annotations

import json as jsonlib
import os
from pathlib import Path

from invoke import Exit

from gpunode import userfiles
from gpunode.cli.common import VMID_HINT, load_inventory, parse_int, task
from gpunode.errors import GpunodeError, InventoryError
from gpunode.facts import served

HELP = {
    "config": "container config file (/etc/pve/lxc/N.conf, or `pct config N` saved); repeatable",
    "host": "inventory host whose containers to read with `pct config` over SSH",
    "ct": "container vmid on --host (default: every container the inventory lists there)",
    "json": "print the gpunode.audit/1 document instead of text",
    "model_size_gib": "size of the weights to stage, in GiB (enables the memory check)",
    "model_dir": "local model folder whose files give the size instead (enables the memory check)",
    "servers": "inference servers in the container, for the memory check (default 1)",
    "model_source": "model folder as the container sees it (default: the target's model_source); "
                    "checks a mount point holds it",
    "inventory": "inventory folder or file (default: $GPUNODE_INVENTORY, gpunode.yaml's inventory:, ./inventory)",
}


def parse_gib(text: str) -> int:
    try:
        value = float(str(text).strip())
    except ValueError:
        value = -1.0
    if not 0 < value < 1 << 20:
        raise InventoryError(f"--model-size-gib {str(text)[:40]!r} is not a size in GiB",
                             hint="e.g. --model-size-gib 54.5")
    return int(value * (1 << 30))


def folder_bytes(path: str) -> int:
    """What staging copies: the files under the model folder (symlinks followed, as in HF caches)
    but the other copies of the weights that the servers do not load (facts/served.py)."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise InventoryError(f"--model-dir {path}: not a folder here", hint="give the local model folder, "
                             "or its size with --model-size-gib")
    sizes: dict[str, int] = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                sizes[str((Path(folder) / name).relative_to(root))] = (Path(folder) / name).stat().st_size
            except OSError as exc:
                raise InventoryError(f"--model-dir: cannot read {Path(folder) / name} ({exc.strerror})",
                                     hint="fix the file's permissions or a dangling link") from None
    left = set(served.left_out(sizes, _index_shards(root)))
    return sum(n for p, n in sizes.items() if p not in left)


def _index_shards(root: Path) -> tuple[str, ...] | None:
    try:
        index = jsonlib.loads(userfiles.read_text(root / "model.safetensors.index.json", what="index"))
    except (GpunodeError, ValueError, RecursionError):
        return None  # no index (or none that can be read): every top-level safetensors file counts
    return served.index_shards(index)


def _print_text(reports) -> None:
    for r in reports:
        counts = ", ".join(f"{sum(f.severity == s for f in r.findings)} {s}"
                           for s in ("high", "warning", "info") if any(f.severity == s for f in r.findings))
        print(f"{r.source}: " + (f"{len(r.findings)} finding(s) ({counts})" if r.findings else "no findings")
              + ("" if r.complete else " [a fragment: lxc.* lines only]"))
        for f in r.findings:
            where = f"line {f.line}" if f.line else "absent"
            print(f"  {where:<9} {f.severity:<7} {f.id}: {f.message}")
            if f.text is not None:
                print(f"            | {f.text}")
            print(f"            risk: {f.risk}")
            print(f"            fix:  {f.fix}")
        for s in r.skipped:
            print(f"  skipped   {s['check']}: {s['why']}")


@task(iterable=["config"], help=HELP)
def audit(c, config=None, host=None, ct=None, json=False, model_size_gib=None, model_dir=None, servers=None,
          model_source=None, inventory=None):
    """Audit container configs for GPU inference: each finding with its line, risk and fix; exit 1 when any."""
    from gpunode.pve import audit as checks
    from gpunode.pve import lxcconf

    if bool(config) == bool(host):
        raise InventoryError("give --config FILE (repeatable) or --host H [--ct N]",
                             hint="e.g. inv audit --config /etc/pve/lxc/200.conf, or inv audit --host kpro6 --ct 200")
    if ct and not host:
        raise InventoryError("--ct needs --host", hint="e.g. inv audit --host kpro6 --ct 200")
    if model_size_gib and model_dir:
        raise InventoryError("give --model-size-gib or --model-dir, not both", hint="--model-dir sums its files")
    options = checks.Options(
        model_bytes=parse_gib(model_size_gib) if model_size_gib else folder_bytes(model_dir) if model_dir else None,
        servers=parse_int(servers or 1, "--servers", 1, 64, "servers in the container, e.g. --servers 2"),
        model_source=model_source or None)
    # Every config is read and checked before anything is printed: bad input leaves no half report.
    confs: list[tuple[lxcconf.LxcConf, checks.Options]] = []
    if config:
        confs = [(lxcconf.read_file(path), options) for path in config]
    else:
        confs = _from_host(host, ct, inventory, options)
    reports = [checks.audit(conf, opts) for conf, opts in confs]
    if json:
        print(jsonlib.dumps(checks.document(reports), indent=2))
    else:
        _print_text(reports)
    if any(r.failing for r in reports):
        raise Exit(code=1)


def _from_host(host, ct, inventory, options):
    import dataclasses

    from gpunode.cli.session import Session
    from gpunode.pve import lxcconf

    inv = load_inventory(inventory)
    h = inv.host(host)
    vmids = [parse_int(ct, "--ct", 100, 999_999_999, VMID_HINT)] if ct else sorted(h.containers)
    if not vmids:
        raise InventoryError(f"host {host} lists no containers in {inv.source}", hint="pass --ct N")
    out = []
    with Session() as session:
        transport = session.host_transport(h)
        for vmid in vmids:
            # The target's own model_source (inventory layers), when the container is listed.
            source = inv.target(host, vmid if vmid in h.containers else None).vars.get("model_source")
            result = transport.run([h.pct_path, "config", str(vmid)], what=f"pct config {vmid}").check(
                f"pct config {vmid}")
            opts = options if options.model_source else dataclasses.replace(options, model_source=source)
            out.append((lxcconf.parse_text(result.stdout, f"{h.name}/{vmid}"), opts))
    return out


ns = audit
