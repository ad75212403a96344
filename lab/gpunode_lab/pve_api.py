"""STAND-IN for the Proxmox VE REST API (pve-manager / pve-container), for the lab. NOT Proxmox.

A small HTTPS server on 127.0.0.1 serving the few endpoints `inv onboard` uses, at their
real paths under /api2/json, with real JSON shapes, backed by the lab's real LXC containers
(gpunode_lab.containers) and writing the PVE-format config that the pct stand-in prints:

    GET  /nodes                                   [{node, status, type, id}]
    GET  /nodes/{node}/lxc                        [{vmid, status, name, maxmem, cpus, type}]
    POST /nodes/{node}/lxc                        create -> UPID (task type vzcreate)
    GET  /nodes/{node}/lxc/{vmid}/config          config + digest (sha1 of the file)
    PUT  /nodes/{node}/lxc/{vmid}/config          update -> null (digest, delete)
    GET  /nodes/{node}/lxc/{vmid}/pending         [{key, value[, pending][, delete]}]
    GET  /nodes/{node}/lxc/{vmid}/status/current  {status, vmid, name, maxmem, ...}
    POST /nodes/{node}/lxc/{vmid}/status/start    -> UPID (vzstart)
    GET  /nodes/{node}/tasks/{upid}/status        {status: running|stopped, exitstatus, ...}
    GET  /nodes/{node}/tasks/{upid}/log           [{n, t}] (start, limit)

What it copies (pve-container src/PVE/API2/LXC.pm, LXC/Config.pm, LXC/Tools.pm; PVE::Tools):
- auth header `PVEAPIToken=user@realm!tokenid=secret`; a wrong one gets 401;
- UPID `UPID:node:%08X pid:%08X pstart:%08X starttime:type:id:user:`; tasks run in workers,
  status "running" then "stopped" with exitstatus "OK" or the error; the log ends in
  "TASK ERROR: <msg>" on failure;
- errors: a Perl die is HTTP 500 with the message as the status line's reason; parameter
  errors are 400 "Parameter verification failed." with {"errors": {param: msg}};
- create: "CT <vmid> already exists on node '<node>'" (check_vmid_unused); devN paths must
  be existing char/block devices ("Device <path> does not exist") at create, PUT and start;
- PUT: digest mismatch -> "detected modified configuration - file changed by other user?
  Try again."; on a running CT memory/swap are hot-plugged (cgroup limit) and hostname/cores
  are fast-plugged, like vmconfig_hotplug_pending;
- a node other than "lab" gets 500 "hostname lookup '<node>' failed - ..." as PVE's proxy does.

What it does not do: templates (every CT is an overlay of the lab's Debian base rootfs),
storage (rootfs is recorded, not allocated), networks (net0 is recorded; lab CTs have only
loopback), unprivileged id maps (lab CTs are privileged), read-write mount points (the lab
mounts every mpN read-only), devN passthrough into the CT (validated and recorded only, but see below),
and changes of mpN/devN on a running CT (refused with a 500 that says so, instead of
PVE's pending section). devN entries naming the lab's stand-in GPU host nodes
(gpunode_lab.gpuhost, /var/lib/gpunode-lab/gpuhost/dev/...) become bind mounts at /dev/<name>
in the CT (PVE makes a node of the same major:minor there), together with the stand-in
module's /proc/driver and the nvidia-smi recording; other devN are validated and recorded.
Raw lxc.* lines (classic passthrough, written by onboard over SSH) are kept in order after
the other keys as PVE does and returned as its `lxc: [[key, value], ...]`; their mount
entries of the stand-in host's nodes become the same binds, their cgroup lines are recorded.
The exact 401 reason text is not taken from PVE's source.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import ssl
import stat
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from gpunode_lab import containers, gpuhost, paths
from gpunode_lab.common import LabError, host_run, write_text

API_DIR = paths.STATE / "pve-api"
CERT = API_DIR / "pve-ssl.pem"
KEY = API_DIR / "pve-ssl.key"
INT_KEYS = {"memory", "swap", "cores", "unprivileged", "onboot", "cpuunits", "protection"}


class Die(Exception):
    def __init__(self, message: str, code: int = 500, errors: dict[str, str] | None = None):
        super().__init__(message)
        self.code, self.errors = code, errors


def ensure_cert() -> None:
    """A self-signed certificate for 127.0.0.1 (PVE makes its own CA; clients pin this file)."""
    if CERT.exists() and KEY.exists():
        return
    API_DIR.mkdir(parents=True, exist_ok=True)
    host_run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj",
              "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
              "-keyout", str(KEY), "-out", str(CERT)], what="making the PVE API stand-in's certificate")


# -- config files -------------------------------------------------------------------------------

def conf_path(vmid: str) -> Path:
    return paths.PVE_LXC / f"{vmid}.conf"


def read_conf(vmid: str) -> tuple[dict[str, str], str]:
    try:
        raw = conf_path(vmid).read_text()
    except FileNotFoundError:
        raise Die(f"Configuration file 'nodes/{paths.NODE}/lxc/{vmid}.conf' does not exist") from None
    conf: dict[str, str] = {}
    raw_lxc: list[str] = []
    for line in raw.splitlines():
        if line.startswith("["):
            break
        key, sep, value = line.partition(":")
        if sep and key.strip().startswith("lxc."):
            raw_lxc.append(f"{key.strip()}: {value.strip()}")  # kept in order, as PVE's {lxc} list
        elif sep and key.strip() and not line.startswith("#"):
            conf[key.strip()] = value.strip()
    if raw_lxc:
        conf["lxc"] = "\n".join(raw_lxc)
    return conf, hashlib.sha1(raw.encode()).hexdigest()


def render_conf(conf: dict[str, str]) -> str:
    # PVE writes raw lxc.* lines after the other keys (PVE::LXC::Config::write_pct_config).
    text = "".join(f"{k}: {conf[k]}\n" for k in sorted(conf) if k != "lxc")
    return text + "".join(f"{line}\n" for line in conf.get("lxc", "").splitlines())


def lab_container(vmid: str, conf: dict[str, str]) -> containers.Container:
    mounts = []
    for k in sorted(conf):
        if re.fullmatch(r"mp\d+", k):
            parts = conf[k].split(",")
            target = next((p[3:] for p in parts if p.startswith("mp=")), None)
            if target:
                mounts.append(containers.Mount(Path(parts[0]), target))
    devs = [conf[k].split(",")[0].removeprefix("path=") for k in sorted(conf) if re.fullmatch(r"dev\d+", k)]
    # Classic passthrough: lxc.mount.entry lines binding the stand-in host's nodes.
    devs += [line.split()[1] for line in conf.get("lxc", "").splitlines()
             if line.startswith("lxc.mount.entry:") and len(line.split()) > 2]
    mounts += [containers.Mount(host, target, kind) for host, target, kind in gpuhost.ct_mounts(devs)]
    return containers.Container(int(vmid), "onboard", conf.get("hostname", f"CT{vmid}"),
                                int(conf.get("memory", "512")), False, int(conf.get("cores", "1")), 0,
                                tuple(mounts))


def write_ct(vmid: str, conf: dict[str, str]) -> containers.Container:
    """LXC config through gpunode_lab.containers, then the API's own PVE config over its rendering."""
    ct = lab_container(vmid, conf)
    containers.ensure(ct)
    write_text(ct.pve_conf, render_conf(conf))
    return ct


def check_device(path: str) -> None:
    """PVE::LXC::Tools::get_device_mode_and_rdev."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise Die(f"Device {path} does not exist") from None
    if not (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)):
        raise Die(f"{path} is not a device")


def validate(param: dict[str, str]) -> None:
    errors = {}
    for key, value in param.items():
        if key in INT_KEYS and not value.lstrip("-").isdigit():
            errors[key] = f"type check ('integer') failed - got '{value}'"
        if re.fullmatch(r"mp\d+", key) and "mp=" not in value:
            errors[key] = "missing property - 'mp'"
    if errors:
        raise Die("Parameter verification failed.", 400, errors)
    for key, value in param.items():
        if re.fullmatch(r"dev\d+", key):
            check_device(value.split(",")[0].removeprefix("path="))


# -- tasks ------------------------------------------------------------------------------------

class Tasks:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tasks: dict[str, dict[str, Any]] = {}
        self.next_pid = os.getpid() * 16  # one fake worker pid per task keeps UPIDs unique
        with open("/proc/self/stat") as f:
            self.pstart = int(f.read().rsplit(")", 1)[1].split()[19])

    def start(self, ttype: str, vmid: str, user: str, work) -> str:
        with self.lock:
            self.next_pid += 1
            upid = (f"UPID:{paths.NODE}:{self.next_pid:08X}:{self.pstart:08X}:{int(time.time()):08X}:"
                    f"{ttype}:{vmid}:{user}:")
            task: dict[str, Any] = {"status": "running", "log": [], "type": ttype, "id": vmid, "user": user,
                    "pid": self.next_pid, "pstart": self.pstart, "starttime": int(time.time())}
            self.tasks[upid] = task

        def run() -> None:
            try:
                work(task["log"].append)
                exitstatus = "OK"
            except (Die, LabError) as exc:
                exitstatus = str(exc.message if isinstance(exc, LabError) else exc).strip()
                task["log"].append(f"TASK ERROR: {exitstatus}")
            except Exception as exc:  # noqa: BLE001 - a worker's die, reported like PVE's
                exitstatus = f"{type(exc).__name__}: {exc}"
                task["log"].append(f"TASK ERROR: {exitstatus}")
            else:
                task["log"].append("TASK OK")
            task["exitstatus"], task["status"] = exitstatus, "stopped"

        threading.Thread(target=run, name=f"pve-task-{ttype}-{vmid}", daemon=True).start()
        return upid

    def get(self, upid: str) -> dict[str, Any]:
        if upid not in self.tasks:
            raise Die(f"no such task '{upid}'", 500)
        return self.tasks[upid]


# -- the API ----------------------------------------------------------------------------------

class Api:
    def __init__(self, tokens: dict[str, str]) -> None:
        self.tokens = tokens  # "user@realm!tokenid" -> secret
        self.tasks = Tasks()
        self.ct_lock = threading.Lock()  # PVE's lock_config, simplified to one lock for all CTs
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # what clients asked, for tests to read

    def route(self, method: str, parts: list[str], param: dict[str, str], user: str) -> Any:
        if parts == ["nodes"] and method == "GET":
            return [{"node": paths.NODE, "status": "online", "type": "node", "id": f"node/{paths.NODE}"}]
        if len(parts) < 2 or parts[0] != "nodes":
            raise Die(f"Method '{method} /{'/'.join(parts)}' not implemented", 501)
        if parts[1] != paths.NODE:
            raise Die(f"hostname lookup '{parts[1]}' failed - failed to get address info for: {parts[1]}: "
                      "Name or service not known")
        rest = parts[2:]
        if rest == ["lxc"]:
            return self.list_cts() if method == "GET" else self.create(param, user)
        if len(rest) >= 2 and rest[0] == "tasks":
            task = self.tasks.get(rest[1])
            if rest[2:] == ["status"]:
                answer = {k: task[k] for k in ("status", "type", "id", "user", "pid", "pstart", "starttime")}
                answer.update(upid=rest[1], node=paths.NODE)
                if task["status"] == "stopped":
                    answer["exitstatus"] = task["exitstatus"]
                return answer
            if rest[2:] == ["log"]:
                start, limit = int(param.get("start", 0)), int(param.get("limit", 50))
                lines = list(task["log"])
                return [{"n": i + 1, "t": t} for i, t in enumerate(lines)][start:start + limit]
        if len(rest) >= 3 and rest[0] == "lxc" and rest[1].isdigit():
            vmid, sub = rest[1], "/".join(rest[2:])
            if (method, sub) == ("GET", "config"):
                conf, digest = read_conf(vmid)
                out: dict[str, Any] = {k: int(v) if k in INT_KEYS else v for k, v in conf.items() if k != "lxc"}
                if "lxc" in conf:
                    out["lxc"] = [line.split(": ", 1) for line in conf["lxc"].splitlines()]
                return {**out, "digest": digest}
            if (method, sub) == ("PUT", "config"):
                return self.update(vmid, param)
            if (method, sub) == ("GET", "pending"):
                conf, _ = read_conf(vmid)
                return [{"key": k, "value": int(v) if k in INT_KEYS else v} for k, v in sorted(conf.items())
                        if k != "lxc"]
            if (method, sub) == ("GET", "status/current"):
                return self.status(vmid)
            if (method, sub) == ("POST", "status/start"):
                return self.start(vmid, user)
        raise Die(f"Method '{method} /{'/'.join(parts)}' not implemented", 501)

    def list_cts(self) -> list[dict[str, Any]]:
        names = sorted((p.stem for p in paths.PVE_LXC.glob("*.conf") if p.stem.isdigit()), key=int)
        return [self.status(v) for v in names]

    def status(self, vmid: str) -> dict[str, Any]:
        conf, _ = read_conf(vmid)
        running = vmid in containers.active()
        return {"vmid": int(vmid), "status": "running" if running else "stopped", "type": "lxc",
                "name": conf.get("hostname", f"CT{vmid}"), "maxmem": int(conf.get("memory", "512")) * 1048576,
                "maxswap": int(conf.get("swap", "512")) * 1048576, "cpus": int(conf.get("cores", "1"))}

    def create(self, param: dict[str, str], user: str) -> str:
        vmid = param.pop("vmid", "")
        if not (vmid.isdigit() and 100 <= int(vmid) <= 999999999):
            raise Die("Parameter verification failed.", 400, {"vmid": "value does not look like a valid VMID"})
        template = param.pop("ostemplate", None)
        if not template:
            raise Die("Parameter verification failed.", 400,
                      {"ostemplate": "property is missing and it is not optional"})
        start = param.pop("start", "0") in ("1", "true")
        storage = param.pop("storage", "local")
        validate(param)
        with self.ct_lock:
            if conf_path(vmid).exists() or (paths.LXC_PATH / vmid).exists():
                raise Die(f"CT {vmid} already exists on node '{paths.NODE}'")
            conf = {"arch": "amd64", "ostype": "debian", "memory": "512", "swap": "512",
                    "hostname": f"CT{vmid}", "lock": "create"}
            rootfs = param.pop("rootfs", f"{storage}:4")
            store, _, size = rootfs.partition(":")
            conf.update(param)
            conf["rootfs"] = f"{store}:subvol-{vmid}-disk-0,size={size or 4}G"
            write_text(conf_path(vmid), render_conf(conf))  # claims the vmid, as create_and_lock_config does

        def work(log) -> None:
            try:
                log(f"lab: template {template} stands for the lab's Debian base rootfs")
                write_ct(vmid, {k: v for k, v in conf.items() if k != "lock"})
                log(f"Creating container {vmid} done")
            except BaseException:
                containers.remove(lab_container(vmid, conf))  # PVE destroys a half-made CT
                raise
            if start:
                self._start(vmid, log)

        return self.tasks.start("vzcreate", vmid, user, work)

    def update(self, vmid: str, param: dict[str, str]) -> None:
        digest = param.pop("digest", None)
        delete = [d for d in re.split(r"[,;\s]+", param.pop("delete", "")) if d]
        if not param and not delete:
            raise Die("no options specified")
        validate(param)
        with self.ct_lock:
            conf, current = read_conf(vmid)
            if digest and digest != current:
                raise Die("detected modified configuration - file changed by other user? Try again.")
            if conf.get("lock"):
                raise Die(f"CT is locked ({conf['lock']})")
            running = vmid in containers.active()
            cold = [k for k in [*param, *delete] if k not in ("memory", "swap", "hostname", "cores")
                    and (k in conf or not re.fullmatch(r"(mp|dev)\d+", k))]
            if running and cold:
                raise Die(f"gpunode lab stand-in: changing {', '.join(sorted(cold))} of running CT {vmid} is not "
                          "implemented (Proxmox would keep it pending until a restart)")
            for k in delete:
                if k in ("memory", "rootfs", "ostype"):
                    raise Die(f"unable to delete required option '{k}'")
                conf.pop(k, None)
            conf.update(param)
            ct = write_ct(vmid, conf)
            if running and ("memory" in param or "swap" in param):
                self._hotplug_memory(ct)
        return None

    def _hotplug_memory(self, ct: containers.Container) -> None:
        # On the limiting (outer) cgroup, as PVE does: lxc-cgroup would write the inner `ns` one.
        try:
            containers.memory_limit_file(ct.vmid).write_text(str(ct.memory_mb * 1048576))
        except OSError as exc:
            raise Die(f"hot-plugging memory of CT {ct.vmid}: {exc}") from None

    def start(self, vmid: str, user: str) -> str:
        read_conf(vmid)
        if vmid in containers.active():
            raise Die(f"CT {vmid} already running")
        return self.tasks.start("vzstart", vmid, user, lambda log: self._start(vmid, log))

    def _start(self, vmid: str, log) -> None:
        conf, _ = read_conf(vmid)
        for k in sorted(conf):
            if re.fullmatch(r"dev\d+", k):
                check_device(conf[k].split(",")[0].removeprefix("path="))
        # Raw lxc.* lines come from an edit of the file (classic passthrough): LXC's config
        # follows them at start, as PVE renders the whole LXC config from the file at every start.
        ct = write_ct(vmid, conf) if "lxc" in conf else lab_container(vmid, conf)
        containers.start(ct, progress=log)


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet; tests read answers
        pass

    def _answer(self, code: int, body: dict[str, Any], reason: str | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code, reason)
        self.send_header("Content-Type", "application/json;charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        param = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        param.update({k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()})
        user = self.server.api_user(self.headers.get("Authorization", ""))
        if user is None:
            self._answer(401, {"data": None}, "authentication failure")
            return
        if not url.path.startswith("/api2/json/"):
            self._answer(501, {"data": None}, "Unknown format")
            return
        parts = [unquote(p) for p in url.path[len("/api2/json/"):].strip("/").split("/")]
        self.server.api.requests.append((method, "/".join(parts), dict(param)))
        try:
            data = self.server.api.route(method, parts, param, user)
        except Die as exc:
            out: dict[str, Any] = {"data": None}
            if exc.errors:
                out["errors"] = exc.errors
            self._answer(exc.code, out, str(exc).strip().replace("\n", " "))
        except LabError as exc:
            self._answer(500, {"data": None}, exc.message.replace("\n", " "))
        else:
            self._answer(200, {"data": data})

    def do_GET(self) -> None:  # noqa: N802
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tokens: dict[str, str], port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.api = Api(tokens)
        ensure_cert()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(CERT), str(KEY))
        self.socket = ctx.wrap_socket(self.socket, server_side=True)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def api_user(self, header: str) -> str | None:
        m = re.fullmatch(r"PVEAPIToken=(?P<id>[^=\s]+)=(?P<secret>\S+)", header.strip())
        if m and self.api.tokens.get(m["id"]) == m["secret"]:
            return m["id"]
        return None


def serve_in_thread(tokens: dict[str, str], port: int = 0) -> Server:
    """Start the stand-in on 127.0.0.1 (port 0: any free port); stop it with .shutdown()."""
    server = Server(tokens, port)
    threading.Thread(target=server.serve_forever, name="pve-api-standin", daemon=True).start()
    return server


def main() -> int:
    import argparse
    import secrets as pysecrets

    parser = argparse.ArgumentParser(prog="python -m gpunode_lab.pve_api", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8006)
    parser.add_argument("--token-id", default="root@pam!gpunode")
    args = parser.parse_args()
    secret_file = API_DIR / "token-secret"
    if not secret_file.exists():
        write_text(secret_file, pysecrets.token_hex(16) + "\n", 0o600)
    server = Server({args.token_id: secret_file.read_text().strip()}, args.port)
    print(f"PVE API stand-in on https://127.0.0.1:{server.port}/api2/json (CA file {CERT}); token "
          f"{args.token_id}, secret in {secret_file}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
