"""What every task shares: error translation, inventory loading, --set parsing."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

import yaml
from invoke import Exit, UnexpectedExit
from invoke import task as invoke_task

from gpunode import inventory, userfiles, yamlsrc
from gpunode.errors import INTERNAL_EXIT, GpunodeError, InventoryError, internal_report, printable
from gpunode.secrets import redact, register_vars

DEFAULT_INVENTORY = "inventory"


def task(*args: Any, **kwargs: Any):
    """invoke.task that turns GpunodeError into a clean message and exit code 2.

    The message names the target and ends with a hint; no traceback, because
    the error already carries its evidence. Any other exception is a bug: it
    becomes a short report without its message (which may quote a secret).
    """

    def wrap(fn):
        @functools.wraps(fn)
        def run(*a: Any, **kw: Any):
            try:
                from gpunode import settings
                from gpunode.cli import habits

                habits.inventory_typed = kw.get("inventory") or None  # for the commands a hint suggests
                settings.apply_colour(settings.current())
                return fn(*a, **kw)
            except GpunodeError as exc:
                from gpunode.cli.habits import as_typed

                raise Exit(printable(redact(as_typed(f"error: {exc}"))), code=2) from None
            except KeyboardInterrupt:
                raise Exit("interrupted; re-running is safe and resumes where this run stopped", code=130) from None
            except (Exit, UnexpectedExit):
                raise
            except BrokenPipeError:
                reader_gone()
                raise Exit(code=0) from None
            except Exception as exc:
                if os.environ.get("GPUNODE_DEBUG") or (kw.get("verbose") or 0) >= 3:  # -vvv, as Ansible's
                    raise
                raise Exit(internal_report(exc), code=INTERNAL_EXIT) from None

        from gpunode.cli.flags import GpunodeTask

        return invoke_task(*args, klass=GpunodeTask, **kwargs)(run)

    if len(args) == 1 and callable(args[0]) and not kwargs:
        fn = args[0]
        args = ()
        return wrap(fn)
    return wrap


def quiet_when_reader_gone_at_exit() -> None:
    """Registered with atexit: output still in stdout's buffer (a pipe is block-buffered unless
    PYTHONUNBUFFERED is set) meets the closed pipe only at Python's final flush, outside every handler,
    as "Exception ignored ... BrokenPipeError" and exit 120. Flushing here, while it can be caught, ends
    quietly with the exit status the run already had."""
    import sys

    try:
        sys.stdout.flush()
    except BrokenPipeError:
        reader_gone()


def reader_gone() -> None:
    """stdout's reader went away (`| head`, `| true`): the caller ends quietly, as `ls | head` does.

    stdout is pointed at /dev/null so that flushing it at exit raises no second BrokenPipeError.
    """
    import sys

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def inventory_path(given: str | None) -> Path:
    """--inventory, else $GPUNODE_INVENTORY, else the config files' `inventory:`, else ./inventory."""
    from gpunode import settings

    if given is not None and not str(given).strip():
        # `-i ''` (an unset shell variable) would otherwise fall back to another inventory
        raise InventoryError("--inventory is empty", hint="give the inventory folder or file, or leave --inventory "
                             f"out to use $GPUNODE_INVENTORY, the config files' inventory or ./{DEFAULT_INVENTORY}")
    return Path(given or settings.current().inventory or DEFAULT_INVENTORY)


def forks_of(given: Any, default: int) -> int:
    """--forks, else $GPUNODE_FORKS, else the config files' `forks:`, else the task's default."""
    from gpunode import settings

    value = given if given not in (None, "") else settings.current().forks or default
    return parse_int(value, "--forks", 1, 256, f"how many targets at once, e.g. --forks {default}")


def load_inventory(given: str | None) -> inventory.Inventory:
    path = inventory_path(given)
    if not given and not path.exists():
        from gpunode import settings

        where = settings.current().origins.get("inventory")
        if where:
            raise InventoryError(f"inventory {path} (from {where}) {userfiles.missing(path)}",
                                 hint="fix that setting, or pass --inventory PATH")
    loaded = inventory.load(path)
    use_search_path(path)
    _apply_given(loaded)
    return loaded


def _apply_given(inv: inventory.Inventory) -> None:
    """-u/--user, -b/--become, --become-user: over every host's own settings, as ansible-playbook's."""
    from dataclasses import replace

    from gpunode.cli.habits import given

    for name, h in list(inv.hosts.items()):
        if given.user:
            h = replace(h, user=given.user, given=h.given | {"user"})
        if given.become and h.connection == "ssh":  # a local host is this machine, as whoever runs gpunode
            h = replace(h, become=True, become_user=given.become_user or "root")
        inv.hosts[name] = h


def use_search_path(inventory_file: Path | None) -> None:
    """The user's roles and templates for this run: next to the inventory, then the settings' folders."""
    from gpunode import searchpath, settings

    s = settings.current()
    for key, folders in (("roles_path", s.roles_path), ("templates_path", s.templates_path)):
        for folder in folders:
            if not Path(folder).expanduser().is_dir():
                raise InventoryError(f"{key}: {folder} is not a folder (from {s.origins.get(key, key)})",
                                     hint=f"create it or fix {key}")
    searchpath.use(inventory_file, s.roles_path, s.templates_path)


# Versions stay text: YAML would read python=3.10 as the number 3.1.
VERSION_KEYS = ("python", "engine_version")


def parse_int(value: Any, flag: str, low: int, high: int, hint: str) -> int:
    """An integer command-line option; `--ct abc` is a message, not a ValueError."""
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
        shown = repr(text) if len(text) <= 40 else f"({len(text)} characters)"
        raise InventoryError(f"{flag} {shown} is not a whole number from {low} to {high}", hint=hint)
    return int(text)


VMID_HINT = "a Proxmox vmid such as 200 (100-999999999); see the host's `containers:` in the inventory"


def parse_sets(sets: list[str] | None) -> dict[str, Any]:
    """--set key=value (value read as YAML, so 0.85, true, [1, 2] keep their types; versions stay text).

    Errors name the key, never the value: a value may be a secret (hf_token=...).
    """
    out: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for item in sets or []:
        if item.startswith("@"):  # -e @vars.yml, as ansible-playbook: a YAML mapping of variables
            from_file = _vars_file(item[1:])
            yamlsrc.refuse_jinja(from_file, item)
            out.update(from_file)
            origins.update({key: yamlsrc.where(from_file, key) for key in from_file})
            continue
        key, sep, value = item.partition("=")
        origins[key.strip()] = "--set"
        key = key.strip()
        if not sep or not key:
            shown = repr(key) if not sep and len(key) <= 40 else "(the part before =)"
            raise InventoryError(f"--set {shown} is not key=value", hint="e.g. --set mem_fraction=0.85")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", key):
            raise InventoryError(f"--set: {key[:40]!r} is not a variable name",
                                 hint="variable names are letters, digits and _, e.g. --set mem_fraction=0.85")
        bad = userfiles.surrogate_at(value)
        if bad is not None:
            raise InventoryError(f"--set {key}=...: the value is not valid Unicode (a byte that is not UTF-8 at "
                                 f"character {bad + 1})", hint="give the value as UTF-8 text")
        if key in VERSION_KEYS or not value:
            out[key] = value.strip()
            continue
        yamlsrc.refuse_jinja({key: value}, "--set", tag_hint=False)  # as Ansible's -e would template it
        try:
            out[key] = yamlsrc.load_text(value, f"--set {key}", syntax=False)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at character {mark.column + 1}" if mark is not None else ""
            # PyYAML quotes what it found; keep single characters, never a longer part of the value.
            problem = re.sub(r"'[^'\s]{2,}'", "'...'", getattr(exc, "problem", None) or "not valid YAML")
            raise InventoryError(f"--set {key}=...: the value is not valid YAML ({problem}{at})",
                                 hint=f"quote it as text (--set '{key}=\"...\"') or fix the brackets; "
                                 "lists are written [0, 1]") from None
    register_vars(out)  # before anything can quote a value: inv resolve --nvidia-smi has no inventory
    from gpunode import variables

    # Checked here too, not only after layering: `inv resolve --facts` has no target to layer onto.
    variables.check(out, origins)
    return out


def _vars_file(name: str) -> dict[str, Any]:
    path = Path(name).expanduser()
    if not path.exists():  # a FIFO or a folder is refused by the reader, by name (not "no such file")
        raise InventoryError(f"-e @{name}: {userfiles.missing(path, 'no such file')}",
                             hint="give a YAML file of `key: value` lines, e.g. -e @vars.yml")
    doc = yamlsrc.load(path)
    if not isinstance(doc, dict):
        raise InventoryError(f"{path}: a variables file must be a mapping of `key: value` lines, "
                             f"got {type(doc).__name__}", hint="e.g. `mem_fraction: 0.85`")
    for key in doc:
        if not (isinstance(key, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", key)):
            raise InventoryError(f"{yamlsrc.where(doc, key)}: {str(key)[:40]!r} is not a variable name",
                                 hint="variable names are letters, digits and _")
    return doc


def select_targets(inv: inventory.Inventory, host: str | None, ct: int | str | None, group: str | None,
                   overrides: dict[str, Any], limit: str | None = None) -> list[inventory.Target]:
    """--host H [--ct N], --group G and/or --limit PATTERN -> targets, with every role's defaults as the
    lowest layer. --limit narrows what --host or --group chose, or chooses among every target."""
    from gpunode import roles, variables
    from gpunode.inventory import patterns

    for flag, value in (("--limit", limit), ("--group", group)):
        if value is not None and not str(value).strip():
            # an empty pattern chose nothing, and was read as no pattern: the whole group ran (issue 41)
            raise InventoryError(f"{flag} is empty", hint=f"give a pattern, or leave {flag} out")
    defaults = roles.defaults()
    for h in inv.hosts.values():
        register_vars(h.vars)
        for c in h.containers.values():
            register_vars(c.vars)
    register_vars(inv.top_vars)
    for v in (*inv.group_vars.values(), *inv.host_vars_files.values()):
        register_vars(v)
    register_vars(overrides)
    if ct not in (None, "") and not host:
        raise InventoryError("--ct needs --host: a vmid is a container of one host",
                             hint="pass --host H --ct N, or --limit H/N")
    if group and (host or ct):
        raise InventoryError("give either --group or --host/--ct, not both",
                             hint="--group G provisions every container of every host in G")
    if group:
        keys = [(t.host.name, t.container.vmid if t.container else None) for t in inv.group_targets(group)]
    elif host:
        vmid = parse_int(ct, "--ct", 100, 999_999_999, VMID_HINT) if ct not in (None, "") else None
        inv.target(host, vmid)  # names an unknown host or container
        keys = [(host, vmid)]
    elif limit:
        keys = inv.all_targets()
    else:
        raise InventoryError("which target? pass --host H (and --ct N for a container), --group G or --limit PATTERN",
                             hint=f"hosts in {inv.source}: {', '.join(sorted(inv.hosts))}")
    if limit:
        keys = patterns.select(limit, keys, inv.groups)
        if not keys:
            raise InventoryError(f"--limit {limit!r} leaves no target", hint="check its ! and & parts")
    targets = [inv.target(h, vmid, overrides, defaults) for h, vmid in keys]
    for t in targets:  # once, after every layer: role defaults < inventory < --set
        variables.check(t.vars, t.origins, t.name)
    from gpunode.cli.habits import given

    if given.list_hosts:  # ansible-playbook --list-hosts: the targets, nothing contacted
        print(f"  hosts ({len(targets)}):")
        for t in targets:
            print(f"    {printable(t.name)}")
        raise Exit(code=0)
    return targets
