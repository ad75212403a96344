"""--limit: Ansible's host patterns over gpunode's targets.

    --limit kpro6                 every target of host kpro6 (its containers, or the host itself)
    --limit 'kpro*:!kpro6/202'    hosts matching kpro*, without container 202 of kpro6
    --limit 'gpu:&blackwell'      targets in both groups
    --limit '~kpro[0-9]+/20[01]'  a regular expression (matched from the start, as Ansible does)
    --limit @retry.txt            the names in a file, one per line

A name is a target (host/vmid, or a plain host), a host or a group; `*` and `?` are shell
wildcards, and `all` is every target. Parts are separated by `,` (or by `:` when the pattern has no
comma) and evaluated as Ansible does: the plain parts are joined, then `&` parts intersect, then `!`
parts are taken away; a pattern of exclusions only starts from every target. A part that names
nothing is an error, not a warning: a typo in an exclusion would otherwise provision what it meant
to spare.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Sequence
from pathlib import Path

from gpunode.errors import InventoryError

Key = tuple[str, int | None]  # (host, vmid or None for a plain host)


def name_of(key: Key) -> str:
    return f"{key[0]}/{key[1]}" if key[1] is not None else key[0]


def parts(pattern: str) -> list[str]:
    text = pattern.strip()
    if text.startswith("@"):
        from gpunode import userfiles

        path = Path(text[1:]).expanduser()
        if not path.exists():  # a FIFO or a folder is refused by the reader, by name
            raise InventoryError(f"--limit {text}: {userfiles.missing(path, 'no such file')}",
                                 hint="give a file of target names, one per line")
        lines = userfiles.read_text(path, what="--limit file").splitlines()
        return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    items = text.split(",") if "," in text else text.split(":")
    return [p.strip() for p in items if p.strip()]


def select(pattern: str, keys: Sequence[Key], groups: dict[str, list[str]]) -> list[Key]:
    """The keys (in their order) that the pattern selects; `groups` maps group -> host names."""
    items = parts(pattern)
    if not items:
        raise InventoryError(f"--limit {pattern!r} names nothing", hint="e.g. --limit 'kpro*:!kpro6/202'")
    plain = [p for p in items if p[0] not in "!&"]
    chosen: set[Key] = set()
    for item in plain or ["all"]:
        chosen |= _matches(item, keys, groups)
    for item in items:
        if item.startswith("&"):
            chosen &= _matches(item[1:], keys, groups)
    for item in items:
        if item.startswith("!"):
            chosen -= _matches(item[1:], keys, groups)
    return [k for k in keys if k in chosen]


def _matches(item: str, keys: Sequence[Key], groups: dict[str, list[str]]) -> set[Key]:
    if item in ("all", "*"):
        return set(keys)
    if item.startswith("~"):
        try:
            rx = re.compile(item[1:])
        except re.error as exc:
            raise InventoryError(f"--limit {item!r} is not a regular expression: {exc}",
                                 hint="write it after ~ as Python's re reads it, e.g. '~kpro[0-9]+'") from None

        def hit(name: str) -> bool:
            return rx.match(name) is not None
    else:
        def hit(name: str) -> bool:
            return fnmatch.fnmatchcase(name, item)
    hosts = {h for h, _ in keys}
    picked_hosts = {h for h in hosts if hit(h)}
    for group, members in groups.items():
        if hit(group):
            picked_hosts |= set(members)
    out = {k for k in keys if k[0] in picked_hosts or hit(name_of(k))}
    if not out:
        known = [*sorted(groups), *sorted(hosts), *(name_of(k) for k in keys)]
        from gpunode import lookalike

        close = difflib.get_close_matches(item.lstrip("~"), known, n=1)
        raise InventoryError(f"--limit: {item!r} matches none of the targets to choose from "
                             f"({', '.join(name_of(k) for k in keys[:8])}{', ...' if len(keys) > 8 else ''})",
                             hint=lookalike.hint(item, known) or (f"did you mean {close[0]!r}?" if close else
                                                                  "names are host, host/vmid or a group; * and ? "
                                                                  "are wildcards"))
    return out
