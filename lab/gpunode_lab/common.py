"""Helpers shared by the lab modules: the error type, progress lines, running host commands."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gpunode.errors import GpunodeError, tail

log = logging.getLogger("gpunode_lab")

Progress = Callable[[str], None]


class LabError(GpunodeError):
    """The lab could not be brought up, down or inspected."""


def say(progress: Progress | None, line: str) -> None:
    """One progress line: to the callback when given, else to logging (never print)."""
    if progress is not None:
        progress(line)
    else:
        log.info("%s", line)


def host_run(
    argv: Sequence[str],
    *,
    what: str = "",
    check: bool = True,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
    timeout: float | None = None,
    hint: str = "",
) -> subprocess.CompletedProcess[bytes]:
    """Run a command on the lab host; raise LabError with its output when it fails."""
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    try:
        proc = subprocess.run(
            list(argv),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            env=full_env,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise LabError(
            f"{argv[0]} is not installed on this machine",
            hint=hint or "install the lab's packages: apt-get install openssh-server lxc debootstrap dpkg-dev",
        ) from None
    except subprocess.TimeoutExpired as exc:
        raise LabError(f"`{' '.join(argv)}` did not finish within {timeout:.0f} s",
                       evidence=tail((exc.stderr or b"").decode("utf-8", "replace"))) from None
    if check and proc.returncode != 0:
        out = (proc.stderr or b"").decode("utf-8", "replace") + (proc.stdout or b"").decode("utf-8", "replace")
        raise LabError(
            f"{what or '`' + ' '.join(argv)[:200] + '`'} failed with exit code {proc.returncode}",
            evidence=tail(out, 25),
            hint=hint or "fix the cause above and run `inv lab.up` again (it is safe to repeat)",
        )
    return proc


def write_text(path: Path, text: str, mode: int = 0o644) -> bool:
    """Write a file atomically when its content differs; True when it changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_text() == text:
        if (path.stat().st_mode & 0o7777) != mode:
            path.chmod(mode)
        return False
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    os.replace(tmp, path)
    return True


class Stopwatch:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self) -> float:
        return time.monotonic() - self.started
