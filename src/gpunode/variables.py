"""The one registry of variables: every name a role, the resolver, the facts probe or onboard
reads, with its type, where it is declared and its default.

It is built from declarations, never from code: each role's roles/<role>/types.yml, and the
same form for the resolver (resolve/types.yml), the facts probe (facts/types.yml) and onboard
(pve/types.yml). A name declared by two readers must have one type in both.

`check(variables, origins, target)` is the one check every task runs (cli/common.py: on --set and
-e @file as they are read, and on each target's variables once they are layered): a name the
registry does not know is refused with "did you mean", and a known one whose value does not fit
its type is refused; both name where the value was set (file:line, --set or a role's defaults).

docs/variables.md is rendered from it by `python -m gpunode.cli.vardoc`.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpunode import searchpath, yamlsrc
from gpunode.errors import InventoryError, preview
from gpunode.secrets import SECRET_HOME, holds_secret, is_secret_name
from gpunode.shell import package_dir
from gpunode.vartypes import MORE, SIMPLE, Bad, checker, describe

# (who reads them, package, file) beside the roles' own types.yml
READERS = (("resolver", "gpunode.resolve", "types.yml"), ("facts", "gpunode.facts", "types.yml"),
           ("onboard", "gpunode.pve", "types.yml"), ("fleet", "gpunode.fleet", "types.yml"),
           ("rollout", "gpunode", "rollout.types.yml"))

# Wider than secrets.is_secret_name on purpose: a misspelled secret (server_api_kye, vault_api_key)
# must still be recognised as one, so that its refusal lists the secrets gpunode passes on.
_SECRETISH = re.compile(r"token|secret|passw|api_?k|apik|vault|credential", re.I)


@dataclass(frozen=True)
class Variable:
    name: str
    type: str
    readers: tuple[str, ...]  # roles by name, then "resolver", "facts", "onboard"
    declared: str             # where its type is written, for messages and the doc


def _read(package: str, *parts: str) -> dict[str, str]:
    # found from gpunode's own folder: files("gpunode.resolve") would import the resolver and its
    # knowledge base (~1 s) into `gpunode status`, which checks the variables and makes no plan
    top, *below = package.split(".")
    resource = package_dir(top).joinpath(*below, *parts)
    return dict(yamlsrc.table(resource.read_text()) or {}) if resource.is_file() else {}


def mapping_file(path: Path) -> dict[str, Any]:
    """A role's defaults.yml or types.yml through the inventory's own reader (issue 41: a 1 KB alias
    bomb hung gpunode, a FIFO was skipped without a word): size, aliases, depth, file type and
    file:line of every error; a file that is not there is empty."""
    if not os.path.lexists(path):
        return {}
    doc = yamlsrc.load(path)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InventoryError(f"{path}: must be a mapping of `name: value` lines, not {type(doc).__name__}",
                             hint="one variable per line, e.g. my_port: 9100")
    for key in doc:
        if key is None or isinstance(key, bool):  # `yes: 1` in defaults.yml was "variable True ... not known"
            shown = {None: "~ (or null)", True: "yes/true/on", False: "no/false/off"}[key]
            raise InventoryError(f"{path}:{yamlsrc.line_of(doc, key)}: {shown} is read by YAML as {key!r}, not a "
                                 "variable name", hint="name a variable with letters, digits and _, e.g. my_port")
    return doc  # as read: each key keeps its line for the errors


def _role_folders(product_only: bool) -> dict[str, Path]:
    """name -> folder of every role on the search path: a user's replaces a shipped one of its name
    (its types.yml then types its variables, the shipped one's none). product_only: the shipped roles alone."""
    out = searchpath.shipped_roles()
    if not product_only:
        out.update(searchpath.user_roles())
    return out


def sources(product_only: bool = False) -> list[tuple[str, str, dict[str, str]]]:
    """(reader, declaration file, {name: type}) for every role on the search path (the shipped ones
    alone for the docs: product_only) and the other readers."""
    shipped = searchpath.shipped_roles()
    out = []
    for role, where in _role_folders(product_only).items():
        path = where / "types.yml"
        out.append((role, f"roles/{role}/types.yml" if shipped.get(role) == where else str(path), mapping_file(path)))
    return out + [(who, f"{package.removeprefix('gpunode.')}/{name}", _read(package, name))
                  for who, package, name in READERS]


_TYPE_NAMES = ("a type is one of " + ", ".join([*SIMPLE, *MORE]) +
               ', "int A..B", "choice a|b", "mapping a|b" (src/gpunode/vartypes.py)')


def build(declared: list[tuple[str, str, dict[str, str]]]) -> dict[str, Variable]:
    out: dict[str, Variable] = {}
    for reader, path, types in declared:
        for name, spec in types.items():
            # A declaration that is no name and type (a user role's types.yml: `x: [1]`, `x:`, `1: path`)
            # was a TypeError or AttributeError, an internal error (issue 41). InventoryError is a
            # ValueError, as a shipped declaration's mistake was before.
            at = yamlsrc.where(types, name, path)
            if not isinstance(name, str) or not name.isidentifier():
                raise InventoryError(f"{at}: {preview(name, 40)} is no variable name",
                                     hint="name a variable with letters, digits and _, e.g. my_port: port")
            if not isinstance(spec, str):
                raise InventoryError(f"{at}: variable {name} has the type {preview(spec, 40)}, which is no type name",
                                     hint=_TYPE_NAMES)
            try:
                checker(spec)  # an unknown type name is a bug of the declaration: fail here, not at a user
            except ValueError:
                raise InventoryError(f"{at}: variable {name} has unknown type {spec!r}", hint=_TYPE_NAMES) from None
            seen = out.get(name)
            if seen is None:
                out[name] = Variable(name, spec, (reader,), path)
            elif seen.type != spec:
                raise InventoryError(f"variable {name} is {seen.type!r} in {seen.declared} but {spec!r} in {path}",
                                     hint="declare it once, or with the same type in both files")
            else:
                out[name] = Variable(name, spec, (*seen.readers, reader), seen.declared)
    return out


def registry() -> dict[str, Variable]:
    """{name: Variable} over every role's types.yml and the other readers' declarations."""
    return _registry(searchpath.current().roles)


@cache
def _registry(_user_roots: tuple) -> dict[str, Variable]:  # keyed on the search path
    return build(sources())


def _unknown(name: Any, where: str, target: str) -> InventoryError:
    known = registry()
    shown = str(name)[:60]
    if _SECRETISH.search(str(name)):
        secrets = [n for n in known if is_secret_name(n)]
        close = difflib.get_close_matches(str(name).lower(), secrets, n=1, cutoff=0.5)
        return InventoryError(f"variable {shown} (from {where}) looks like a secret, but no role reads it: its value "
                              "would be dropped without a word", target=target,
                              hint=(f"did you mean {close[0]}? " if close else "") + f"rename or remove it at {where}; "
                              "the secrets gpunode passes on: " + ", ".join(secrets))
    from gpunode import lookalike

    same_look = lookalike.hint(name, known)
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    return InventoryError(f"variable {shown} (from {where}) is not one gpunode knows: no role, the resolver or the "
                          "facts probe reads it", target=target,
                          hint=(f"{same_look}; " if same_look else f"did you mean {close[0]}? " if close else "")
                          + f"rename or remove it at {where}; every variable is listed in docs/variables.md")


def check(variables: Mapping[Any, Any], origins: Mapping[Any, str] | None = None, target: str = "",
          default_where: str = "the inventory") -> None:
    """Refuse the first unknown name, then the first value that does not fit its type."""
    origins = origins or {}
    known = registry()
    for name in variables:
        if name not in known:
            raise _unknown(name, origins.get(name) or default_where, target)
    for name, value in variables.items():
        if value is None:
            continue
        spec = known[name].type
        try:
            checker(spec)(value)
        except Bad as exc:
            where = origins.get(name) or default_where
            # Arguments may carry an API key (--api-key ...), a mapping a secret (pve_api's token_secret):
            # name them, do not print them.
            shown = f"{name}=..." if spec == "args" or spec.startswith("mapping") or is_secret_name(name) \
                else f"{name}={preview(value)}"
            raise InventoryError(f"variable {shown} (from {where}) {exc}; expected {describe(spec)}",
                                 target=target, hint=f"fix {name} at {where}") from None
    for name, value in variables.items():
        # extra_args has its own refusal (secrets.refuse_in_args), naming the flag
        if name != "extra_args" and not is_secret_name(name) and holds_secret(_not_secret_keyed(value)):
            where = origins.get(name) or default_where
            raise InventoryError(f"variable {name} (from {where}) holds the value of a secret variable: it would "
                                 "be written into command lines and unit files that every user can read",
                                 target=target, hint=f"remove the secret from {name} at {where}; {SECRET_HOME}")


def _not_secret_keyed(value: Any) -> Any:
    """value less what sits under a key that names a secret (pve_api's token_secret): a secret where it
    belongs, not one copied into a setting that command lines and unit files show."""
    if isinstance(value, Mapping):
        return {k: _not_secret_keyed(v) for k, v in value.items() if not is_secret_name(k)}
    return value
