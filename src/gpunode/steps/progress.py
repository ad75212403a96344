"""Turn a long command's streamed output into progress callbacks while it still runs.

Long steps (weight staging, the readiness wait) print `@@progress DONE TOTAL NAME` markers on
stdout; installers (pip, uv) print their own lines, which InstallSink counts. The transport
streams stdout into the sink as it arrives, so the CLI can draw a live line (bytes, packages,
servers) and, with -v, show every line the target printed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: (done, total, name); the role binds unit= and step= (RoleContext.progress_for)
Progress = Callable[..., None]
#: one line of the command's output, for -v
Line = Callable[[str], None]


class ProgressSink:
    """A write()-able sink: parses marker lines, keeps everything else (and hands it to on_line)."""

    def __init__(self, on_progress: Progress | None, on_line: Line | None = None):
        self.on_progress = on_progress
        self.on_line = on_line
        self._pending = b""
        self.lines: list[str] = []

    def write(self, data: bytes) -> int:
        self._pending += data
        *complete, self._pending = self._pending.split(b"\n")
        for raw in complete:
            self._line(raw.decode("utf-8", "replace"))
        return len(data)

    def _line(self, line: str) -> None:
        if line.startswith("@@progress "):
            parts = line.split(" ", 3)
            if self.on_progress and len(parts) >= 3:
                self.on_progress(int(parts[1]), int(parts[2]), parts[3] if len(parts) > 3 else "")
            return
        if self.seen(line):
            return
        self.lines.append(line)
        if self.on_line is not None:
            self.on_line(line)

    def seen(self, line: str) -> bool:
        """A plain output line (a hook for subclasses); True when it was a status line to drop."""
        return False

    def flush(self) -> None:
        if self._pending:
            self._line(self._pending.decode("utf-8", "replace"))
            self._pending = b""

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


# pip: one "Collecting"/"Processing" line per package as it is fetched, then the list it installs;
# uv (without a terminal it draws no bars): "Resolved N packages", "Prepared N", "Installed N",
# then " + name==version" per package.
_PIP_ONE = re.compile(r"^(Collecting|Processing|Requirement already satisfied:) (\S+)")
_PIP_ALL = re.compile(r"^Installing collected packages: (.*)$")
_UV_COUNT = re.compile(r"^(Resolved|Prepared|Installed|Audited) (\d+) packages?\b")
_UV_ONE = re.compile(r"^ \+ (\S+)")


class InstallSink(ProgressSink):
    """An installer's output as package counts: done so far of total (0 until known)."""

    def __init__(self, on_progress: Progress | None, on_line: Line | None = None, *, total: int = 0,
                 label: str = ""):
        super().__init__(on_progress, on_line)
        self.total = total
        self.label = label
        self.done = 0
        self._phase = ""

    def start(self, what: str) -> None:
        self._report(what)

    def seen(self, line: str) -> bool:
        text = line.strip()
        if m := _PIP_ONE.match(text):
            self.done += 1
            self._report(f"{m.group(1).lower().rstrip(':')} {m.group(2)}")
        elif m := _PIP_ALL.match(text):
            self.total = self.total or len(m.group(1).split(", "))
            self._report("installing")
        elif m := _UV_COUNT.match(text):
            n = int(m.group(2))
            if m.group(1) == "Resolved":
                self.total = self.total or n
            elif m.group(1) == "Installed":
                self.done = max(self.done, n)
            self._report(text)
        elif m := _UV_ONE.match(line):
            self._report(f"+ {m.group(1)}")
        return False

    def finish(self, detail: str = "installed") -> None:
        """The install went through: every package is in (the line that reaches total is never dropped)."""
        self.total = self.total or self.done
        self.done = self.total
        self._report(detail)

    def _report(self, detail: str) -> None:
        if self.on_progress is not None:
            done = min(self.done, self.total) if self.total else self.done
            self.on_progress(done, self.total, f"{self.label}: {detail}" if self.label else detail)


# apt-get -o APT::Status-Fd=1: "dlstatus:<n>:<percent>:<what>" while downloading,
# "pmstatus:<package>:<percent>:<what>" while dpkg unpacks and sets up.
_APT_STATUS = re.compile(r"^(dlstatus|pmstatus):[^:]*:([0-9.]+):(.*)$")


class AptSink(ProgressSink):
    """apt-get's machine-readable status lines as one percentage that never goes back: each phase
    counts from 0 to 100 in apt's own numbers, so with a download first it is 0-50, install 50-100."""

    downloaded = False

    def seen(self, line: str) -> bool:
        m = _APT_STATUS.match(line.strip())
        if m is None:
            return False
        pct = min(100.0, float(m.group(2)))
        if m.group(1) == "dlstatus":
            self.downloaded, phase, done = True, "download", pct / 2
        else:
            phase, done = "install", 50 + pct / 2 if self.downloaded else pct
        if self.on_progress is not None:
            self.on_progress(int(done), 100, f"{phase}: {m.group(3)}")
        return True

    def finish(self) -> None:
        """apt-get went through: 100%. Its own last status line stops short of it (98.1% for the
        recorded jq+curl install), and a throttled consumer may have shown none of the install phase."""
        if self.on_progress is not None:
            self.on_progress(100, 100, "install: done")
