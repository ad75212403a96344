"""Run commands on this machine: the workstation, or a GPU box driven in place."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
from collections.abc import Sequence

from gpunode.errors import CommandError
from gpunode.transport.base import CHUNK, Deadline, Held, Sink, Stdin, Transport, feed, probe_deadline, read_held


class LocalTransport(Transport):
    def __init__(self, name: str = "local"):
        self.name = name

    def _exec(self, argv: Sequence[str], stdin: Stdin, sink: Sink | None, timeout: float | None):
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except FileNotFoundError:
            return 127, b"", f"{argv[0]}: command not found\n".encode()
        err_parts: list[bytes] = []
        out_parts: list[bytes] = []

        def pump_in() -> None:
            assert proc.stdin is not None
            try:
                for chunk in feed(stdin):
                    proc.stdin.write(chunk)
            except BrokenPipeError:
                pass
            finally:
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.close()

        def pump_err() -> None:
            assert proc.stderr is not None
            err_parts.append(proc.stderr.read())

        threads = [threading.Thread(target=pump_err, daemon=True)]
        if stdin is not None:
            threads.append(threading.Thread(target=pump_in, daemon=True))
        for t in threads:
            t.start()
        assert proc.stdout is not None
        while chunk := proc.stdout.read(CHUNK):
            (sink.write(chunk) if sink is not None else out_parts.append(chunk))
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        for t in threads:
            t.join()
        return code, b"".join(out_parts), b"".join(err_parts)

    def hold(self, argv: Sequence[str], until: str = "") -> Held:
        proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdin is not None
        out = proc.stdout.fileno()  # unbuffered: read_held takes what has come
        read = Deadline(lambda n: os.read(out, n), lambda left: _ready(out, left), probe_deadline())
        try:
            line, body = read_held(read, until)
        except TimeoutError:
            # Its stdin closed, the lock shell's watcher ends the probe (engine/lock.py).
            proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            raise read.error(self.name) from None
        if proc.poll() is not None and not line:
            err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
            raise CommandError(f"`{argv[0]}` ended at once", target=self.name, evidence=err)

        def close(_wait: bool) -> None:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()  # type: ignore[union-attr]
            proc.wait(timeout=30)  # always: a child of this process is reaped here

        return Held(first_line=line, _close=close, body=body)


def _ready(fd: int, seconds: float) -> None:
    if not select.select([fd], [], [], seconds)[0]:
        raise TimeoutError
