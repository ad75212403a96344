"""`inv tune`'s test bed on the target: one server taken out of its routers and stopped, each candidate
run in its place as a transient unit on the same port, the server put back at the end. Sent as
`python -c` text by gpunode.tune.bed and run with the engine venv's Python: stdlib only, no gpunode
import. The router steps are steps/roll_server.py's own (argv[1] is its text, loaded as a module).

argv[2]: one JSON request {"action": out|start|memory|stop|back, ...}; stdin: the servers' key as
roll_server.py reads it. stdout: `@@...` lines; exit 3 with `@@failed WHY`.
"""

import json
import os
import subprocess
import sys
import time
import types

ROLL = types.ModuleType("roll_server")
exec(compile(sys.argv[1], "roll_server.py", "exec"), ROLL.__dict__)  # noqa: S102 (gpunode's own file)
ENV_DIR = "/run/gpunode-tune"


def say(line):
    print(line, flush=True)


def failed(why):
    say("@@failed " + why)
    sys.exit(3)


def out(headers, req):
    """The real server out of every router (drained first), then stopped: the others keep serving."""
    left = []
    try:
        for route in req["routes"]:
            worker = ROLL.leave(headers, route, 30)
            if worker:
                left.append([route["router"], worker])
    except ROLL.Failed as exc:  # a router that refuses the key, or keeps the server listed
        for router, worker in left:
            ROLL.join(headers, router, worker, 60)
        failed(str(exc))
    if left:
        ROLL.drain(headers, req["url"], req["drain_s"])
    r = ROLL.systemctl("stop", req["unit"])
    if r.returncode != 0:
        failed(f"systemctl stop {req['unit']}: {(r.stderr or r.stdout).strip()[-300:]}")
    say("@@left " + json.dumps(left))


def start(headers, req):
    """The candidate as a transient unit: its own env file, the real server's secrets file, its CPU cores."""
    unit = req["bed"]
    ROLL.systemctl("stop", unit)
    ROLL.systemctl("reset-failed", unit)
    os.makedirs(ENV_DIR, mode=0o700, exist_ok=True)
    env_file = os.path.join(ENV_DIR, unit + ".env")
    fd = os.open(env_file + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(req["env_text"])
    os.replace(env_file + ".tmp", env_file)
    props = ["Type=simple", f"WorkingDirectory={req['workdir']}", f"EnvironmentFile={env_file}",
             "KillMode=mixed", "TimeoutStopSec=60"]
    props += [f"EnvironmentFile={p}" for p in req.get("secrets", [])]
    if req.get("cpu_affinity"):
        props.append(f"CPUAffinity={req['cpu_affinity']}")
    argv = ["systemd-run", f"--unit={unit}", "--quiet", *(w for p in props for w in ("-p", p)), "--", *req["argv"]]
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        failed(f"systemd-run: {(r.stderr or r.stdout).strip()[-300:]}")
    server = {"unit": unit, "url": req["url"], "health": "/health", "model": req["model"]}
    try:
        ROLL.ready(headers, server, req["ready_s"])
    except ROLL.Failed as exc:
        failed(str(exc))
    say(f"@@started {time.monotonic() - t0:.1f}")


def memory(req):
    """The bed's memory: its GPUs' memory in use (nvidia-smi), or on CPU its unit's cgroup (MemoryCurrent)."""
    if req.get("gpus"):
        r = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                            "-i", req["gpus"]], capture_output=True, text=True, check=False)
        try:
            used = sum(int(x) for x in r.stdout.split()) * 2**20
        except ValueError:
            used = -1
        say(f"@@memory {used} GPU memory in use on GPU {req['gpus']} (nvidia-smi)")
        return
    got = ROLL.systemctl("show", "-P", "MemoryCurrent", req["bed"]).stdout.strip()
    say(f"@@memory {got if got.isdigit() else -1} the test bed unit's memory (systemd MemoryCurrent, its cgroup)")


def stop(req):
    ROLL.systemctl("stop", req["bed"])
    ROLL.systemctl("reset-failed", req["bed"])
    say("@@stopped")


def back(headers, req):
    """The candidate gone, the real server started again as its unit says, Ready, back in its routers."""
    stop(req)
    ROLL.systemctl("reset-failed", req["unit"])
    r = ROLL.systemctl("start", req["unit"])
    if r.returncode != 0:
        failed(f"systemctl start {req['unit']}: {(r.stderr or r.stdout).strip()[-300:]}")
    try:
        ROLL.ready(headers, {"unit": req["unit"], "url": req["url"], "health": "/health", "model": req["model"]},
                   req["ready_s"])
        for router, worker in req.get("left", []):
            ROLL.join(headers, router, worker, req["ready_s"])
    except ROLL.Failed as exc:
        failed(str(exc))
    say("@@back")


def main():
    req = json.loads(sys.argv[2])
    headers = ROLL.read_keys(sys.stdin.read())
    action = req["action"]
    if action == "out":
        out(headers, req)
    elif action == "start":
        start(headers, req)
    elif action == "memory":
        memory(req)
    elif action == "stop":
        stop(req)
    elif action == "back":
        back(headers, req)
    else:
        failed(f"unknown action {action}")


main()
