"""Keys on every hop of a fleet (issue 44): clients -> fleet router -> each member's servers.

sglang-router 0.3.2 (the pinned router; read in its wheel and run against a server that checks
keys, docs/fleet.md 'Keys'):
- `--api-key K` makes the router answer only `Authorization: Bearer K`, on the inference routes
  and on its worker API (`/workers`) alike; `/health` and `/readiness` stay open;
- `POST /workers {"url": U, "api_key": W}` registers a worker with its own key: the router then
  sends `Bearer W` to U (registration, health checks and every forwarded request), never the
  client's key; `PUT /workers/{id} {"api_key": W2}` changes it in place; `GET /workers` does
  not list the keys.

So the client key goes where the per-target router's key goes (secretfiles.router_home: a 0600
env file, moved into sys.argv inside the process), and the workers' keys into one 0600 JSON file
that only root reads: the launch below registers every worker from it each time the router
starts (a restart or a reboot must not bring back workers without their keys), and
steps/fleet.FleetWorkers reads it when a node joins or a key changes. No key is in an argv,
a unit file, the env file or the workers map `inv status` reads.
"""

from __future__ import annotations

import json

from gpunode.fleet.endpoint import FLEET_UNIT, Worker
from gpunode.steps.files import File
from gpunode.steps.secretfiles import ROUTER_KEY_ENV, SECRET_DIR, Home, secret_file
from gpunode.steps.trees import Absent
from gpunode.steps.unitfmt import env_text

KEYS_FILE = "/etc/gpunode/fleet-router.keys.json"            # {"client": K, "workers": {url: key}}
REGISTERED_FILE = "/etc/gpunode/fleet-router.registered.json"  # {url: sha256(key)} the router was given
SECRETS_NAME = "fleet-router"  # /etc/gpunode/fleet-router.secrets.env (secretfiles.router_home)


def keys_text(client: str, workers: list[Worker]) -> str:
    return json.dumps({"client": client, "workers": {w.url: w.key for w in workers}}, sort_keys=True) + "\n"


LAUNCH_FILE = "/etc/gpunode/fleet-router-launch.py"  # no secret in it: 0644


def launch_text(module: str, env: str, base: str) -> str:
    """The fleet router's program when it has keys (`python LAUNCH_FILE args...`): the client key
    from the environment into sys.argv inside the process (as secretfiles.router_launch does), a
    daemon thread that registers every worker of KEYS_FILE with its key once the router answers
    at `base`, then the router itself. stdlib only."""
    return f"""# gpunode: the fleet router with keys (gpunode/fleet/keys.py); no key is in this file or in argv
import json, os, runpy, sys, threading, time, urllib.request

KEY = os.environ.pop({env!r})
BASE = {base!r}


def register():
    auth = {{"Authorization": "Bearer " + KEY, "Content-Type": "application/json"}}
    with open({KEYS_FILE!r}) as f:
        workers = json.load(f)["workers"]
    for _ in range(1200):
        try:
            urllib.request.urlopen(urllib.request.Request(BASE + "/workers", headers=auth), timeout=3).read()
            break
        except OSError:
            time.sleep(0.5)
    for url, key in workers.items():
        body = json.dumps({{"url": url, "api_key": key}} if key else {{"url": url}}).encode()
        try:
            urllib.request.urlopen(urllib.request.Request(BASE + "/workers", data=body, headers=auth,
                                                          method="POST"), timeout=5).read()
        except OSError as e:
            print(f"gpunode: registering {{url}} with the router failed: {{e}}", file=sys.stderr, flush=True)


sys.argv[1:1] = ["--api-key", KEY]
threading.Thread(target=register, daemon=True).start()
runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
"""


def files(client: str, workers: list[Worker], module: str, base: str) -> tuple[Home, list[File]]:
    """The fleet router's key files: its Home (the unit's second EnvironmentFile=) and the files
    beside it; none without a client key (stale() removes them then)."""
    if not client:
        return Home(), []
    unit = FLEET_UNIT
    env = secret_file(f"{SECRET_DIR}/{SECRETS_NAME}.secrets.env", env_text({ROUTER_KEY_ENV: client}), unit)
    # no notify: a node that joins or a key that changes reaches the running router over its API
    keyed = File(path=KEYS_FILE, content=keys_text(client, workers), mode=0o600, owner="root:root", sensitive=True)
    launch = File(path=LAUNCH_FILE, content=launch_text(module, ROUTER_KEY_ENV, base), mode=0o644,
                  notify=(f"restart:{unit}",))
    return Home(env, env_file=env.path), [env, keyed, launch]


def stale(home: Home) -> list[Absent]:
    """Without a client key, none of the fleet router's key files stays on disk."""
    if home.file:
        return []
    return [Absent(p) for p in (f"{SECRET_DIR}/{SECRETS_NAME}.secrets.env", KEYS_FILE, REGISTERED_FILE, LAUNCH_FILE)]
