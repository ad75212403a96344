"""Adding a container to an inventory file as text, so that its comments and layout stay.

The edit is checked by loading the result with gpunode.inventory.load before it replaces
the file (temp file in the same folder, then rename), so a bad edit never lands.
Only gpunode's own format (top-level `hosts:` with block mappings) is edited; anything
else is refused with a hint to add the lines by hand.

By hand, not ruamel.yaml's round trip: that keeps comments but re-emits the whole file (its
indentation, quoting and flow style), where inserting lines leaves every other byte as it was.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from gpunode import durable, inventory, userfiles
from gpunode.errors import InventoryError

KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[^\s#:][^:#]*?)\s*:(?P<rest>.*)$")


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def content_line(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith("#")


def block_end(lines: list[str], start: int, indent: int) -> int:
    """Index after the last line that belongs to the block opened at `start` (deeper than indent)."""
    last = start
    for i in range(start + 1, len(lines)):
        if content_line(lines[i]):
            if indent_of(lines[i]) <= indent:
                break
            last = i
    return last + 1


def find_key(lines: list[str], lo: int, hi: int, key: str, indent: int | None) -> int | None:
    for i in range(lo, hi):
        m = KEY_LINE.match(lines[i])
        if m and content_line(lines[i]) and m["key"].strip("'\"") == key and (
                indent is None or len(m["indent"]) == indent):
            return i
    return None


def child_indent(lines: list[str], start: int, end: int, parent: int) -> int:
    for i in range(start + 1, end):
        if content_line(lines[i]) and indent_of(lines[i]) > parent:
            return indent_of(lines[i])
    return parent + 2


def add_container(text: str, source: str, host: str, vmid: int, gpus: list[int] | None) -> str | None:
    """The inventory text with container `vmid` under `host`, or None when it is already listed."""
    lines = text.splitlines()
    refuse = f"add `{vmid}:` under hosts.{host}.containers in {source} by hand"
    top = find_key(lines, 0, len(lines), "hosts", 0)
    if top is None or KEY_LINE.match(lines[top])["rest"].split("#")[0].strip():  # type: ignore[index]
        raise InventoryError(f"{source}: no block `hosts:` mapping at the top level to add container {vmid} to",
                             hint=refuse)
    hosts_end = block_end(lines, top, 0)
    h = find_key(lines, top + 1, hosts_end, host, child_indent(lines, top, hosts_end, 0))
    if h is None:
        raise InventoryError(f"{source}: host {host} is not a block under `hosts:`", hint=refuse)
    h_indent = indent_of(lines[h])
    if KEY_LINE.match(lines[h])["rest"].split("#")[0].strip():  # type: ignore[index]
        raise InventoryError(f"{source}:{h + 1}: host {host} is written in flow style", hint=refuse)
    h_end = block_end(lines, h, h_indent)
    c_indent = child_indent(lines, h, h_end, h_indent)
    c = find_key(lines, h + 1, h_end, "containers", c_indent)
    tag = "  # added by inv onboard"

    def entry(k: int) -> list[str]:
        if gpus:
            return [f"{' ' * k}{vmid}:{tag}", f"{' ' * (k + 2)}gpus: [{', '.join(str(g) for g in gpus)}]"]
        return [f"{' ' * k}{vmid}: {{}}{tag}"]

    if c is None:
        new = [f"{' ' * c_indent}containers:", *entry(c_indent + 2)]
        lines[h_end:h_end] = new
    else:
        rest = KEY_LINE.match(lines[c])["rest"].split("#")[0].strip()  # type: ignore[index]
        if rest not in ("", "{}"):
            raise InventoryError(f"{source}:{c + 1}: containers of {host} are written in flow style ({rest})",
                                 hint=refuse)
        c_end = block_end(lines, c, c_indent)
        k = child_indent(lines, c, c_end, c_indent)
        if find_key(lines, c + 1, c_end, str(vmid), k) is not None:
            return None
        if rest == "{}":
            lines[c] = lines[c].replace("{}", "", 1).rstrip()
        lines[c_end:c_end] = entry(k)
    return "\n".join(lines) + "\n"


def add_container_file(path: Path, host: str, vmid: int, gpus: list[int] | None) -> bool:
    """Edit the inventory file in place (atomically, validated). True when it changed.

    A symlinked inventory stays a symlink (the file it points to is edited). A lock on
    that file covers read to replace, so two editors at once cannot lose one's container:
    the second is refused rather than queued (onboard has already changed the host).
    """
    real = durable.real(path)
    with durable.locked(real) as held:
        if not held:
            raise InventoryError(f"another gpunode is editing {path} right now (it holds a lock on the file)",
                                 hint=f"re-run when it is done, or add `{vmid}:` under hosts.{host}.containers by hand")
        text = userfiles.read_text(real, what="inventory")
        new = add_container(text, str(path), host, vmid, gpus)
        if new is None:
            return False
        fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".yml", dir=real.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(new)
                f.flush()
                os.fchmod(f.fileno(), real.stat().st_mode & 0o7777)
                os.fsync(f.fileno())
            try:
                loaded = inventory.load(tmp)
            except InventoryError as exc:
                raise InventoryError(f"adding container {vmid} to {path} would break it: {exc.message}",
                                     hint=f"add it by hand; the file is unchanged ({exc.hint})") from None
            ct = loaded.hosts.get(host) and loaded.hosts[host].containers.get(vmid)
            if not ct or (gpus and list(ct.gpus or ()) != list(gpus)):
                raise InventoryError(f"adding container {vmid} to {path} did not read back as written",
                                     hint="add it by hand; the file is unchanged")
            os.replace(tmp, real)
            durable.fsync_dir(real.parent)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return True


def inventory_file(source: Path) -> Path:
    """The file that holds `hosts:` for an inventory path (a folder or a file)."""
    if source.is_dir():
        for name in ("hosts.yml", "hosts.yaml", "inventory.yml"):
            if (source / name).exists():
                return source / name
    return source
