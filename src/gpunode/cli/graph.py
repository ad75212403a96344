"""gpunode inventory: the inventory as `ansible-inventory --graph` draws it, with each host's
containers (the targets `-l` chooses among) under it."""

from __future__ import annotations

from gpunode.cli.common import load_inventory, task

HELP = {
    "inventory": "inventory folder or file (default: $GPUNODE_INVENTORY, gpunode.yaml's inventory:, ./inventory)",
    "graph": "draw the groups, hosts and containers (what this task prints; accepted as ansible-inventory's)",
    "group": "only this group, as `ansible-inventory --graph GROUP`",
}


@task(name="inventory", help=HELP)
def graph(c, inventory=None, graph=False, group=None):
    """The inventory's groups, hosts and containers as a tree, as `ansible-inventory --graph` draws it."""
    from gpunode.errors import InventoryError, printable
    from gpunode.inventory.names import suggest

    inv = load_inventory(inventory)
    grouped = {h for g, members in inv.groups.items() if g != "all" for h in members}
    groups = {g: m for g, m in inv.groups.items() if g != "all"}
    ungrouped = [h for h in inv.hosts if h not in grouped]
    if ungrouped:
        groups.setdefault("ungrouped", ungrouped)
    if group not in (None, "", "all") and group not in groups:
        raise InventoryError(f"no group {group!r} in {inv.source}",
                             hint=suggest(str(group), groups) or f"groups: {', '.join(sorted(groups)) or 'none'}")
    lines: list[str] = []

    def host(name: str, indent: str) -> None:
        lines.append(f"{indent}|--{name}")
        for vmid in inv.hosts[name].containers:
            lines.append(f"{indent}|  |--{name}/{vmid}")

    if group in (None, "", "all"):
        lines.append("@all:")
        for g in sorted(groups):
            lines.append(f"  |--@{g}:")
            for name in groups[g]:
                host(name, "  |  ")
    else:
        lines.append(f"@{group}:")
        for name in groups[group]:
            host(name, "  ")
    print(printable("\n".join(lines)))


ns = graph
