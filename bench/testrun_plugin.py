"""A pytest plugin for bench/testrun_cost.py: each test file's wall clock and bytes received.

Loaded with `-p bench.testrun_plugin` (testrun_cost.py sets PYTEST_ADDOPTS, so every pytest its
command starts loads it). Between a test's start and its end (setup, call and teardown: the module
fixtures that build a judge environment or provision a container count to the file whose test made
them) it adds the seconds and the bytes the machine's network interfaces received to that file;
at the end it writes {file: [seconds, bytes, tests]} to $GPUNODE_TESTRUN_DIR/<pid>.json.
The bytes are the whole machine's (/proc/net/dev, loopback left out): on a machine that runs
nothing else, what the tests downloaded.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


def received() -> int:
    total = 0
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, data = line.split(":", 1)
        if name.strip() != "lo":
            total += int(data.split()[0])
    return total


_files: dict[str, list[float]] = {}
_start: tuple[float, int] | None = None


def pytest_runtest_logstart(nodeid, location):
    global _start
    _start = (time.monotonic(), received())


def pytest_runtest_logfinish(nodeid, location):
    if _start is None:
        return
    entry = _files.setdefault(nodeid.split("::")[0], [0.0, 0, 0])
    entry[0] += time.monotonic() - _start[0]
    entry[1] += received() - _start[1]
    entry[2] += 1


def pytest_sessionfinish(session, exitstatus):
    folder = os.environ.get("GPUNODE_TESTRUN_DIR")
    if folder and _files:
        Path(folder, f"{os.getpid()}.json").write_text(json.dumps(_files))
