"""A registered secret leaks nowhere a user or another user of the node can read (issue 12).

The secret goes in as a user gives it: `server_api_key` in the container's `vars:` of an
inventory file (and rotated with `--set` in 6). Secret-looking variables that no role reads
(`hf_token` with `--set`, `registry_password` in the host's `vars:`) are refused without their
values (0), and so is an API key in `extra_args`. Each value carries a core of letters and digits
that every escaped form keeps (JSON, shell, systemd, env file), and the test looks for the
cores, in a fresh cpu container of this module:

1. `inv resolve` (text and --json) and the human `inv provision --check` plan of the fresh
   container (every file a diff from nothing, the 0600 secret files among them);
2. errors: extra_args holding `--api-key KEY` or a secret's value, a broken YAML value of a
   secret, a secret holding a newline: exit 2, a message, no traceback, nothing written;
3. a real `inv provision --json`: while it runs, every execve under the lab's sshd is traced
   with its argv (strace -f: each command on the host, through pct and lxc-attach in the
   container, however short-lived), every process's argv on the host (which is the Proxmox host
   here, and sees the container's processes, systemd's servers included) and `ps -eo args` in
   the container are sampled, and lock.owner is read, until the CLI exits; a second run started while the first
   holds the lock is refused; the events, the refusal, argv and lock.owner hold no core (the
   operator's own `inv provision --set ...` command line excepted: the user typed it);
4. every file of the container (units, env files, /var/lib/gpunode/journal.jsonl, the systemd
   journal, /opt, /tmp, ...) holds no core, except the key in the 0600 root:root secret files,
   and `journalctl` shows none;
5. live: each vLLM-CPU server answers 401 without the key or with a wrong one and 200 with it;
   the router refuses a completion without the key and, given it, gets one from the servers;
6. the key is rotated with `--set` in a human `inv provision --diff`: its report names the
   secret files as changed and shows neither key; the servers and the router take the new key
   and refuse the old one.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpunode_lab import paths
from tests.lab.provision_helpers import (
    INV,
    REPO,
    TINY_MODEL,
    CliRun,
    FreshContainer,
    _ps,
    container_fixture,
    cpu_vars,
    lab_host,
    poll,
    provision,
    snapshot,
)

pytestmark = [pytest.mark.lab, pytest.mark.slow]

VMID = 243  # made and removed by this module
MEMORY_MB = 8192  # two vLLM-CPU slots (~2 GB each) and the router
SECRET_DIR = "/etc/gpunode"

# Each secret and its core (CORES: where it went in -> core): the core survives every escaping,
# so finding the core finds any form of the value.
HF_TOKEN = "hf_SetViaCli7Q2m9Xz4Lp"
API_KEY = 'sk-inv-$HOME%n"q\\-K3yCore9wU5-end'  # specials: env file, systemd and curl escaping
HOST_PASSWORD = "pw-HostLevelR7t6Yu4"
EXTRA_KEY = "sk-extraArgJ8h7G6f5"
NEW_KEY = "sk-rotated-N3wCoreQ8z2x"  # the key a user rotates to in test 6
CORES = {"hf_token (--set)": "7Q2m9Xz4Lp", "server_api_key (inventory)": "K3yCore9wU5",
         "registry_password (host vars)": "HostLevelR7t6Yu4", "--api-key (extra_args)": "extraArgJ8h7G6f5",
         "server_api_key (rotated, --set)": "N3wCoreQ8z2x"}
SET: tuple[str, ...] = ()   # no --set secret: the one gpunode reads is server_api_key, set in the inventory


def leaks(text: str) -> list[str]:
    return [name for name, core in CORES.items() if core in text]


box = container_fixture(VMID, MEMORY_MB, "lab-secrets")


def write(path: Path, host_vars: dict | None = None, **container_vars: Any) -> Path:
    """The lab host (with `host_vars`) and this module's container with `container_vars`."""
    host = lab_host()
    if host_vars:
        host["vars"] = host_vars
    host["containers"] = {VMID: {"vars": cpu_vars(server_api_key=API_KEY, **container_vars)}}
    path.write_text(yaml.safe_dump({"hosts": {"lab": host}}, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def inventory(box, tmp_path_factory) -> Path:
    inv = write(tmp_path_factory.mktemp("inv") / "hosts.yml")
    assert API_KEY in yaml.safe_load(inv.read_text())["hosts"]["lab"]["containers"][VMID]["vars"].values()
    return inv


def inv(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    # Wide lines: a human report wrapped inside a secret would hide a leak from the search.
    return subprocess.run([str(INV), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False,
                          stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "500"})


def target(inventory: Path) -> tuple[str, ...]:
    return ("-i", str(inventory), "--host", "lab", "--ct", str(VMID))


def test_0_a_secret_looking_variable_no_role_reads_is_refused_without_its_value(inventory, tmp_path):
    """Its value would be dropped without a word (issue 29): refused, named, never shown."""
    for args in (("--set", f"hf_token={HF_TOKEN}"),):
        proc = inv("resolve", *target(inventory), *args)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2 and "hf_token" in out and "looks like a secret" in out, out
        assert not leaks(out), out
    host_level = write(tmp_path / "host.yml", host_vars={"registry_password": HOST_PASSWORD})
    proc = inv("resolve", *target(host_level))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "registry_password" in out and not leaks(out), out


@pytest.fixture(scope="module")
def plan(inventory) -> dict:
    proc = inv("resolve", *target(inventory), "--json", *SET)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def secret_files(plan: dict) -> list[str]:
    """Where the key lives for vLLM-CPU servers and the router (src/gpunode/steps/secretfiles.py)."""
    return [f"{SECRET_DIR}/{s['name']}.secrets.env" for s in plan["servers"]] + [f"{SECRET_DIR}/router.secrets.env"]


def test_1_resolve_and_the_human_check_plan_show_no_secret(box, inventory, plan):
    assert plan["engine"] == "vllm-cpu" and plan["servers"], plan
    assert not leaks(json.dumps(plan)), json.dumps(plan)[:2000]
    text = inv("resolve", *target(inventory), *SET)
    assert text.returncode == 0 and "Servers" in text.stdout, text.stdout + text.stderr
    assert not leaks(text.stdout + text.stderr), text.stdout

    check = inv("provision", *target(inventory), "--check", *SET, timeout=600)
    out = check.stdout + check.stderr
    assert check.returncode == 0, out[-4000:]
    # The plan covers the key: each secret file is created, its diff hidden.
    for path in secret_files(plan):
        assert path in out, f"{path} not in the --check plan:\n{out[-4000:]}"
    assert "(secret changed" in out, out[-4000:]
    assert "ExecStart" in out, "the --check plan shows no unit diff"
    assert not leaks(out), [line for line in out.splitlines() if leaks(line)]


BAD = {
    "extra_args holds --api-key KEY": (dict(extra_args=["--api-key", EXTRA_KEY]), (), "--api-key"),
    "extra_args holds the server_api_key's value": (dict(extra_args=["--served-model-name", API_KEY]), (),
                                                    "argument 2 holds the value of a secret variable"),
    "a secret's --set value is broken YAML": ({}, ("--set", f"server_api_key=[{API_KEY}"), "server_api_key"),
    # YAML's double quotes make \n a newline (a raw newline in a plain scalar folds into a space).
    "a secret holds a newline": ({}, ("--set", f'server_api_key="{EXTRA_KEY}\\nExecStartPre=/bin/x"'),
                                 "server_api_key=..."),
}


def test_2_errors_next_to_secrets_name_the_variable_never_the_value(box, inventory, tmp_path):
    before = snapshot(box.sh)
    for case, (changes, sets, named) in BAD.items():
        bad = write(tmp_path / f"{len(os.listdir(tmp_path))}.yml", **changes) if changes else inventory
        proc = inv("provision", *target(bad), *SET, *sets)
        out = proc.stdout + proc.stderr
        assert not leaks(out), f"{case}: {leaks(out)} in\n{out}"
        assert proc.returncode == 2, f"{case}: exit {proc.returncode}\n{out[-3000:]}"
        assert named in out and "Traceback" not in out, f"{case}:\n{out[-3000:]}"
    assert snapshot(box.sh) == before, "a refused run wrote to the container"


@dataclass
class Samples:
    """What the sampler saw while the run was alive."""

    rounds: int = 0
    host: set[str] = field(default_factory=set)       # argv of every host process (container's included)
    container: set[str] = field(default_factory=set)  # `ps -eo args` inside the container
    owners: list[tuple[int, str]] = field(default_factory=list)  # (mode, text) of lock.owner
    errors: list[str] = field(default_factory=list)


def sample(box: FreshContainer, alive: threading.Event, found: Samples) -> None:
    """Sample argv on the host and in the container, and lock.owner, until `alive` is cleared."""
    owner = box.root() / "var/lib/gpunode/lock.owner"
    while alive.is_set():
        found.rounds += 1
        # The operator's CLI (`python .../inv provision --set hf_token=...`) holds what the user typed.
        found.host.update(cmd for _, cmd in _ps().values() if cmd and str(INV) not in cmd)
        with contextlib.suppress(OSError):  # no lock held at this instant
            found.owners.append((owner.stat().st_mode & 0o777, owner.read_text()))
        if found.rounds % 8 == 1:
            ps = box.sh("ps -eo args", check=False)
            if ps.rc == 0:
                found.container.update(ps.out.splitlines())
            else:
                found.errors.append(ps.err)
        alive.wait(0.05)  # the sampling period, not a synchronisation: the loop ends with the run


def tracer_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    return 0


@contextlib.contextmanager
def traced_execs(out: Path):
    """strace -f on the lab's sshd: every execve of its descendants with its whole argv, which is
    each command gpunode runs on the host and, through pct and lxc-attach, in the container; a
    command too short-lived for any `ps` sample is recorded too."""
    listener = int(paths.SSHD_PID.read_text().split()[0])
    # timeout: a test killed hard never leaves strace attached to the lab's sshd.
    tracer = subprocess.Popen(["timeout", "1800", "strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none",
                               "-s", "1000000", "-o", str(out), "-p", str(listener)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        poll("strace to attach to the lab's sshd", lambda: tracer_of(listener) or tracer.poll() is not None, 30)
        assert tracer.poll() is None and tracer.stderr is not None, f"strace ended: {tracer.stderr.read()}"
        yield
    finally:
        tracer.terminate()  # passed on by timeout; strace detaches from every tracee
        tracer.wait(60)


def test_3_a_real_run_keeps_secrets_out_of_argv_lock_owner_events_and_the_lock_refusal(box, inventory, plan,
                                                                                      tmp_path):
    found = Samples()
    alive = threading.Event()
    alive.set()
    sampler = threading.Thread(target=sample, args=(box, alive, found), daemon=True)
    refused: list[subprocess.CompletedProcess] = []

    def on_event(event: dict, proc) -> None:
        # A step reported means the lock is held: a second operator is refused, and told by whom.
        if event.get("type") == "step" and not refused:
            refused.append(inv("provision", *target(inventory), *SET, timeout=120))

    trace = tmp_path / "execve.strace"
    with traced_execs(trace):
        sampler.start()
        try:
            run: CliRun = provision(inventory, VMID, *SET, on_event=on_event)
        finally:
            alive.clear()
            sampler.join(30)
    assert run.rc == 0 and run.recap["succeeded"], run.explain()
    for path in secret_files(plan):
        assert run.status(f"file:{path}") == "changed", run.explain()
    raw = json.dumps(run.events) + "".join(run.stdout_other) + run.stderr
    assert not leaks(raw), [json.dumps(e)[:300] for e in run.events if leaks(json.dumps(e))]

    (second,) = refused
    said = second.stdout + second.stderr
    assert second.returncode != 0 and "is locked by another gpunode run" in said, said[-3000:]
    assert "inv provision" in said and "Traceback" not in said, said[-3000:]
    assert not leaks(said), said

    execs = [line for line in trace.read_text(errors="replace").splitlines() if " execve(" in line]
    assert any("gpunode-lock" in e for e in execs) and any("lxc-attach" in e for e in execs), execs[:20]
    assert not [e for e in execs if leaks(e)], [e[:400] for e in execs if leaks(e)]

    assert found.errors == [], found.errors[:3]
    shells = [c for c in found.host if "gpunode-lock" in c]
    assert shells, f"no lock shell sampled in {found.rounds} rounds"
    assert any("vllm.entrypoints.openai.api_server" in c for c in found.container), "no server sampled"
    assert any("runpy" in c and "-c" in c for c in found.container), "the router's launcher was not sampled"
    assert not [c for c in found.host | found.container if leaks(c)], \
        [c[:400] for c in found.host | found.container if leaks(c)]
    # Empty between runs (the lock shell empties it on release) and for an instant while it is written.
    records = [text for _, text in found.owners if text]
    assert records, f"lock.owner never seen holding a record in {found.rounds} rounds"
    assert {mode for mode, _ in found.owners} == {0o600}
    assert all('"task":"inv provision"' in text for text in records), records[:2]
    assert not [text for _, text in found.owners if leaks(text)]
    print(f"\n{len(execs)} commands traced through sshd; "
          f"{found.rounds} sampling rounds over {run.seconds:.0f} s: {len(found.host)} host and "
          f"{len(found.container)} container command lines, lock.owner read {len(found.owners)} times")


def test_4_only_the_0600_secret_files_on_the_target_hold_the_key(box, plan):
    tops = box.sh("ls -1 /").out.split()
    dirs = [f"/{d}" for d in tops if d not in ("proc", "sys", "dev", "mnt", "usr")] + ["/usr/local", "/dev/shm"]
    patterns = [a for core in CORES.values() for a in ("-e", core)]
    grep = box.sh('grep -rlF --devices=skip "$@" 2>/dev/null; true', *patterns, *dirs, timeout=600)
    holders = sorted(grep.out.split())
    key_files = secret_files(plan)
    assert holders == sorted(key_files), f"files holding a secret: {holders}"
    for path in key_files:
        meta = box.sh('stat -c "%a %U:%G" "$1"', path).out.split()
        assert meta[:2] == ["600", "root:root"], f"{path}: {meta}"
        assert box.sh('grep -lF -e "$2" -e "$3" "$1"; [ $? -eq 1 ]', path, CORES["hf_token (--set)"],
                      CORES["registry_password (host vars)"], check=False).rc == 0, f"{path} holds another secret"
    assert box.exists("/var/lib/gpunode/journal.jsonl")
    assert box.sh("ls /etc/systemd/system/gpunode-*.service").out.strip(), "no gpunode unit on the target"
    journal = box.sh("journalctl --no-pager -o cat", timeout=300).out
    assert "gpunode-router" in journal or "sglang" in journal.lower() or "vllm" in journal.lower(), journal[-2000:]
    assert not leaks(journal), [line[:300] for line in journal.splitlines() if leaks(line)]


def curl_config(key: str | None) -> str:
    """curl's config on stdin (`-K -`): the header never enters curl's argv."""
    if key is None:
        return ""
    return 'header = "Authorization: Bearer ' + key.replace("\\", "\\\\").replace('"', '\\"') + '"\n'


def call(box: FreshContainer, port: int, key: str | None, body: dict | None = None) -> tuple[int, str]:
    """HTTP status and body of GET /v1/models (or POST /v1/completions with `body`) on `port`."""
    data = ["-H", "Content-Type: application/json", "-d", json.dumps(body)] if body else []
    path = "/v1/completions" if body else "/v1/models"
    out = box.sh('p=$1; u=$2; shift 2; curl -sS --max-time 120 -K - -o /tmp/reply -w "%{http_code}" "$@" '
                 '"http://127.0.0.1:$p$u"; echo; cat /tmp/reply; rm -f /tmp/reply',
                 str(port), path, *data, input=curl_config(key), timeout=150).out
    status, _, reply = out.partition("\n")
    return int(status), reply


def test_5_servers_and_router_want_the_key_and_the_router_passes_it_on(box, plan):
    prompt = {"model": TINY_MODEL, "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}
    router = plan["router"]["port"]
    for port in [s["port"] for s in plan["servers"]]:
        assert call(box, port, None)[0] == 401, f"server port {port} answered without the key"
        assert call(box, port, API_KEY + "x")[0] == 401, f"server port {port} took a wrong key"
        status, reply = call(box, port, API_KEY)
        assert status == 200 and TINY_MODEL in reply, f"server port {port}: {status} {reply[:500]}"
        assert call(box, port, None, prompt)[0] == 401
    # sglang-router keeps /v1/models (and /get_model_info, /get_server_info) among its public
    # routes (sgl-router/src/server.rs, `public_routes`): only its inference routes want the key.
    assert call(box, router, None, prompt)[0] == 401, "the router served a completion without the key"
    assert call(box, router, API_KEY + "x", prompt)[0] == 401, "the router took a wrong key"
    status, reply = call(box, router, API_KEY, prompt)
    assert status == 200, reply[:1000]  # the router sent the key on to the servers, which want it
    assert json.loads(reply)["choices"][0]["text"], reply


def test_6_a_rotated_key_shows_in_no_human_report_and_replaces_the_old_one(box, inventory, plan):
    proc = inv("provision", *target(inventory), "--diff", *SET, "--set", f"server_api_key={NEW_KEY}", timeout=900)
    out = proc.stdout + proc.stderr
    assert not leaks(out), [line for line in out.splitlines() if leaks(line)]
    assert proc.returncode == 0, out[-4000:]
    for path in secret_files(plan):
        assert path in out, f"{path} not reported as changed:\n{out[-4000:]}"
    assert "(secret changed" in out and "Traceback" not in out, out[-4000:]
    holders = box.sh('k=$1; shift; grep -lF -e "$k" "$@"; true', CORES["server_api_key (rotated, --set)"],
                     *secret_files(plan)).out.split()
    assert sorted(holders) == sorted(secret_files(plan))
    prompt = {"model": TINY_MODEL, "prompt": "Paris is", "max_tokens": 2, "temperature": 0}
    for port in [s["port"] for s in plan["servers"]] + [plan["router"]["port"]]:
        assert call(box, port, API_KEY, prompt)[0] == 401, f"port {port} still takes the old key"
        status, reply = call(box, port, NEW_KEY, prompt)
        assert status == 200, f"port {port}: {status} {reply[:500]}"
