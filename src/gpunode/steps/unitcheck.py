"""A rendered unit read back the way systemd reads it (systemd.syntax(7)), before it is written.

systemd loads a unit whose lines it cannot use: a line without `=` or with a key it does not
know is skipped with a warning in the journal, and `systemd-analyze verify` passes. So a user
template that breaks a setting over lines (`{% filter wordwrap(60) %}ExecStart=...`) gives a
unit that loads, starts the first line's words alone and crash-loops (issue 41). Here every
line must be a comment, a [Section] or a `Key=value` setting, and every command line the role
made (an ExecLine from steps/unitfmt.py) must come back whole as the value of an Exec setting.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpunode.errors import StepError
from gpunode.steps.unitfmt import ExecLine

_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")


def settings(text: str) -> list[tuple[int, str, str]]:
    """(line number, key, value) per setting; \\r ends a line too and a trailing backslash joins
    the next one, as systemd reads them. A line that is no setting is a StepError naming it."""
    out: list[tuple[int, str, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(re.split(r"\r\n|\r|\n", text), 1):
        line = pending + raw
        first = start or number
        pending, start = "", 0
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.endswith("\\"):
            pending, start = stripped[:-1] + " ", first
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            continue
        key, sep, value = stripped.partition("=")
        if not sep or not _KEY.match(key.strip()):
            raise _NotASetting(first, stripped)
        out.append((first, key.strip(), value.strip()))
    return out


class _NotASetting(Exception):
    def __init__(self, number: int, line: str):
        super().__init__(number, line)
        self.number, self.line = number, line


def check(text: str, name: str, source: str, variables: Mapping[str, Any]) -> None:
    """Refuse a rendered unit systemd would read otherwise than the role wrote it."""
    try:
        found = settings(text)
    except _NotASetting as exc:
        raise StepError(f"{source} line {exc.number} (rendered): {exc.line[:120]!r} is not a `Key=value` setting; "
                        "systemd would skip it and load the rest", hint=_HINT) from None
    # words, not text: a line continued with a backslash gives the same words with other spaces
    values = {tuple(value.split()) for _, key, value in found if key.startswith("Exec")}
    for var, value in variables.items():
        if isinstance(value, ExecLine) and tuple(value.split()) not in values:
            raise StepError(f"{source}: the command line in `{var}` does not come back whole from the rendered "
                            f"{name} (no Exec setting holds it as written)", hint=_HINT)


_HINT = ("keep each setting on one line in the template, and print `{{ exec_start }}` as it is (no filter, "
         "no line breaks around it); `inv provision --check` shows the rendered unit")
