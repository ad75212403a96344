"""Short flags and option types, set by hand and the same in every task.

Invoke would give each option the first free letter of its name, so `-s` meant --set, --save,
--server or --swap depending on the task, and `-h` was --host where a task had one (and help
where it did not). Here a letter means one thing everywhere, ansible-playbook's where it has one,
and `-h` is always help. An option absent from SHORT has only its long name.
"""

from __future__ import annotations

import inspect
from typing import Any

from invoke import Task
from invoke.parser import Argument

# long option -> its short flag. ansible-playbook's: -C -D -l -e -i -f -v -K -t (its --tags:
# run only these parts) -T (--timeout); gpunode's own: -g, -j, -y.
SHORT = {
    "check": "C", "diff": "D", "limit": "l", "set": "e", "inventory": "i", "forks": "f", "verbose": "v",
    "only": "t", "timeout": "T", "group": "g", "json": "j", "yes": "y", "ask-become-pass": "K",
}

# Options that take a whole number: `--help` shows them as INT. Their text reaches the task as
# given and common.parse_int checks it there, so that `--ct abc` is a message naming the flag and
# the range (invoke's own int() would end in a ValueError with neither).
NUMERIC = {
    "ct", "forks", "memory", "swap", "cores", "timeout", "input-len", "output-len", "requests", "seed",
    "job-samples", "job-output-tokens", "sample", "lines", "last", "grace", "servers",
}

# Flags that count: -v, -vv, -vvv (or --verbose given several times).
COUNTED = {"verbose"}


class Count(int):
    """The kind of a counted flag: an int that `--help` does not show as taking a value."""


class IntArgument(Argument):
    """An INT option whose value stays the text the user typed, for parse_int to judge."""

    def set_value(self, value: Any, cast: bool = True) -> None:
        super().set_value(value, cast=False)  # a counted flag (-vv) adds one whatever cast says


class GpunodeTask(Task):
    """A task whose short flags and option types come from the tables above."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["auto_shortflags"] = False
        super().__init__(*args, **kwargs)
        params = inspect.signature(self.body).parameters
        self.incrementable = [*self.incrementable, *(n for n in params if n.strip("_") in COUNTED)]

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts = super().arg_opts(name, default, taken_names)
        long = opts["names"][0]
        if long in SHORT:
            opts["names"].append(SHORT[long])
        if long in NUMERIC:
            opts["kind"] = int
        if long in COUNTED:
            opts["kind"], opts["default"] = Count, 0
        return opts

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        out = []
        for arg in super().get_arguments(ignore_unknown_help):
            if arg.kind in (int, Count):
                arg = IntArgument(names=arg.names, kind=arg.kind, default=arg.default, help=arg.help,
                                  positional=arg.positional, optional=arg.optional,
                                  incrementable=arg.incrementable, attr_name=arg.attr_name)
            out.append(arg)
        return out
