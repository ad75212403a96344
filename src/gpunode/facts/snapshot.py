"""Raw probe output, and saving it to / loading it from a folder.

A snapshot folder holds one file per section (`<name>.txt`, the exact bytes the
target printed) and `meta.json` (target, inputs, exit codes). Saved with
`inv facts --save DIR`, replayed with `inv facts --facts DIR`, and used as
recorded test cases under tests/data/snapshots/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gpunode import durable, userfiles
from gpunode.errors import FactError

FORMAT = 1


@dataclass(frozen=True)
class Section:
    """One probe section: what it printed (stdout and stderr) and its exit code."""

    output: str
    rc: int = 0

    @property
    def ok(self) -> bool:
        return self.rc == 0


@dataclass(frozen=True)
class RawFacts:
    target: str
    sections: dict[str, Section] = field(default_factory=dict)
    model_path: str | None = None
    venv: str | None = None
    gathered_at: str = ""
    duration_s: float | None = None

    def get(self, name: str) -> Section | None:
        return self.sections.get(name)

    def ok(self, name: str) -> str | None:
        """The section's output if it ran and succeeded, else None."""
        s = self.sections.get(name)
        return s.output if s is not None and s.ok else None


def save(raw: RawFacts, folder: Path) -> None:
    """Write the snapshot whole: into a temp folder beside it, then renamed into place.

    An earlier snapshot in the folder is replaced as a whole (no section of it stays behind),
    and a failed save leaves it as it was. A folder holding anything but a snapshot is
    refused: its files are not ours to remove. A symlinked folder stays a symlink.
    """
    dest = durable.real(folder)
    _check_replaceable(dest, folder)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".new", dir=dest.parent))
    except OSError as exc:  # under /proc, under a file, a read-only or full disk
        parent = next((p for p in dest.parents if p.exists()), dest.parent)
        why = f"{parent} is a file" if parent.exists() and not parent.is_dir() else exc.strerror or type(exc).__name__
        raise FactError(f"cannot save a snapshot to {folder}: {why}",
                        hint="give a folder you can write, e.g. ./snap") from None
    try:
        os.chmod(tmp, 0o755)
        for name, section in raw.sections.items():
            # newline="" everywhere: keep the target's bytes exactly, \r included.
            _write(tmp / f"{name}.txt", section.output)
        meta = {
            "format": FORMAT,
            "target": raw.target,
            "model_path": raw.model_path,
            "venv": raw.venv,
            "gathered_at": raw.gathered_at,
            "duration_s": raw.duration_s,
            "rc": {name: s.rc for name, s in raw.sections.items()},
        }
        _write(tmp / "meta.json", json.dumps(meta, indent=2, sort_keys=True) + "\n")
        durable.fsync_dir(tmp)
        if dest.exists():
            # Two renames, not one (Linux's RENAME_EXCHANGE is out of Python's reach): a crash
            # between them leaves the old snapshot as .<name>.old-<pid> beside the folder.
            old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
            os.rename(dest, old)
            os.rename(tmp, dest)
            durable.fsync_dir(dest.parent)
            shutil.rmtree(old)
        else:
            os.rename(tmp, dest)
            durable.fsync_dir(dest.parent)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise FactError(f"cannot save a snapshot to {folder}: {exc.strerror or type(exc).__name__}",
                        hint="free some space or give another folder; an earlier snapshot there is unchanged") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _check_replaceable(dest: Path, given: Path) -> None:
    if not dest.exists():
        return
    if not dest.is_dir():
        raise FactError(f"cannot save a snapshot to {given}: it is a file, not a folder",
                        hint="give a new folder (or one that holds an earlier snapshot)")
    names = [p.name for p in dest.iterdir()]
    others = sorted(n for n in names if n != "meta.json" and not n.endswith(".txt"))
    if others or (names and "meta.json" not in names):
        listed = ", ".join((others or names)[:5])
        raise FactError(f"cannot save a snapshot to {given}: it holds files that are not a snapshot's ({listed})",
                        hint="give a new or empty folder; an earlier snapshot there is replaced whole")


def load(folder: Path) -> RawFacts:
    """Read a snapshot folder written by save() (or assembled by hand for a test)."""
    meta_file = folder / "meta.json"
    if not folder.exists() and (why := userfiles.missing(folder, "")):
        raise FactError(f"facts snapshot {folder} {why}", hint="check the path")
    if not os.path.lexists(meta_file):  # a link loop or a link to nothing is the reader's to name
        raise FactError(
            f"{folder} is not a facts snapshot: it has no meta.json",
            hint="pass a folder written by `inv facts --save DIR`",
        )
    text = userfiles.read_text(meta_file, what="snapshot meta.json", error=FactError)
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FactError(f"{meta_file} is not valid JSON: {exc}",
                        hint="restore the file from the saved snapshot or save a new one") from None
    except ValueError as exc:  # a number of more digits than Python converts (issue 41: 5000 digits)
        raise FactError(f"{meta_file} holds a value that cannot be read ({str(exc)[:80]})",
                        hint="restore the file from the saved snapshot or save a new one") from None
    except RecursionError:  # brackets nested past Python's stack (issue 41: an internal error)
        raise FactError(f"{meta_file} is nested too deeply to read (a snapshot's meta.json is one flat object)",
                        hint="restore the file from the saved snapshot or save a new one") from None
    if not isinstance(meta, dict):
        raise FactError(f"{meta_file}: expected a JSON object with format, target and rc, got a {type(meta).__name__}",
                        hint="restore the file from the saved snapshot or save a new one")
    if meta.get("format") != FORMAT:
        shown = str(meta.get("format"))[:20]
        raise FactError(f"{meta_file} has snapshot format {shown!r}; this gpunode reads {FORMAT}",
                        hint="save the snapshot again with this version of gpunode")
    rcs = meta.get("rc", {})
    if not isinstance(rcs, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in rcs.values()):
        raise FactError(f"{meta_file}: rc must map each section to its exit code", hint="save the snapshot again")
    for key, kinds in (("target", (str,)), ("model_path", (str, type(None))), ("venv", (str, type(None))),
                       ("gathered_at", (str,)), ("duration_s", (int, float, type(None)))):
        if key in meta and (not isinstance(meta[key], kinds) or isinstance(meta[key], bool)):
            raise FactError(f"{meta_file}: {key} has the wrong type ({type(meta[key]).__name__})",
                            hint="save the snapshot again")
        if isinstance(meta.get(key), str) and userfiles.surrogate_at(meta[key]) is not None:
            raise FactError(f"{meta_file}: {key} is not valid Unicode (a \\udcXX escape of a byte that is not "
                            "UTF-8)", hint="save the snapshot again")
    sections = {}
    for path in sorted(folder.glob("*.txt")):
        name = path.stem
        if not re.fullmatch(r"[a-z0-9_]+", name):
            continue
        text = userfiles.read_text(path, what="snapshot section", error=FactError, exact=True)
        sections[name] = Section(text, int(rcs.get(name, 0)))
    missing = sorted(set(rcs) - set(sections))
    if missing:
        raise FactError(f"{folder} lists sections without files: {', '.join(missing)}",
                        hint="the snapshot is incomplete; save it again")
    return RawFacts(
        target=meta.get("target", folder.name),
        sections=sections,
        model_path=meta.get("model_path"),
        venv=meta.get("venv"),
        gathered_at=meta.get("gathered_at", ""),
        duration_s=meta.get("duration_s"),
    )
