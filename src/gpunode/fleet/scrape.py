"""Prometheus file_sd targets for what gpunode installed (`inv prometheus-targets`, docs/prometheus.md).

One entry per metrics endpoint: each server (its API port serves /metrics: vLLM by default,
SGLang with --enable-metrics, which every SGLang plan sets), the target's router and a fleet
router (their --prometheus-host/--prometheus-port). What is listed comes from the units
installed on the target (`inv status`'s one round trip, fleet/gather.py), not from the
inventory's current plan: the file names what runs, as status does.

The address is the one the endpoint listens on, as a Prometheus reaches it: a loopback
address stays loopback (only a Prometheus on that node reaches it), a wildcard (0.0.0.0, ::)
becomes the target's own address (`metrics_address`, else `fleet_address`, else a plain SSH
host's address), any other address stays as it is; `metrics_address` also replaces an
address that is not loopback, for a Prometheus that reaches the node by another name.

Labels are prefixed `gpunode_`: a target label of the same name as a series' own label
(vLLM's series carry `engine` and `model_name`) would rename the series' label to exported_*.
Everything here is pure: targets and parsed reports in, JSON text out.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from gpunode.errors import InventoryError
from gpunode.fleet.status import Report, Unit
from gpunode.listen import flag_value

# sglang-router 0.3.2 (router_args.py): --prometheus-port's help says "default: 29000"; the
# host's default (None) is the router's own 0.0.0.0.
ROUTER_METRICS_PORT = 29000
ROUTER_METRICS_HOST = "0.0.0.0"
KINDS = {"server": "server", "router": "router", "fleet-router": "fleet_router"}
WILDCARD = ("0.0.0.0", "::", "")


def _loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _own_address(target: Any, unit: Unit) -> str:
    """Where a Prometheus elsewhere reaches this target; refused when the inventory does not say."""
    for name in ("metrics_address", "fleet_address"):
        if target.vars.get(name):
            return str(target.vars[name])
    if target.container is None:
        return str(target.host.address)
    raise InventoryError(f"{target.name}: {unit.name} listens on every address, but the inventory has no address "
                         "a Prometheus reaches this container at", target=target.name,
                         hint=f"set metrics_address: <its address> on {target.name} (or -e metrics_address=...)")


def reach(target: Any, unit: Unit, listen: str) -> str:
    """The address a Prometheus scrapes an endpoint listening on `listen` at."""
    if _loopback(listen):
        return listen
    if listen in WILDCARD:
        return _own_address(target, unit)
    return str(target.vars.get("metrics_address") or listen)


def _metrics_at(unit: Unit) -> tuple[str, int]:
    """Where the unit serves /metrics, from its command line: (listen address, port)."""
    if unit.kind == "server":
        return (flag_value(unit.argv, "--host") or "127.0.0.1"), unit.port or 0
    port = flag_value(unit.argv, "--prometheus-port")
    return (flag_value(unit.argv, "--prometheus-host") or ROUTER_METRICS_HOST,
            int(port) if port and port.isdigit() else ROUTER_METRICS_PORT)


def groups(target: Any, report: Report) -> list[dict[str, Any]]:
    """The file_sd entries of one target: one per server, router and fleet router it runs."""
    common = {"gpunode_target": target.name, "gpunode_host": target.host.name}
    if target.container is not None:
        common["gpunode_ct"] = str(target.container.vmid)
    models = sorted({u.model for u in report.units if u.kind == "server" and u.model})
    out = []
    for unit in report.units:
        if unit.kind not in KINDS or (unit.kind == "server" and not unit.port):
            continue
        listen, port = _metrics_at(unit)
        address = reach(target, unit, listen)
        host = f"[{address}]" if ":" in address else address
        labels = {**common, "gpunode_kind": KINDS[unit.kind], "gpunode_server": unit.name}
        if unit.kind == "server":
            labels.update(gpunode_engine=unit.engine, gpunode_pinset=unit.pinset, gpunode_model=unit.model,
                          gpunode_gpus=",".join(str(g) for g in unit.gpus))
        elif len(models) == 1:  # a router serves the model of the servers behind it
            labels["gpunode_model"] = models[0]
        out.append({"targets": [f"{host}:{port}"], "labels": {k: v for k, v in labels.items() if v}})
    return out


def on_loopback(entries: list[dict[str, Any]]) -> list[str]:
    """The targets whose endpoints only a Prometheus on that node reaches."""
    names = []
    for e in entries:
        address = e["targets"][0].rsplit(":", 1)[0].strip("[]")
        if _loopback(address) and e["labels"]["gpunode_target"] not in names:
            names.append(e["labels"]["gpunode_target"])
    return names


def carried(old_text: str | None, names: list[str], *, others: bool = False) -> list[dict[str, Any]]:
    """The entries of these targets in the file as it was (others=True: of every other target).

    A target that did not answer stays listed (Prometheus then reports it down) instead of
    leaving the file, and its alerts, unnoticed; `inv provision` keeps the targets it did not run on."""
    if not old_text:
        return []
    try:
        old = json.loads(old_text)
    except ValueError:
        return []
    return [e for e in old if isinstance(e, dict) and isinstance(e.get("labels"), dict)
            and (e["labels"].get("gpunode_target") in names) != others] if isinstance(old, list) else []


def document(entries: list[dict[str, Any]]) -> str:
    """The file_sd JSON text: a list of {"targets": [...], "labels": {...}}."""
    return json.dumps(entries, indent=2) + "\n"
