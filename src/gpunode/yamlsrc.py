"""YAML loading that remembers where each key came from (file and line),
so that inventory and knowledge-base errors can point at the exact spot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from gpunode import userfiles
from gpunode.errors import InventoryError, preview


class Located(dict):
    """A mapping that knows the file and the line of each of its keys."""

    file: str = "?"
    line: int = 0
    key_lines: dict[Any, int]

    key_files: dict[Any, str] | None = None  # set when keys come from several files (a vars folder)

    def where(self, key: Any = None) -> str:
        line = self.key_lines.get(key, self.line) if key is not None else self.line
        file = (self.key_files or {}).get(key, self.file)
        return f"{file}:{line}"


# libyaml's parser (PyYAML's C extension, in its manylinux wheels) reads the knowledge base ~8x faster than
# the pure-Python one, with the same nodes and marks; the constructors below stay Python either way.
class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> Located:
    # `<<: *base` (a merge key) puts base's pairs ahead of the mapping's own; a key of its own then
    # overrides the merged one, as YAML says, which is the point of a merge key (issue 41: that was
    # refused as a key that "appears twice"). Two own keys of one name are still refused.
    own = {id(k) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"}
    loader.flatten_mapping(node)
    said: set[Any] = set()  # keys the mapping itself wrote
    out = Located()
    out.file = loader.name
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:  # `? [a, b]` or `{a: 1}: x` (issue 41: a TypeError traceback)
            kind = "list" if isinstance(key, list) else "mapping"
            raise InventoryError(
                f"{loader.name}:{key_node.start_mark.line + 1}: a key is a {kind} ({preview(key, 40)}); a key must "
                "be a name or a number",
                hint="write the key as plain text; quote it if it starts with [ or {") from None
        if key in said and id(key_node) in own:
            raise InventoryError(
                f"{loader.name}:{key_node.start_mark.line + 1}: key {key!r} appears twice",
                hint="remove one of them; YAML would silently keep only the last",
            )
        if id(key_node) in own:
            said.add(key)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

#: The loader for the tables gpunode ships (compat/, facts/data/, role defaults): plain values, no
#: file-and-line marks. libyaml's where PyYAML was built with it (~10x faster than the pure-Python
#: loader on compat/derived/sglang-registry.yml), else the pure one: the same values either way.
TableLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def table(text: str) -> Any:
    """One shipped data table's values, as yaml.safe_load gives them. Not for what a user wrote:
    that goes through load(), with its marks, its duplicate-key check and its size guards."""
    return yaml.load(text, Loader=TableLoader)  # noqa: S506 -- a safe loader, C or Python

VAULT_HINT = ("let Ansible decrypt it: `ansible-inventory -i INVENTORY --list --vault-password-file FILE > "
              "inventory.json`, then pass -i inventory.json (read it from a file only you can read); or give "
              "the secret in the environment instead")


def _vault_value(loader: _Loader, node: yaml.Node) -> Any:
    """Ansible Vault's inline form (`key: !vault |`): gpunode holds no vault password to open it."""
    raise InventoryError(f"{loader.name}:{node.start_mark.line + 1}: an Ansible Vault value (!vault), which "
                         "gpunode cannot decrypt", hint=VAULT_HINT)


_Loader.add_constructor("!vault", _vault_value)


class Unsafe(str):
    """A value tagged `!unsafe` (Ansible's tag for text that is never templated): braces meant as written."""


def _unsafe_value(loader: _Loader, node: yaml.Node) -> Unsafe:
    if not isinstance(node, yaml.ScalarNode):
        raise InventoryError(f"{loader.name}:{node.start_mark.line + 1}: !unsafe tags one text value, not a list or "
                             "a mapping", hint="tag each text inside it: [!unsafe '{{ a }}', ...]")
    return Unsafe(loader.construct_scalar(node))


_Loader.add_constructor("!unsafe", _unsafe_value)

# What Jinja would take for an expression, a statement or a comment in an Ansible value.
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)


def refuse_jinja(layer: Any, fallback: str = "?", tag_hint: bool = True) -> None:
    """Refuse a variable whose value (or any text inside it) holds a Jinja template (issue 41): Ansible
    would evaluate `{{ lookup('pipe', ...) }}` or `{{ other_var }}`; gpunode never evaluates a value
    (no code runs from an inventory), so it would pass the braces on as written, which is not what
    was meant. Text meant literally is tagged !unsafe, as Ansible's own marker for it."""
    from gpunode.secrets import is_secret_name

    stack: list[tuple[Any, str, str]] = [(value, str(key), where(layer, key, fallback)) for key, value in
                                         (layer.items() if isinstance(layer, dict) else ())]
    while stack:
        value, label, at = stack.pop()
        if isinstance(value, dict):
            stack += [(v, f"{label}.{k}", where(value, k, at)) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, f"{label}[{i}]", at) for i, v in enumerate(value)]
        elif isinstance(value, str) and not isinstance(value, Unsafe) and (m := _JINJA.search(value)):
            shown = "" if any(is_secret_name(part) for part in re.split(r"[.\[]", label)) else \
                f" ({preview(m.group(0), 50)})"
            literal = (f"tag it `{label.partition('.')[0].partition('[')[0]}: !unsafe '...'` (Ansible's marker for "
                       "text never templated)") if tag_hint else "set it in a YAML file, tagged !unsafe"
            raise InventoryError(f"{at}: {label} holds a Jinja template{shown}, which gpunode does not evaluate: "
                                 "values are used as written, so the braces would reach the target as they are",
                                 hint=f"write the value out in full; if the braces are meant as text, {literal}")


# An inventory nests a handful of levels and expands to a few thousand values (the knowledge base,
# the largest file read here, to tens of thousands). A 1 KB "billion laughs" file of aliases expands
# to 10^9, and 900 nested brackets overflow the recursive constructor: both are refused before
# anything is constructed.
MAX_DEPTH = 64
MAX_NODES = 1_000_000
# What a user hands us (an inventory, a vars file, gpunode.yaml, a role's defaults): 32,000 hosts with
# an address, a container and a variable each fit in 4 MiB, which takes seconds to read. A larger file
# (issue 41: 22 MB took 51 s and 1.3 GB before a wrong message about aliases) is refused unread.
USER_MAX_BYTES = 4 << 20
TOO_LARGE = "split it (group_vars/ and host_vars/ files are read one by one), or check that it is the file you meant"


def load(path: Path, limit: int = USER_MAX_BYTES) -> Any:
    """Parse one YAML file; syntax errors become InventoryError naming file and line."""
    return load_text(userfiles.read_text(path, what="YAML file", limit=limit, hint_large=TOO_LARGE), str(path))


def load_text(text: str, name: str, *, syntax: bool = True) -> Any:
    """Parse YAML text that came from `name` (a file, or `--set key` for a value); syntax=False
    leaves a syntax error to the caller (a --set value may be a secret: its message must not quote it)."""
    if text.lstrip().startswith("$ANSIBLE_VAULT;"):  # a file `ansible-vault encrypt` wrote
        raise InventoryError(f"{name}:1: an Ansible Vault file, which gpunode cannot decrypt", hint=VAULT_HINT)
    loader = _Loader(text)
    loader.name = name
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, name)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        if not syntax:
            raise
        mark = exc.problem_mark
        line = mark.line + 1 if mark else "?"
        raise InventoryError(f"{name}:{line}: YAML syntax error: {exc.problem}",
                             hint="fix the indentation or quoting at that line") from None
    except InventoryError:
        raise
    except ValueError as exc:  # int() of 5000 digits: Python refuses to convert it
        raise InventoryError(f"{name}: YAML holds a value that cannot be read ({str(exc)[:80]})",
                             hint="write numbers with at most a few dozen digits; quote text") from None
    except RecursionError:
        raise InventoryError(f"{name}: YAML nested too deeply to read",
                             hint=f"nest at most {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def _check_size(root: yaml.Node, name: str) -> None:
    """Refuse a document nested deeper than MAX_DEPTH or expanding (an alias counted each time
    it is used) to more than MAX_NODES values. Iterative, and each node is sized once."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    aliased = False  # a node reached a second time: the document uses an alias
    while stack:
        node, depth, done = stack.pop()
        children = _children(node)
        if done:
            size[id(node)] = total = 1 + sum(size[id(c)] for c in children)
            if total > MAX_NODES and aliased:
                raise InventoryError(f"{name}:{node.start_mark.line + 1}: YAML expands to more than {MAX_NODES} "
                                     "values (each use of an alias such as *a repeats what it names)",
                                     hint="write the values out, or nest fewer aliases")
            if total > MAX_NODES:
                raise InventoryError(f"{name}:{node.start_mark.line + 1}: YAML holds more than {MAX_NODES} values",
                                     hint=TOO_LARGE)
            continue
        if id(node) in size:
            aliased = True
            continue
        if depth > MAX_DEPTH:
            raise InventoryError(f"{name}:{node.start_mark.line + 1}: YAML nested more than {MAX_DEPTH} levels deep",
                                 hint="flatten it; no gpunode setting nests that deep")
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def where(node: Any, key: Any = None, fallback: str = "?") -> str:
    return node.where(key) if isinstance(node, Located) else fallback


def file_of(node: Any, key: Any, fallback: str = "?") -> str:
    """The file that set key in a mapping read by load() (or joined by overlay())."""
    if not isinstance(node, Located):
        return fallback
    return (node.key_files or {}).get(key, node.file)


def overlay(*layers: Any, values: dict[Any, Any] | None = None) -> Located:
    """Mappings layered, later wins (or `values`, when the caller merges nested mappings itself),
    each key keeping the file and line of the layer that set it last: variables from hosts.yml and
    group_vars/g.yml, or from a group and its host, joined without losing where each came from."""
    out = Located()
    first = next((layer for layer in layers if isinstance(layer, Located)), None)
    out.file, out.line = (first.file, first.line) if first is not None else ("?", 0)
    out.key_lines, out.key_files = {}, {}
    out.update(values if values is not None else {k: v for layer in layers for k, v in layer.items()})
    for layer in layers:
        for key in layer:
            out.key_lines[key] = line_of(layer, key)
            out.key_files[key] = file_of(layer, key, out.file)
    return out


def line_of(node: Any, key: Any) -> int:
    """The line of key in a mapping read by load(); 0 for a mapping made in code."""
    return node.key_lines.get(key, 0) if isinstance(node, Located) else 0
