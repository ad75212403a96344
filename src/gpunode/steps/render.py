"""Jinja2 rendering for file templates: StrictUndefined, and a "managed by gpunode" header.

A missing variable is an error naming the template and the variable, never an
empty string silently written into a config file.

A rendering is kept (gpunode.datacache) under the template's text, its variables with their types,
and the code that renders (this module, unitcheck, unitfmt, Jinja's version): a no-op re-run renders
the same units again, and importing and compiling Jinja cost ~37 ms of its ~0.2 s of CPU (issue 45).
A template that includes, extends or imports another, or a value of a type not named in _canon, is
rendered each time. Templates of systemd units and
environment files (UNIT_SUFFIXES) print only values escaped by steps/unitfmt.py
(UnitSafe) or whole numbers: a raw string there is refused, so no value can
add a line or a setting to a unit.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpunode import datacache, searchpath
from gpunode.errors import StepError
from gpunode.steps.unitfmt import ExecLine, UnitSafe

if TYPE_CHECKING:
    import jinja2

MAX_TEMPLATE = 1 << 20  # a config file's template; anything larger is a wrong path
UNIT_SUFFIXES = (".service.j2", ".socket.j2", ".timer.j2", ".mount.j2", ".path.j2", ".target.j2", ".env.j2")


class RawValue(Exception):
    def __init__(self, value: Any):
        super().__init__(repr(value))
        self.value = value


def _only_escaped(value: Any) -> Any:
    if isinstance(value, UnitSafe) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise RawValue(value)


def is_unit_template(name: str) -> bool:
    return name.endswith(UNIT_SUFFIXES)


@functools.lru_cache(maxsize=8)
def environment(roots: tuple[str, ...], strict: bool = False) -> jinja2.Environment:
    """roots: the template folders, first match wins (searchpath.template_folders())."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(list(roots)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # config files and units, not HTML
        finalize=_only_escaped if strict else None,
    )


def header(name: str, comment: str) -> str:
    return f"{comment} managed by gpunode (template {name}); local changes will be overwritten\n"


def with_header(text: str, name: str, comment: str | None) -> str:
    """Put the header first, or right after a #! line, which must stay the first line."""
    if not comment:
        return text
    if text.startswith("#!"):
        first, _, rest = text.partition("\n")
        return f"{first}\n{header(name, comment)}{rest}"
    return header(name, comment) + text


def render(name: str, variables: Mapping[str, Any], *, comment: str | None = "#",
           root: Path | None = None) -> str:
    """Render templates/<name> with `variables`; comment=None for formats without comments."""
    return render_from(name, variables, comment=comment, root=root)[0]


def roots_for(root: Path | None) -> tuple[str, ...]:
    return (str(root),) if root is not None else tuple(str(p) for p in searchpath.template_folders())


def render_from(name: str, variables: Mapping[str, Any], *, comment: str | None = "#",
                root: Path | None = None) -> tuple[str, str]:
    """(the rendered text, the file it came from): the first template folder that has `name`."""
    roots = roots_for(root)
    where = ", ".join(roots)
    found = _check_file(name, roots)
    key = _cache_key(name, roots, found, variables)
    kept = datacache.get(key, "render") if key else None
    if isinstance(kept, list) and len(kept) == 2 and all(isinstance(x, str) for x in kept):
        return with_header(kept[0], name, comment), kept[1]
    import jinja2

    try:
        template = environment(roots, is_unit_template(name)).get_template(name)
        text = template.render(**variables)
    except RawValue as exc:
        raise StepError(f"template {name} was given a raw value {exc.value!r}, not one escaped for systemd",
                        hint="pass it through gpunode.steps.unitfmt (unit_text, unit_path, exec_line, "
                        "env_text) in the role") from None
    except jinja2.TemplateNotFound:
        raise StepError(f"template {name} not found under {where}",
                        hint="check the template name in the role; templates live in "
                        "templates/<role>/") from None
    except jinja2.UndefinedError as exc:
        # Jinja points the traceback at the template's own line: name it, since "'dict object' has no
        # attribute 'b'" alone says neither the variable nor where (issue 41)
        line = next((f" line {tb.tb_lineno}" for tb in _frames(exc.__traceback__)
                     if tb.tb_frame.f_code.co_filename.endswith(name)), "")
        raise StepError(f"template {name}{line} uses a variable that is not set: {exc.message}",
                        hint="set it in the role's defaults.yml or in the inventory") from None
    except jinja2.TemplateSyntaxError as exc:
        raise StepError(f"template {name} line {exc.lineno}: {exc.message}",
                        hint="fix the template syntax") from None
    if is_unit_template(name) and not name.endswith(".env.j2"):
        from gpunode.steps import unitcheck

        unitcheck.check(text, name.rsplit("/", 1)[-1].removesuffix(".j2"), template.filename or name, variables)
    if key:  # only a rendering that passed every check is kept
        datacache.put(key, "render", [text, template.filename or name])
    return with_header(text, name, comment), template.filename or name


# A template that pulls in another: its rendering depends on a file the key does not hold.
_PULLS_IN = re.compile(r"{%-?\s*(include|extends|import|from)\b")
_PLAIN = (str, int, float, bool, type(None))
#: unitfmt's escaped texts: str with no rendering of their own, told apart by their type's name (a unit
#: checks an ExecLine as a whole command line, steps/unitcheck.py)
_ESCAPED = (UnitSafe, ExecLine)


def _canon(value: Any) -> Any:
    """The value with each part's type, as JSON: a str and a UnitSafe of the same text render differently
    in a unit (the finalize check), as do 1 and True. None for a value of any other type (its rendering
    is its own __str__'s)."""
    kind = type(value)
    if kind in _PLAIN or kind in _ESCAPED:
        if kind is float and value != value:
            return None  # NaN: never equal to itself, so no key would be found again
        return [kind.__name__, value]
    if kind in (list, tuple):
        items = [_canon(v) for v in value]
        return None if any(i is None for i in items) else [kind.__name__, items]
    if kind is dict:
        if not all(isinstance(k, str) for k in value):
            return None
        items = [[k, _canon(v)] for k, v in value.items()]
        return None if any(i[1] is None for i in items) else ["dict", items]
    return None


@functools.cache
def _code() -> str:
    """The digest of the files whose code decides a rendering: this module, the unit checks and escapes,
    and Jinja's own __init__ (its version), found without importing Jinja. Read once a process."""
    from gpunode.steps import unitcheck, unitfmt

    spec = importlib.util.find_spec("jinja2")
    jinja = spec.origin if spec and spec.origin else ""
    return datacache.key("render", *(f for f in (__file__, unitcheck.__file__, unitfmt.__file__, jinja) if f))


def _cache_key(name: str, roots: tuple[str, ...], found: tuple[Path, str] | None,
               variables: Mapping[str, Any]) -> str | None:
    if found is None or _PULLS_IN.search(found[1]):
        return None
    canon = _canon(dict(variables)) if all(isinstance(k, str) for k in variables) else None
    if canon is None:
        return None
    try:
        inputs = json.dumps([name, list(roots), str(found[0]), found[1], canon, is_unit_template(name)],
                            allow_nan=False)
    except ValueError:
        return None  # an infinite float
    return datacache.key(_code() + inputs)


def _frames(tb: Any) -> list[Any]:
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


def _check_file(name: str, roots: tuple[str, ...]) -> tuple[Path, str] | None:
    """The template file Jinja would open, through the reader of every user file first: a FIFO
    would hang Jinja's read, a device or a huge file fill memory (issue 41). Its path and text."""
    from gpunode import userfiles

    for folder in roots:
        path = Path(folder) / name
        if os.path.lexists(path):
            text = userfiles.decode(userfiles.read_bytes(path, what="template", error=StepError, limit=MAX_TEMPLATE),
                                    path, what="template", error=StepError)
            return path, text
    return None


def find(name: str, root: Path | None = None) -> Path:
    """The file of the template or script `name` (e.g. weights/stage-weights.sh): the first folder's."""
    for folder in roots_for(root):
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    raise StepError(f"template {name} not found under {', '.join(roots_for(root))}",
                    hint="check the name; templates live in templates/<role>/")
