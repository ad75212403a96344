"""The winner of `inv tune`, written into the inventory as text (inventory/edit.py's way: every other
line and comment stays as it was), with the measured figures and the date beside each value.

Where: a container's own `vars:` in hosts.yml (a host's host_vars would reach its other containers, and
the container's vars would win over them anyway); a plain host's host_vars/<host>.yml; a group's
group_vars/<group>.yml. The edit goes through a temp file that must load and give the target exactly
the winner's values before it replaces the original (durable.write_atomic), under the file's lock.
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from gpunode import durable, inventory, userfiles
from gpunode.errors import InventoryError
from gpunode.inventory.core import VAR_SUFFIXES
from gpunode.inventory.edit import KEY_LINE, block_end, child_indent, content_line, find_key, indent_of


def scalar(value: Any) -> str:
    """One YAML scalar as it reads back (a string "false" stays a string: quoted)."""
    return yaml.safe_dump([value], default_flow_style=True, width=10_000).strip()[1:-1]


def comment(row: Any, doc: dict[str, Any]) -> str:
    job = doc.get("job") or {}
    planned = next((r for r in doc.get("candidates", []) if r["n"] == 0), None)
    was = (f" (planned flags: {planned['output_tok_s']:.1f})" if planned and planned.get("output_tok_s") is not None
           and planned["n"] != row.n else "")
    mem = f", memory {row.memory_bytes / 2**30:.2f} GiB" if row.memory_bytes else ""
    ready = f", ready in {row.start_to_ready_s} s" if row.start_to_ready_s is not None else ""
    shape = (f"in {job.get('input_len')}/out {job.get('output_len')}" if job.get("input_len") is not None
             else f"prompts {job.get('prompts')}")
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    return (f"inv tune {day}: {row.output_tok_s:.1f} tok/s{was} at concurrency {job.get('concurrency')}, "
            f"{shape}{ready}{mem}")


def _set_keys(lines: list[str], start: int, end: int, indent: int, values: dict[str, str], note: str) -> None:
    """Each key at `indent` inside lines[start:end] set to its text (replacing the old value, however many
    lines it took), or added at the end of the block."""
    for key, text in values.items():
        new = f"{' ' * indent}{key}: {text}  # {note}"
        i = find_key(lines, start, end, key, indent)
        if i is None:
            lines.insert(end, new)
            end += 1
        else:
            j = block_end(lines, i, indent)
            lines[i:j] = [new]
            end -= j - i - 1


def vars_file_text(text: str, source: str, values: dict[str, str], note: str) -> str:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if content_line(line) and line.strip() != "---":
            if line.lstrip().startswith(("{", "[")) or not KEY_LINE.match(line) or indent_of(line) != 0:
                raise InventoryError(f"{source}:{i + 1}: not a block mapping of variables, so inv tune does not "
                                     "edit it", hint="write the values by hand (they are printed above)")
            break
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    _set_keys(lines, 0, end, 0, values, note)
    return "\n".join(lines) + "\n"


def container_text(text: str, source: str, host: str, vmid: int, values: dict[str, str], note: str) -> str:
    lines = text.splitlines()
    by_hand = f"set them under hosts.{host}.containers.{vmid}.vars in {source} by hand"

    def block(lo: int, hi: int, key: str, parent: int) -> int:
        i = find_key(lines, lo, hi, key, child_indent(lines, lo - 1, hi, parent) if lo > 0 else 0)
        if i is None:
            raise InventoryError(f"{source}: no block `{key}:` where inv tune writes the winner", hint=by_hand)
        return i

    top = block(0, len(lines), "hosts", -1)
    h = block(top + 1, block_end(lines, top, 0), host, 0)
    h_end = block_end(lines, h, indent_of(lines[h]))
    c = block(h + 1, h_end, "containers", indent_of(lines[h]))
    c_end = block_end(lines, c, indent_of(lines[c]))
    k = block(c + 1, c_end, str(vmid), indent_of(lines[c]))
    k_indent = indent_of(lines[k])
    rest = KEY_LINE.match(lines[k])["rest"].split("#")[0].strip()  # type: ignore[index]
    if rest == "{}":
        lines[k] = lines[k].replace("{}", "", 1).rstrip()
    elif rest:
        raise InventoryError(f"{source}:{k + 1}: container {vmid} is written in flow style ({rest[:60]})", hint=by_hand)
    k_end = block_end(lines, k, k_indent)
    inner = child_indent(lines, k, k_end, k_indent)
    v = find_key(lines, k + 1, k_end, "vars", inner)
    if v is None:
        lines.insert(k_end, f"{' ' * inner}vars:")
        v, v_end, v_indent = k_end, k_end + 1, inner + 2
    else:
        vrest = KEY_LINE.match(lines[v])["rest"].split("#")[0].strip()  # type: ignore[index]
        if vrest == "{}":
            lines[v] = lines[v].replace("{}", "", 1).rstrip()
        elif vrest:
            raise InventoryError(f"{source}:{v + 1}: the vars of container {vmid} are written in flow style",
                                 hint=by_hand)
        v_end = block_end(lines, v, inner)
        v_indent = child_indent(lines, v, v_end, inner)
    _set_keys(lines, v + 1, v_end, v_indent, values, note)
    return "\n".join(lines) + "\n"


def _vars_path(folder: Path, kind: str, name: str) -> Path:
    for suffix in VAR_SUFFIXES:
        if (folder / kind / f"{name}{suffix}").exists():
            return folder / kind / f"{name}{suffix}"
    return folder / kind / f"{name}.yml"


def winner(inv_path: Path, host: str | None, vmid: int | None, group: str | None, row: Any,
           doc: dict[str, Any]) -> Path | None:
    """Write row.overrides where the target (or group) reads them; the file written, or None when the
    planned flags won (nothing to change)."""
    if not row.overrides:
        return None
    values = {k: scalar(v) for k, v in row.overrides.items()}
    note = comment(row, doc)
    loaded = inventory.load(inv_path)
    folder = loaded.source.parent
    if group:
        path, edit = _vars_path(folder, "group_vars", group), None
    elif vmid is None:
        path, edit = _vars_path(folder, "host_vars", str(host)), None
    else:
        path = loaded.source
        edit = (str(host), vmid)
    real = durable.real(path)
    with durable.locked(real) if real.exists() else _nothing() as held:
        if held is False:
            raise InventoryError(f"another gpunode is editing {path} right now", hint="run inv tune again later")
        text = userfiles.read_text(real, what="inventory") if real.exists() else ""
        new = (container_text(text, str(path), edit[0], edit[1], values, note) if edit
               else vars_file_text(text, str(path), values, note))
        _replace_checked(real, new, inv_path, host, vmid, group, row.overrides)
    return path


class _nothing:
    def __enter__(self) -> bool:
        return True

    def __exit__(self, *exc: object) -> None:
        return None


def _replace_checked(real: Path, new: str, inv_path: Path, host: str | None, vmid: int | None, group: str | None,
                     want: dict[str, Any]) -> None:
    real.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    old = real.read_bytes() if real.exists() else None
    try:
        with os.fdopen(fd, "w") as f:
            f.write(new)
        os.replace(tmp, real)  # in place, so that the inventory loads it where it belongs; put back below if wrong
        try:
            again = inventory.load(inv_path)
            targets = (again.group_targets(group) if group else [again.target(str(host), vmid)])
            wrong = [f"{t.name}: {k}={t.vars.get(k)!r}" for t in targets for k, v in want.items() if t.vars.get(k) != v]
        except InventoryError as exc:
            wrong = [exc.message]
        if wrong:
            raise InventoryError(f"writing the winner to {real} did not read back as written "
                                 f"({'; '.join(wrong)[:300]})",
                                 hint="a later layer (a container's vars, --set) may set it too; the file is unchanged")
        durable.fsync_dir(real.parent)
    except BaseException:
        if old is None:
            real.unlink(missing_ok=True)
        else:
            durable.write_atomic(real, old)
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
