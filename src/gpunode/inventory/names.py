"""Names in an inventory: "did you mean" for a mistyped one, and a name YAML read as something else.

Both the inventory's own shape (core.py) and Ansible's (ansible.py) check their names with these.
"""

from __future__ import annotations

import difflib
from typing import Any

from gpunode import yamlsrc
from gpunode.errors import InventoryError, preview


def suggest(name: str, known: Any) -> str:
    """The hint "did you mean 'x'?" for the known name closest to `name`; empty when none is close."""
    from gpunode import lookalike

    same_look = lookalike.hint(name, known)  # "did you mean 'kpro6'?" would show two names that look alike
    if same_look:
        return same_look
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f"did you mean {close[0]!r}?" if close else ""


#: The longest host or group name taken: DNS's 253 characters and a little. A 100 KB host name was
#: taken, tried as an SSH address and printed whole on every line that names the target (issue 41).
MAX_NAME = 255


def name_fits(name: str, where: str, what: str) -> None:
    if len(name) > MAX_NAME:
        raise InventoryError(f"{where}: the {what} name {preview(name, 40)} is too long: a name is at most "
                             f"{MAX_NAME} characters", hint="shorten it (a DNS name is at most 253 characters)")


def name_is_text(name: Any, node: Any, what: str) -> None:
    """A host or group name YAML read as something else: `~` is null, `yes`/`no` booleans (issue 41:
    they became hosts "None" and "True"); or one past MAX_NAME."""
    if name is None or isinstance(name, (bool, float)):
        words: dict[Any, str] = {None: "~ (or null)", True: "yes/true/on", False: "no/false/off"}
        shown = words.get(name, repr(name))
        raise InventoryError(f"{yamlsrc.where(node, name)}: the {what} name {shown} is read by YAML as "
                             f"{name!r}, not a name", hint="quote the name, e.g. \"yes\": or \"~\":")
    name_fits(str(name), yamlsrc.where(node, name), what)
