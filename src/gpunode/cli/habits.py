"""Options an Ansible, pyinfra or Invoke user types: the same meaning under gpunode's name, or a
refusal that names what to use instead (never Invoke's bare "No idea what '--x' is!").

ansible-playbook's -b/--become, --become-user, -u/--user and --list-hosts are gpunode core options
(they apply to every task that reaches a target); the values land in `given`, which
cli.common.load_inventory and select_targets read.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from invoke import Collection

#: Spelled another way in gpunode, same meaning: rewritten before parsing.
ALIASES = {
    "--dry": "--check",          # pyinfra's dry run is ansible-playbook's and gpunode's check mode
    "--tags": "--only",          # gpunode's roles are its tags
    "--extra-vars": "--set",     # ansible-playbook's -e long name
    "--data": "--set",           # pyinfra's --data KEY=VALUE
    "--sudo": "--become",        # pyinfra's
    "--sudo-user": "--become-user",
    "--parallel": "--forks",     # pyinfra's
}

#: Known elsewhere, not here: what to use instead.
REFUSED = {
    "-R": "gpunode has no -R; its dry run is -C/--check (pyinfra's --dry works too)",
    "--echo": "gpunode has no --echo (an Invoke option); see what a change would run with --check --commands",
    "-w": "gpunode has no -w/--warn-only (an Invoke option): a failed target is reported and the others go on",
    "--warn-only": "gpunode has no --warn-only (an Invoke option): a failed target is reported and the others go on",
    "--hide": "gpunode has no --hide (an Invoke option); -v, -vv, -vvv choose how much is shown",
    "-p": "gpunode has no -p/--pty (an Invoke option): commands on a target never need a terminal",
    "--pty": "gpunode has no --pty (an Invoke option): commands on a target never need a terminal",
    "--prompt-for-sudo-password": "use -K/--ask-become-pass (asked once, for hosts with become)",
    "--command-timeout": "use -T/--timeout (seconds per target) where the task has it",
    "-d": "gpunode has no -d/--debug; -vvv shows the traceback of an internal error",
    "--debug": "gpunode has no --debug; -vvv shows the traceback of an internal error",
    "--write-pyc": "gpunode has no --write-pyc (an Invoke option)",
    "-c": "gpunode has no -c/--connection: set `connection: local` or ansible_connection on the host in the inventory",
    "--connection": "set `connection: local` or ansible_connection on the host in the inventory",
    "-k": "gpunode has no -k/--ask-pass: it logs in with SSH keys (an agent or the host's `key:`)",
    "--ask-pass": "gpunode logs in with SSH keys (an agent or the host's `key:`), never a login password",
    "--password": "gpunode logs in with SSH keys (an agent or the host's `key:`), never a login password",
    "--private-key": "set `key:` (or ansible_ssh_private_key_file) on the host in the inventory, or use ~/.ssh/config",
    "--key": "set `key:` (or ansible_ssh_private_key_file) on the host in the inventory, or use ~/.ssh/config",
    "--port": "set `port:` (or ansible_port) on the host in the inventory, or use ~/.ssh/config",
    "--become-method": "gpunode becomes through sudo only",
    "--ask-vault-pass": "gpunode does not read Ansible Vault; give `ansible-inventory -i X --list` output as -i "
                        "(Ansible decrypts it), or set a secret in the environment",
    "--vault-password-file": "gpunode does not read Ansible Vault; give `ansible-inventory -i X --list` output as -i "
                             "(Ansible decrypts it), or set a secret in the environment",
    "--vault-id": "gpunode does not read Ansible Vault; give `ansible-inventory -i X --list` output as -i "
                  "(Ansible decrypts it), or set a secret in the environment",
    "--list-tasks": "`gpunode provision --check` lists every step it would take; `gpunode resolve` shows the plan",
    "--syntax-check": "`gpunode provision --check` reads the inventory and makes the plan without changing anything",
    "--start-at-task": "use -t/--only ROLE (gpunode's roles are its tags); a re-run skips what is already done",
    "--step": "use --check to see each step first; a re-run skips what is already done",
    "--flush-cache": "facts are gathered on every run; a saved snapshot is only read with --facts",
    "-m": "gpunode runs roles, not ad-hoc modules; for one command use ssh (or `pct exec`) on the host",
    "-a": "gpunode runs roles, not ad-hoc modules; for one command use ssh (or `pct exec`) on the host",
}


@dataclass
class Given:
    """The core options that reach targets: applied by load_inventory and select_targets."""

    become: bool = False
    become_user: str | None = None
    user: str | None = None
    list_hosts: bool = False


given = Given()

#: The command the user ran: gpunode.cli.main.main (the console script) sets "gpunode"; tasks.py is `inv`.
program = "inv"
#: The -i/--inventory the user typed, for the commands a hint suggests (cli.common.inventory_path sets it).
inventory_typed: str | None = None
#: The task tree whose tasks a hint may name: gpunode.cli.main sets it as it builds it (every task's
#: module imports this one, so this one cannot import the tree).
tree: Collection | None = None


def as_typed(text: str) -> str:
    """A message's hints as the user would type them: `inv status` becomes `gpunode status` under the
    console script (and back under `inv`), with the user's own -i where the task takes one. Only the
    `hint:` lines: the rest may quote what another run recorded (a lock holder's command)."""
    names = _tasks()
    if not names or "hint:" not in text:
        return text
    suggested = re.compile(r"\b(?:inv|gpunode) (" + "|".join(re.escape(n) for n in sorted(names, key=len,
                                                                                           reverse=True)) + r")\b")
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("hint:"):
            lines[i] = suggested.sub(functools.partial(_typed, line=line, names=names), line)
    return "\n".join(lines)


def _typed(seen: re.Match[str], *, line: str, names: dict[str, bool]) -> str:
    import shlex

    task = seen.group(1)
    said = f"{program} {task}"
    rest = line[seen.end():]
    if inventory_typed and names[task] and not re.match(r"[^`;]*(?:--inventory|\s-i\s)", rest):
        said += f" -i {shlex.quote(inventory_typed)}"
    return said


def _tasks() -> dict[str, bool]:
    """Every task name of the program the user ran -> whether it takes --inventory."""
    import inspect

    out: dict[str, bool] = {}
    if tree is None:
        return out
    for name in tree.task_names:
        body = tree[name].body
        out[name] = "inventory" in inspect.signature(body).parameters
    return out


#: What translate rewrote, gpunode's spelling -> the user's, so that a refusal quotes what was typed.
typed_as: dict[str, str] = {}
#: The flags typed before any task's name (as gpunode spells them): there, only the program's own are known.
before_task: set[str] = set()
#: The task the user named first, if any: the one a hint puts a misplaced flag after.
named_task: list[str] = []


def translate(argv: list[str]) -> list[str]:
    """argv with the ALIASES spelled as gpunode spells them (up to a `--`, after which it is data)."""
    tasks = set(tree.task_names) if tree is not None else set()  # names only: every command passes here
    out: list[str] = []
    for i, token in enumerate(argv):
        if token == "--":
            return out + argv[i:]
        name, eq, value = token.partition("=")
        if name in ALIASES:
            typed_as[ALIASES[name]] = name
            name = ALIASES[name]
        if token in tasks:
            named_task[:] = [token]
            tasks = set()  # past the first task's name: its options follow
        elif tasks and token.startswith("-"):
            before_task.add(name)
        out.append(name + eq + value if token.startswith("-") else token)
    return out


def _task_taking(flag: str) -> str | None:
    """The task the user named, else provision, else the first task, that takes this option: a flag typed
    before the task belongs after it."""
    takers = [name for name in _tasks() if tree is not None
              for arg in tree[name].get_arguments()
              if flag in {("--" if len(n) > 1 else "-") + n.replace("_", "-") for n in arg.names}]
    preferred = [t for t in (*named_task, "provision") if t in takers]
    return (preferred or takers)[0] if takers else None


def refusal(message: str) -> str | None:
    """Invoke's "No idea what '-x' is!" for a flag that a user of another tool types: what to use."""
    seen = re.fullmatch(r"No idea what '([^']*)' is!", str(message))
    if seen is None:
        return None
    name = seen.group(1).partition("=")[0]
    if not name.startswith("-"):
        return f"error: no task {name!r}\nhint: `{program} --list` lists the tasks"
    if name in REFUSED:
        return f"error: {name}: {REFUSED[name]}"
    task = _task_taking(name) if name in before_task else None
    if task is not None:
        # pyinfra takes --dry before its arguments (`pyinfra --dry INVENTORY DEPLOY`); gpunode's tasks own it
        typed = typed_as.get(name, name)
        return (f"error: {typed} is an option of the task, not of {program}: put it after the task's name\n"
                f"hint: `{program} {task} {typed} ...`")
    return f"error: no option {name} here\nhint: `gpunode --help TASK` lists a task's options"
