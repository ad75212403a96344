"""The facts probe in a real container, inside the engine's lock shell as a provision runs it:
how many processes it starts (strace -f of the pct stand-in), and its cache in the state folder.

A no-op run (the second applying run) starts only what must be read fresh (one df, one stat of
every cached group's files, one find of the model folder); the stored sections are sourced;
a check run writes nothing; an `ldconfig` in the container makes the next run read again.
Container 284 belongs to this file; it is made before and removed after.
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections import Counter
from pathlib import Path

from gpunode.engine import lock
from gpunode.engine.probe import new_nonce
from gpunode.facts import probe
from gpunode.facts.parse import parse
from gpunode_lab import paths
from tests.lab.provision_helpers import CT_PATH, container_fixture, cpu_vars

VMID = 284
STATE = "/var/lib/gpunode"
box = container_fixture(VMID, 512, "lab-facts", wheels=False)
# the lock shell's own processes (the lock; mkdir and head only on a first run or a refusal)
LOCK_SHELL = {"pct", "lxc-attach", "env", "sh", "flock", "mkdir", "head"}


def trip(tmp_path: Path, *, check: bool) -> tuple[Counter[str], str, object]:
    """One lock-shell round trip with the facts probe, as engine.begin runs it; the programs it
    started inside the container (successful execve) other than the lock shell's, and the facts."""
    nonce = new_nonce()
    model = cpu_vars()["model_source"]
    text = probe.inline(nonce, model, None, state_ref='"$d"')
    owner = lock.Owner.current("lab-facts-run").to_json()
    script = lock._SHARED if check else lock._EXCLUSIVE
    log = tmp_path / f"strace-{nonce}.txt"
    argv = ["strace", "-f", "-qq", "-z", "-e", "trace=execve", "-o", str(log), str(paths.PCT), "exec", str(VMID), "--",
            "env", "-i", f"PATH={CT_PATH}", "HOME=/root", "LC_ALL=C.UTF-8", "sh", "-c", script, "sh", STATE, owner,
            text, "-", "end-of-" + nonce]
    # stdin stays open until the answer is in, as the engine holds it: a lock shell whose stdin
    # closes early takes its controller for gone and ends the probe (engine/lock.py)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(120, proc.kill)
    timer.start()
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line == f"end-of-{nonce}\n":
                break
        proc.stdin.close()
        stdout, stderr = "".join(lines) + proc.stdout.read(), proc.stderr.read()
        proc.wait()
    finally:
        timer.cancel()
    first, _, rest = stdout.partition("\n")
    assert first in ("LOCKED", "FREE") and rest.endswith(f"\nend-of-{nonce}\n"), stdout + stderr
    output = rest.removesuffix(f"\nend-of-{nonce}\n")
    raw = probe.collect(f"lab/{VMID}", output, nonce, model, None, None)
    started = [re.search(r'execve\("([^"]+)"', line).group(1).rsplit("/", 1)[-1]
               for line in log.read_text().splitlines() if 'execve("' in line and "= -1" not in line]
    return Counter(p for p in started if p not in LOCK_SHELL), output, parse(raw)


def stable(facts) -> tuple:
    """What a run reads from the facts, without what changes from second to second."""
    s = facts.system
    return (facts.gpus, facts.driver, facts.model, s.os_id, s.os_version, s.arch, s.glibc, s.pythons,
            s.default_python, s.cpus, s.mem_total_bytes, s.libcuda, s.libnuma, s.toolkits, s.in_container,
            s.systemd, facts.problems)


def state_files(box) -> str:
    return box.sh(f"cd {STATE} 2>/dev/null && for f in facts-*; do [ -e \"$f\" ] && "
                  "stat -c '%n %i %s %y' \"$f\"; done; true").out


def test_a_no_op_starts_three_processes_for_facts_and_reads_the_same(box, tmp_path):
    first, _, facts1 = trip(tmp_path, check=False)
    assert first["getconf"] == 1 and first["ldconfig"] == 1  # a first run reads everything
    assert "facts-libs.sig" in state_files(box)
    again, output, facts2 = trip(tmp_path, check=False)
    assert again == Counter({"df": 1, "stat": 1, "find": 1}), again
    assert ":cached\n" in output
    assert stable(facts2) == stable(facts1)
    assert facts2.system.default_python == "3.11" and facts2.system.glibc == "2.36"
    assert facts2.model is not None and facts2.model.exists and facts2.model.num_parameters


def test_a_check_run_uses_the_cache_and_writes_nothing(box, tmp_path):
    trip(tmp_path, check=False)
    before = state_files(box)
    started, _, _ = trip(tmp_path, check=True)
    assert started == Counter({"df": 1, "stat": 1, "find": 1}), started
    assert state_files(box) == before


def test_a_changed_library_cache_is_read_again(box, tmp_path):
    _, _, before = trip(tmp_path, check=False)
    box.sh("ldconfig")  # rewrites /etc/ld.so.cache (a new file), as every library package install does
    started, _, facts = trip(tmp_path, check=False)
    assert started["ldconfig"] == 1 and started["getconf"] == 0, started
    assert stable(facts) == stable(before)
    assert trip(tmp_path, check=False)[0]["ldconfig"] == 0
