"""The fleet router's workers are exactly the fleet's servers, changed over its HTTP API.

sglang-router 0.3.2 (the pinned router) manages workers at run time: `POST /workers`
{"url": ...} queues an addition (202), `GET /workers` lists them with `id`, `url` and
`is_healthy`, `DELETE /workers/{id}` queues a removal (202). Source: sgl-project/sglang
docs/advanced_features/sgl_model_gateway.md "Worker Management APIs", and the wheel itself,
run in the lab (docs/fleet.md). A worker that stops answering stays listed with
is_healthy false and is healthy again once it answers: no re-add is needed.

Adding over the API, not by a restart with a new --worker-urls, is what lets a node join
without the router (and every request in flight through it) restarting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar

from gpunode import shell
from gpunode.steps.base import Change, Command, NoChange, Outcome, Probe, Step

REGISTERED = "/etc/gpunode/fleet-router.registered.json"  # fleet/keys.py REGISTERED_FILE

# Both run with the router venv's Python on the router's target, stdlib only. With keys
# (fleet/keys.py), the keys file (0600, root's) gives the router's key for its worker API and
# each worker's key; REGISTERED holds sha256(key) per worker the router was last given, so a
# changed key is seen (GET /workers does not list keys) and changed in place (PUT).
_KEYS = r"""
import hashlib, json, os, sys, urllib.request
def keys(path):
    if not path or not os.path.exists(path):
        return "", {}
    with open(path) as f:
        doc = json.load(f)
    return doc["client"], doc["workers"]
def digest(key):
    return hashlib.sha256(key.encode()).hexdigest() if key else ""
def registered(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}
def headers(client):
    h = {"Content-Type": "application/json"}
    if client:
        h["Authorization"] = "Bearer " + client
    return h
"""
_PROBE = _KEYS + r"""
base, path, done = sys.argv[1], sys.argv[2], sys.argv[3]
client, want = keys(path)
try:
    with urllib.request.urlopen(urllib.request.Request(base + "/workers", headers=headers(client)), timeout=3) as r:
        doc = json.loads(r.read() or b"null")
except (OSError, ValueError):
    sys.exit(0)
before = registered(done)
doc["gpunode_stale"] = sorted(u for u, k in want.items() if k and before.get(u) != digest(k))
print(json.dumps(doc))
"""
_APPLY = _KEYS + r"""
import time
base, grace, path, done, want = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
client, wkeys = keys(path)
deadline = time.monotonic() + grace
def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers(client))
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read() or b"null")
def listed():
    while True:
        try:
            return {w["url"]: w for w in call("GET", "/workers")["workers"]}
        except OSError as e:
            if time.monotonic() > deadline:
                sys.exit(f"the fleet router at {base} does not answer: {e}")
            time.sleep(0.5)
have = listed()
before = registered(done)
for url in want:
    key = wkeys.get(url, "")
    if url not in have:
        call("POST", "/workers", {"url": url, "api_key": key} if key else {"url": url})
        print(f"added {url}", flush=True)
    elif key and before.get(url) != digest(key):
        call("PUT", "/workers/" + have[url]["id"], {"api_key": key}); print(f"new key for {url}", flush=True)
for url, w in have.items():
    if url not in want:
        call("DELETE", "/workers/" + w["id"]); print(f"removed {url}", flush=True)
while True:
    have = listed()
    bad = sorted(set(want) ^ set(have)) + sorted(u for u in want if u in have and not have[u].get("is_healthy"))
    if not bad:
        break
    if time.monotonic() > deadline:
        sys.exit(f"after {grace:.0f} s the fleet router still differs at: {', '.join(bad)}")
    time.sleep(0.5)
if path:
    fd = os.open(done + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({u: digest(wkeys.get(u, "")) for u in want}, f)
    os.replace(done + ".tmp", done)
print(f"{len(want)} workers, all healthy", flush=True)
"""


def stale(output: str) -> list[str]:
    """The workers whose key changed since the router was given one (the probe's gpunode_stale)."""
    try:
        data = json.loads(output or "null")
    except ValueError:
        return []
    found = data.get("gpunode_stale") if isinstance(data, dict) else None
    return [u for u in found if isinstance(u, str)] if isinstance(found, list) else []


def listed(output: str) -> dict[str, bool] | None:
    """GET /workers's answer -> {url: healthy}; None when the router did not answer with a list."""
    try:
        data = json.loads(output or "null")
    except ValueError:
        return None
    rows = data.get("workers") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return None
    return {w["url"]: bool(w.get("is_healthy")) for w in rows if isinstance(w, dict) and isinstance(w.get("url"), str)}


@dataclass
class FleetWorkers(Step):
    """The router at `url` lists exactly `workers`, each healthy, within grace_s.

    + url: the router as its own target reaches it, e.g. http://10.0.0.3:30100
    + python: the router venv's Python (the apply's HTTP client)
    + keys_file: with keys (fleet/keys.py), the 0600 file of the router's and the workers' keys
    """

    changes_facts: ClassVar[bool] = False

    url: str = ""
    python: str = ""
    workers: list[str] = field(default_factory=list)
    grace_s: int = 300
    keys_file: str = ""

    @property
    def id(self) -> str:
        return f"fleet-workers:{self.url}"

    def probe(self) -> list[str]:
        if self.keys_file:
            return [self.python, "-c", _PROBE, self.url, self.keys_file, REGISTERED]
        return ["curl", "-s", "--max-time", "3", f"{self.url}/workers"]

    def check(self, probe: Probe) -> Outcome:
        have = listed(probe.output) if probe.ok else None
        if have is None:
            return Change(f"the router does not answer yet: register {len(self.workers)} workers once it does")
        add = [u for u in self.workers if u not in have]
        drop = sorted(u for u in have if u not in self.workers)
        sick = [u for u in self.workers if u in have and not have[u]]
        rekey = [u for u in stale(probe.output) if u in have]
        if not (add or drop or sick or rekey):
            return NoChange(f"the router lists all {len(self.workers)} workers, each healthy")
        parts = [f"add {', '.join(add)}" if add else "", f"remove {', '.join(drop)}" if drop else "",
                 f"give {', '.join(rekey)} its new key" if rekey else "",
                 f"wait for {', '.join(sick)} to be healthy" if sick else ""]
        return Change("; ".join(p for p in parts if p))

    def commands(self) -> list[Command]:
        return [Command((self.python, "-c", _APPLY, self.url, str(self.grace_s), self.keys_file,
                         REGISTERED if self.keys_file else "", *self.workers),
                        f"registering {len(self.workers)} workers with the fleet router", timeout=self.grace_s + 30,
                        failure="the fleet router's workers did not become the fleet's servers",
                        hint="inv status shows the router's view; each worker's /health must answer from the "
                        "router's target", evidence=tuple(shell.sh("journalctl -u \"$1\" -n 20 --no-pager -o cat",
                                                                   "gpunode-fleet-router.service")))]
