"""Jinja2 rendering for file templates: StrictUndefined, and a "managed by gpunode" header.

A missing variable is an error naming the template and the variable, never an
empty string silently written into a config file. Templates of systemd units and
environment files (UNIT_SUFFIXES) print only values escaped by steps/unitfmt.py
(UnitSafe) or whole numbers: a raw string there is refused, so no value can
add a line or a setting to a unit.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from gpunode import searchpath
from gpunode.errors import StepError
from gpunode.steps.unitfmt import UnitSafe

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
    _check_file(name, roots)
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
    return with_header(text, name, comment), template.filename or name


def _frames(tb: Any) -> list[Any]:
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


def _check_file(name: str, roots: tuple[str, ...]) -> None:
    """The template file Jinja would open, through the reader of every user file first: a FIFO
    would hang Jinja's read, a device or a huge file fill memory (issue 41)."""
    from gpunode import userfiles

    for folder in roots:
        path = Path(folder) / name
        if os.path.lexists(path):
            userfiles.decode(userfiles.read_bytes(path, what="template", error=StepError, limit=MAX_TEMPLATE),
                             path, what="template", error=StepError)
            return


def find(name: str, root: Path | None = None) -> Path:
    """The file of the template or script `name` (e.g. weights/stage-weights.sh): the first folder's."""
    for folder in roots_for(root):
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    raise StepError(f"template {name} not found under {', '.join(roots_for(root))}",
                    hint="check the name; templates live in templates/<role>/")
