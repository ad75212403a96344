"""What every transport offers: run a command (with streamed stdin/stdout),
move files and trees in and out, write files atomically, hold a process open.

A transport is addressed by argv lists, never by pre-joined strings; the
concrete transport decides how argv crosses its boundary (subprocess argv,
an SSH command line built by gpunode.shell, `pct exec -- ...`).
"""

from __future__ import annotations

import io
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

from gpunode import shell
from gpunode.errors import CommandError, tail

if TYPE_CHECKING:  # tarfile costs ~14 ms to import; only tree transfers use it
    import tarfile

CHUNK = 1 << 20

Stdin = bytes | BinaryIO | None


class Sink(Protocol):
    """Where a command's stdout is streamed: a file, or a progress reader (steps/progress.py)
    that parses the bytes as they come; only write is used."""

    def write(self, data: bytes, /) -> object: ...


@dataclass(frozen=True)
class Result:
    """The value of one finished command on one target."""

    target: str
    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def command(self) -> str:
        return shell.join(self.argv)

    def check(self, what: str = "") -> Result:
        """Return self, or raise CommandError with the evidence when it failed."""
        if not self.ok:
            doing = what or f"command `{_short(self.command)}`"
            raise CommandError(
                f"{doing} failed with exit code {self.exit_code}",
                target=self.target,
                evidence=tail(self.stderr or self.stdout),
                hint="read the output above; re-running is safe once the cause is fixed",
            )
        return self


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Held:
    """A process kept running on the target while its stdin stays open.

    Closing stdin (release) ends it; so does the connection dying, which is
    what makes a lock held this way recoverable after a crash.
    """

    first_line: str
    _close: object = field(repr=False)
    #: the lines after the first one, up to the `until` line that hold() was given ("" without one)
    body: str = ""

    def release(self, wait: bool = True) -> None:
        """Close its stdin; with wait, also until it has ended (a transport may always wait)."""
        close = self._close
        self._close = None
        if callable(close):
            close(wait)


def read_held(read: Callable[[int], bytes], until: str) -> tuple[str, str]:
    """(first line, body) of a held process's stdout: the body runs up to a line that is exactly
    `until`, or to the end of the output when that line never comes. `read(n)`: up to n bytes as
    they come, b"" at the end. Read in chunks, not lines: a full provision's batch answers ~900
    lines, and a readline each cost ~3 ms of this process's CPU on every no-op."""
    buf = bytearray()
    end = b"\n" + until.encode() + b"\n"
    searched = 0
    while True:
        nl = buf.find(b"\n")
        if nl >= 0 and not until:
            return _text(buf[:nl]), ""
        if nl >= 0:
            # The end line starts after a newline: the first line's own, or a body line's.
            at = buf.find(end, max(nl, searched))
            if at >= 0:
                return _text(buf[:nl]), _text(buf[nl + 1:at + 1])
            searched = max(nl, len(buf) - len(end) + 1)
        chunk = read(CHUNK)
        if not chunk:
            return (_text(buf[:nl]), _text(buf[nl + 1:])) if nl >= 0 else (_text(buf), "")
        buf += chunk


def probe_deadline() -> float:
    """Seconds that a probe on a target may take: the lock shell's answer (lock, facts, the recorded
    batch), a batch of its own, the facts again. A hung mount under a probed path would otherwise hold
    the run, and its lock, for ever. GPUNODE_PROBE_DEADLINE changes it (a slow target; tests)."""
    try:
        return max(1.0, float(os.environ.get("GPUNODE_PROBE_DEADLINE", "") or 300.0))
    except ValueError:
        return 300.0


class Deadline:
    """A `read(n)` for read_held that gives up at a deadline (TimeoutError) and keeps what came,
    for the evidence. `wait(fd_or_chan, seconds)` blocks until there is something to read."""

    def __init__(self, read: Callable[[int], bytes], wait: Callable[[float], None], seconds: float):
        self._read, self._wait = read, wait
        self.seconds = seconds
        self._end = time.monotonic() + seconds
        self.got = bytearray()

    def __call__(self, n: int) -> bytes:
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self._wait(left)
        data = self._read(n)
        self.got += data
        return data

    def error(self, target: str) -> CommandError:
        return CommandError(
            f"the probe did not answer within {self.seconds:g} s: gpunode ended it on the target, "
            "with everything it started, and let go of the lock",
            target=target,
            evidence=tail(_text(self.got)),
            hint="a command of the probe hangs on the target (a hung mount under a probed path, a path that "
            "leads into /dev or /proc); the recorded probe was dropped, so the next run probes afresh. "
            "A slow target: raise GPUNODE_PROBE_DEADLINE",
        )


def _text(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", "replace")


# Transport.write_file's shell (write.sh): stdin into $1 atomically, checked against $4's sha256.
WRITE = shell.script("gpunode.transport", "write.sh")
SHA_ON_STDIN = "-"


def write_argv(dest: str, mode: int = 0o644, owner: str | None = None, sha256: str | None = None) -> list[str]:
    """The argv that writes its stdin to dest atomically (what write_file runs)."""
    return shell.sh(WRITE, dest, format(mode, "o"), owner or "", sha256 or "")


class Transport(ABC):
    """Run commands on one target. Subclasses implement `_exec` and `hold`."""

    #: Human name used in every message: "kpro6", "kpro6/200", "local".
    name: str = "?"

    @abstractmethod
    def _exec(
        self,
        argv: Sequence[str],
        stdin: Stdin,
        sink: Sink | None,
        timeout: float | None,
    ) -> tuple[int, bytes, bytes]:
        """Run argv; stream stdin in; stdout into sink if given (else return it)."""

    @abstractmethod
    def hold(self, argv: Sequence[str], until: str = "") -> Held:
        """Start argv, wait for its first stdout line (and, with `until`, for the lines after it
        up to a line that is exactly `until`: Held.body), keep it running until released."""

    def close(self) -> None:  # noqa: B027 - optional for transports without resources
        """Release connections. Safe to call twice."""

    # -- running ---------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: Stdin = None,
        sink: Sink | None = None,
        timeout: float | None = None,
        check: bool = False,
        what: str = "",
    ) -> Result:
        if isinstance(argv, str):
            raise TypeError("run() takes an argv list; use script() for shell text")
        started = time.monotonic()
        code, out, err = self._exec(list(argv), stdin, sink, timeout)
        result = Result(
            target=self.name,
            argv=tuple(argv),
            exit_code=code,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            duration=time.monotonic() - started,
        )
        self._raise_for_transport(result)
        return result.check(what) if check else result

    def script(self, text: str, *args: str, **kwargs) -> Result:
        """Run shell text with sh; args become $1.. and are never spliced into it."""
        return self.run(shell.sh(text, *args), **kwargs)

    def _raise_for_transport(self, result: Result) -> None:  # noqa: B027 - a hook, empty by default
        """Turn a failure of the transport itself into a ConnectError (hook)."""

    # -- files -----------------------------------------------------------------

    def write_file(
        self,
        dest: str,
        data: bytes | BinaryIO,
        *,
        mode: int = 0o644,
        owner: str | None = None,
        sha256: str | None = None,
    ) -> None:
        """Write dest atomically: temp file in the same folder, fsync, chmod, rename.

        With sha256, the temp file is hashed on the target before the rename, so
        a stream cut short can never replace dest with a truncated file.
        """
        self.run(write_argv(dest, mode, owner, sha256), stdin=data, check=True, what=f"writing {dest}")

    def read_file(self, path: str, sink: Sink | None = None) -> bytes:
        """Read a file; with sink, stream it there and return b''."""
        if sink is not None:
            self.run(["cat", "--", path], sink=sink, check=True, what=f"reading {path}")
            return b""
        buf = io.BytesIO()
        self.run(["cat", "--", path], sink=buf, check=True, what=f"reading {path}")
        return buf.getvalue()

    def put_tree(self, local_dir: Path, dest_dir: str) -> None:
        """Stream a local folder into dest_dir as a tar, without holding it in memory."""
        import os
        import tarfile
        import threading

        r, w = os.pipe()
        reader = os.fdopen(r, "rb")
        writer = os.fdopen(w, "wb")

        def produce() -> None:
            with writer, tarfile.open(fileobj=writer, mode="w|") as tar:
                tar.add(str(local_dir), arcname=".")

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        try:
            self.script(
                'mkdir -p "$1" && tar -x --no-same-owner -C "$1" -f -',
                dest_dir,
                stdin=reader,
                check=True,
                what=f"unpacking into {dest_dir}",
            )
        finally:
            thread.join()
            reader.close()

    def get_tree(self, src_dir: str, local_dir: Path) -> None:
        """Stream a folder of the target into a local folder."""
        local_dir.mkdir(parents=True, exist_ok=True)
        import os
        import tarfile
        import threading

        r, w = os.pipe()
        reader = os.fdopen(r, "rb")
        writer = os.fdopen(w, "wb")
        errors: list[BaseException] = []

        def consume() -> None:
            try:
                with reader, tarfile.open(fileobj=reader, mode="r|") as tar:
                    extract_data(tar, local_dir)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        try:
            with writer:
                self.run(["tar", "-c", "-C", src_dir, "-f", "-", "."], sink=writer, check=True)
        except BrokenPipeError:
            thread.join()
            if not errors:  # else the local side stopped reading, and its own error says why
                raise
        finally:
            thread.join()
        if errors:
            raise errors[0]

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def extract_data(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract a streamed tar of a target's folder as plain data, like tarfile's "data" filter:
    no member outside `dest` (`..`, or a link pointing out; a leading / is dropped), no devices, no setuid or
    group/other write bits. The filter itself is used where it exists; Debian 12's Python 3.11.2
    predates it (3.11.4), so there the same rules are applied here."""
    import tarfile

    if hasattr(tarfile, "data_filter"):
        tar.extractall(str(dest), filter="data")
        return
    root = dest.resolve()

    def inside(path: Path) -> bool:
        return path == root or root in path.parents

    for member in tar:
        member.name = member.name.lstrip("/")  # as the filter does: an absolute name lands inside
        target = (root / member.name).resolve()
        if not inside(target):
            raise tarfile.TarError(f"{member.name!r} would land outside {dest}")
        if member.issym() and not inside((target.parent / member.linkname).resolve()):
            raise tarfile.TarError(f"{member.name!r} links outside {dest}")
        if member.islnk() and not inside((root / member.linkname).resolve()):
            raise tarfile.TarError(f"{member.name!r} links outside {dest}")
        if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
            raise tarfile.TarError(f"{member.name!r} is a device or fifo, not data")
        member.mode &= 0o755
        member.uid = member.gid = 0
        member.uname = member.gname = ""
        tar.extract(member, str(root), set_attrs=not member.issym())


def feed(stdin: Stdin):
    """Yield stdin in chunks, whether bytes or a binary file object."""
    if stdin is None:
        return
    if isinstance(stdin, bytes | bytearray | memoryview):
        view = memoryview(stdin)
        for i in range(0, len(view), CHUNK):
            yield bytes(view[i : i + CHUNK])
        return
    while True:
        chunk = stdin.read(CHUNK)
        if not chunk:
            return
        yield chunk
