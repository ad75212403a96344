"""One server replaced behind its routers, on the target (issue 39); back to the last good generation if
the new one does not come up. Sent as `python -c` text by gpunode.steps.rolling and run with the engine
venv's Python: stdlib only, no gpunode import.

argv[1]: one JSON object (gpunode.steps.rolling.RollingRestart.request); stdin: the servers' API key, or
nothing, or (when a router has keys of its own: a fleet router) a JSON object {"key": the servers' key,
"routers": {router URL: {"key": its clients' key, "workers": {worker URL: the key it sends that worker}}}}.
stdout: `@@...` lines gpunode reads, the last one of `@@rolled UNIT`, `@@rolledback WHY` (exit 5) or
`@@failed WHY` (exit 3: no generation to go back to).

For each server: every router that lists it drops it (sglang-router's `DELETE /workers/{id}`, polled
until `GET /workers` no longer lists it), its in-flight requests finish (the engine's own /metrics
gauges reach 0, bounded by drain_s), systemd restarts it, it answers /health and one real completion
(the canary), and each router takes it back (`POST /workers`, polled until listed healthy). A server
that crashes while starting (failed, or restarted twice by systemd) or stays silent past ready_s
fails the roll: the files of the generation that last passed Ready are copied back, and that server
and every one this rollout already replaced go through the same steps on them.
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

# Requests a server is still working on: vLLM's and SGLang's own Prometheus gauges.
IN_FLIGHT = ("vllm:num_requests_running", "vllm:num_requests_waiting",
             "sglang:num_running_reqs", "sglang:num_queue_reqs")


class Failed(Exception):
    pass


class Refused(Failed):
    """A router refused gpunode's key before anything was restarted: nothing to go back from."""


# A router's own headers (its clients' key) and the key each worker is registered with: read from
# stdin by main(); a router without keys of its own is asked with the servers' headers.
ROUTERS: dict = {}


def router_headers(headers, router):
    key = (ROUTERS.get(router) or {}).get("key") or ""
    return {**headers, "Authorization": "Bearer " + key} if key else headers


def worker_key(router, worker):
    return ((ROUTERS.get(router) or {}).get("workers") or {}).get(worker) or ""


def admit(headers, router, worker):
    """POST /workers: with the key the router sends that worker, as the fleet router registered it
    (fleet/keys.py): without it, every request the router forwards there would be refused."""
    key = worker_key(router, worker)
    body = {"url": worker, "api_key": key} if key else {"url": worker}
    http(router_headers(headers, router), "POST", router + "/workers", body)


def say(line):
    print(line, flush=True)


def http(headers, method, url, body=None, timeout=5.0):
    """(status, body bytes); (0, b"") when nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, ValueError):
        return 0, b""


def workers(headers, router, strict=False):
    """{url: worker} as the router lists them; None when the router does not answer with a list.
    strict: a router that answers but refuses the key (401, 403) is Failed, not "does not answer": the
    server must not be restarted while that router still sends it requests."""
    status, body = http(router_headers(headers, router), "GET", router + "/workers")
    if strict and status in (401, 403):
        raise Refused(f"the router {router} refuses the key gpunode asks its worker API with (HTTP {status}): "
                     "was fleet_router_api_key changed in the same run? The fleet router takes a new clients' "
                     "key only once its own target's run restarts it (docs/fleet.md, Rotation); nothing was "
                     "restarted")
    try:
        rows = json.loads(body)["workers"] if status == 200 else None
    except (ValueError, KeyError, TypeError):
        rows = None
    if not isinstance(rows, list):
        return None
    return {w["url"]: w for w in rows if isinstance(w, dict) and isinstance(w.get("url"), str)}


def listed_as(have, route):
    """The URL the router lists this server under: the route's own, or (a route that names only the
    server's port, as `inv rollback` knows it from the unit files) the one listed with that port."""
    if route.get("worker"):
        return route["worker"]
    port = str(route.get("port", ""))
    return next((u for u in have if urllib.parse.urlsplit(u).port == int(port)), "") if port else ""


def leave(headers, route, wait_s):
    """The router stops sending the worker new requests. The URL it lists (or would list) the server
    under, to take it back under once it is Ready; "" when the router does not answer (not started yet:
    nothing to take out or back)."""
    # Strict only for a router with keys of its own (a fleet router): it keeps sending this server requests
    # whatever this run does. The node's own router is asked with the servers' key; when that key changed in
    # this run it refuses the new one until this run restarts it, which it does after the servers: as before.
    have = workers(headers, route["router"], strict=route["router"] in ROUTERS)
    if have is None:
        say(f"@@note the router {route['router']} does not answer: nothing to take this server out of")
        return ""
    worker = listed_as(have, route)
    if not worker or worker not in have:  # out already (a rollback of the server that just failed)
        return worker or f"http://127.0.0.1:{route.get('port', '')}"
    wid = have[worker].get("id") or worker
    http(router_headers(headers, route["router"]), "DELETE",
         route["router"] + "/workers/" + urllib.parse.quote(str(wid), safe=""))
    deadline = time.monotonic() + wait_s
    while worker in (workers(headers, route["router"]) or {}):
        if time.monotonic() > deadline:
            raise Failed(f"the router {route['router']} still lists {worker} after {wait_s:.0f} s")
        time.sleep(0.2)
    say(f"@@out {worker} of {route['router']}")
    return worker


def join(headers, router, worker, wait_s):
    """The router lists the worker healthy again (its own health check admitted it)."""
    deadline = time.monotonic() + wait_s
    while True:
        have = workers(headers, router)
        if have is not None and worker not in have:
            admit(headers, router, worker)
        elif have is not None and have[worker].get("is_healthy", True):
            say(f"@@in {worker} of {router}")
            return
        if time.monotonic() > deadline:
            raise Failed(f"the router {router} did not take {worker} back within {wait_s:.0f} s")
        time.sleep(0.3)


def pending(text):
    """Requests running or queued, summed over the engine's own gauges in a /metrics text; None when it has none."""
    total, seen = 0.0, False
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in IN_FLIGHT:
            try:
                total += float(line.rsplit(" ", 1)[1])
                seen = True
            except ValueError:
                continue
    return total if seen else None


def in_flight(headers, url):
    """Requests the server runs or queues, from its /metrics; None where that cannot be read."""
    status, body = http(headers, "GET", url + "/metrics")
    return pending(body.decode(errors="replace")) if status == 200 else None


def drain(headers, url, drain_s):
    """Wait (bounded) until the server has no request left: two readings of 0 in a row."""
    t0 = time.monotonic()
    zeros = 0
    while time.monotonic() - t0 < drain_s:
        n = in_flight(headers, url)
        if n is None:
            say(f"@@drained {url}: its /metrics does not say (waited {time.monotonic() - t0:.1f} s)")
            return
        zeros = zeros + 1 if n == 0 else 0
        if zeros >= 2:
            say(f"@@drained {url} in {time.monotonic() - t0:.1f} s")
            return
        time.sleep(0.2)
    say(f"@@drained {url}: requests still in flight after {drain_s:.0f} s (drain_s), stopping it anyway")


def systemctl(*args):
    return subprocess.run(["systemctl", *args], capture_output=True, text=True, check=False)


def journal(unit):
    out = subprocess.run(["journalctl", "-u", unit, "-n", "8", "--no-pager", "-o", "cat"],
                         capture_output=True, text=True, check=False).stdout
    return " | ".join(x.strip() for x in out.splitlines() if x.strip())[-600:]


def ready(headers, server, wait_s):
    """/health answers 200, then one real completion; Failed with the journal's last lines otherwise."""
    t0 = time.monotonic()
    while True:
        status, _ = http(headers, "GET", server["url"] + server["health"], timeout=5)
        if status == 200:
            break
        failed = systemctl("is-failed", "--quiet", server["unit"]).returncode == 0
        restarts = systemctl("show", "-P", "NRestarts", server["unit"]).stdout.strip()
        if failed or (restarts.isdigit() and int(restarts) >= 2):
            raise Failed(f"{server['unit']} failed while starting: {journal(server['unit'])}")
        if time.monotonic() - t0 > wait_s:
            raise Failed(f"{server['unit']} did not answer its health check within {wait_s:.0f} s")
        time.sleep(1)
    body = {"model": server["model"], "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}
    status, answer = http(headers, "POST", server["url"] + "/v1/completions", body, timeout=120)
    try:
        json.loads(answer)["choices"][0]["text"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise Failed(f"{server['unit']} answers /health but not a completion (HTTP {status}): "
                     f"{answer[:200]!r}") from None
    say(f"@@ready {server['unit']} in {time.monotonic() - t0:.1f} s (health and canary)")


def roll(headers, server, req):
    t0 = time.monotonic()
    left = [(r["router"], w) for r in server["routes"] if (w := leave(headers, r, 30))]
    if left:
        drain(headers, server["url"], req["drain_s"])
    # A rollout and its rollback start a unit more often than a crash loop would (the new one, systemd's
    # restart of it, the old one again): its start limit (StartLimitBurst) counts deliberate starts too.
    systemctl("reset-failed", server["unit"])
    r = systemctl("restart", server["unit"])
    if r.returncode != 0:
        raise Failed(f"systemctl restart {server['unit']} failed: {(r.stderr or r.stdout).strip()[-300:]}")
    ready(headers, server, req["ready_s"])
    for router, worker in left:
        join(headers, router, worker, req["ready_s"])
    say(f"@@replaced {server['unit']} in {time.monotonic() - t0:.1f} s")


def read_lines(path):
    try:
        with open(path) as f:
            return [x.strip() for x in f if x.strip()]
    except OSError:
        return []


def put(path, data, mode):
    tmp = f"{path}.gpunode-rollback"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def restore(gen):
    """The generation's files back in place (each saved under files/ by its path), then daemon-reload."""
    saved = os.path.join(gen, "files")
    for path in read_lines(os.path.join(gen, "files.list")):
        src = os.path.join(saved, path.lstrip("/"))
        with open(src, "rb") as f:
            put(path, f.read(), os.stat(src).st_mode & 0o7777)
    systemctl("daemon-reload")


def rollback(headers, req, why):
    root = req["generations"]
    current = (read_lines(os.path.join(root, "current")) or [""])[0]
    gen = os.path.join(root, current) if current else ""
    if not gen or not os.path.isfile(os.path.join(gen, "files.list")):
        say(f"@@failed {why} (no earlier generation to go back to)")
        sys.exit(3)
    restore(gen)
    by_unit = {s["unit"]: s for s in req["servers"]}
    back = [req["unit"], *(u for u in read_lines(os.path.join(root, "rolled")) if u != req["unit"])]
    try:
        for unit in back:
            if unit in by_unit:
                roll(headers, by_unit[unit], req)
    except Failed as again:
        say(f"@@failed {why}; going back to generation {current} failed too: {again}")
        sys.exit(3)
    os.makedirs(root, exist_ok=True)
    put(os.path.join(root, "rolled"), b"", 0o644)
    say(f"@@rolledback to generation {current}: {why}")
    sys.exit(5)


def record(root, name):
    """`name` is the live generation again (inv rollback): current, the log, no rollout in flight."""
    put(os.path.join(root, "current"), (name + "\n").encode(), 0o644)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(os.path.join(root, "log"), "a") as f:
        f.write(f"{stamp} {name}\n")
    put(os.path.join(root, "rolled"), b"", 0o644)


def started_before(started_us, mtimes, wall, mono):
    """A process started at `started_us` (CLOCK_MONOTONIC, microseconds, as systemd's
    ExecMainStartTimestampMonotonic; 0: not running) before a file was last written (mtimes: wall
    clock), with the clocks read together as `wall` and `mono`."""
    if not started_us or not mtimes:
        return False
    return max(mtimes) - (wall - mono) > started_us / 1e6


def runs_older(unit, paths):
    """The unit's process started before one of its files was last written: it runs what they no longer say."""
    got = systemctl("show", "-P", "ExecMainStartTimestampMonotonic", unit).stdout.strip()
    mtimes = []
    for path in paths:
        try:
            mtimes.append(os.stat(path).st_mtime)
        except OSError:
            continue
    return started_before(int(got) if got.isdigit() else 0, mtimes, time.time(), time.monotonic())


def back_to(headers, req):
    """inv rollback: the files of generation req["to"] back in place; each server whose files that
    changed replaced as in a rollout, the router (when its files changed) restarted last."""
    root, name = req["generations"], req["to"]
    gen = os.path.join(root, name)
    paths = read_lines(os.path.join(gen, "files.list"))
    if not paths:
        say(f"@@failed there is no generation {name} in {root}")
        sys.exit(3)

    def content(path):
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return None

    before = {p: content(p) for p in paths}
    # Read before the files are written again: a server a killed `inv rollback` left running what its
    # files no longer say (they were put back, it was not replaced yet) is replaced by this one.
    behind = {s["unit"] for s in req["servers"] if runs_older(s["unit"], s.get("files", ()))}
    restore(gen)
    changed = {p for p in paths if content(p) != before[p]}
    try:
        for server in req["servers"]:
            if changed & set(server.get("files", ())) or server["unit"] in behind:
                roll(headers, server, req)
    except Failed as exc:
        say(f"@@failed going back to generation {name}: {exc}")
        sys.exit(3)
    router = req.get("router") or {}
    if changed & set(router.get("files", ())):
        r = systemctl("restart", router["unit"])
        if r.returncode != 0:
            say(f"@@failed systemctl restart {router['unit']}: {(r.stderr or r.stdout).strip()[-300:]}")
            sys.exit(3)
    record(root, name)
    say(f"@@back generation {name}: {len(changed)} files changed")


def read_keys(text):
    """stdin -> (the servers' headers); the routers' own keys go to ROUTERS."""
    text = text.strip()
    key = text
    if text.startswith("{"):
        doc = json.loads(text)
        key = str(doc.get("key") or "")
        ROUTERS.update(doc.get("routers") or {})
    return {"Content-Type": "application/json", **({"Authorization": "Bearer " + key} if key else {})}


def main():
    req = json.loads(sys.argv[1])
    headers = read_keys(sys.stdin.read())
    if req.get("to"):
        back_to(headers, req)
        return
    server = next(s for s in req["servers"] if s["unit"] == req["unit"])
    if systemctl("is-active", "--quiet", server["unit"]).returncode != 0:
        # Not serving (a first install, a stopped server): nothing to take out or drain, nothing to go
        # back to; started here, and the ready role waits for it with the others.
        r = systemctl("restart", server["unit"])
        if r.returncode != 0:
            say(f"@@failed systemctl restart {server['unit']}: {(r.stderr or r.stdout).strip()[-300:]}")
            sys.exit(3)
        for route in server["routes"]:  # one a killed run took out: back on the list, admitted once healthy
            have = workers(headers, route["router"])
            worker = listed_as(have, route) if have is not None else ""
            if have is not None and worker and worker not in have:
                admit(headers, route["router"], worker)
        say(f"@@started {server['unit']}")
        return
    try:
        roll(headers, server, req)
    except Refused as exc:  # the server was not touched: it keeps running, its restart stays pending
        say(f"@@failed {exc}")
        sys.exit(3)
    except Failed as exc:
        rollback(headers, req, str(exc))
    os.makedirs(req["generations"], exist_ok=True)
    with open(os.path.join(req["generations"], "rolled"), "a") as f:
        f.write(req["unit"] + "\n")
    say(f"@@rolled {req['unit']}")


if __name__ == "__main__":
    main()
