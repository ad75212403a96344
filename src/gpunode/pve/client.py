"""Connection to the Proxmox VE API through proxmoxer, with an API token.

Two defaults of proxmoxer are wrong for us: its HTTP timeout is 5 s (container creation
on a loaded node takes longer: proxmoxer #45, community.general #6843), and its errors
are bare ResourceExceptions. Every call here has a real timeout and fails as a PveError
that names the node, the path and what to do.

Settings come from the inventory host's `pve_api` variable (see docs/onboard.md):

    pve_api:
      address: kpro6.lan          # default: the host's address
      port: 8006
      token_id: root@pam!gpunode  # user@realm!tokenid
      token_secret: ...           # or token_secret_file: /path, or $GPUNODE_PVE_TOKEN_SECRET
      verify_ssl: true            # true, false, or a CA bundle file
      timeout: 60
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpunode import secrets, userfiles
from gpunode.errors import PveError

TOKEN_ID = re.compile(r"^(?P<user>[^@!\s]+@[^@!\s]+)!(?P<name>[A-Za-z][A-Za-z0-9._-]*)$")
SECRET_ENV = "GPUNODE_PVE_TOKEN_SECRET"


@dataclass(frozen=True)
class PveSettings:
    address: str
    user: str           # user@realm
    token_name: str     # the part after "!"
    token_secret: str
    port: int = 8006
    verify_ssl: bool | str = True  # a str is a CA bundle file
    timeout: float = 60.0

    @property
    def url(self) -> str:
        return f"https://{self.address}:{self.port}/api2/json"

    @property
    def token_id(self) -> str:
        return f"{self.user}!{self.token_name}"


def settings_from_vars(host_name: str, host_address: str, variables: dict[str, Any]) -> PveSettings:
    """PveSettings from a host's merged variables (`pve_api`), with errors naming the key."""
    api = variables.get("pve_api")
    where = f"pve_api of host {host_name}"
    if not isinstance(api, dict):
        raise PveError(f"host {host_name} has no `pve_api` settings in the inventory",
                       hint="add pve_api: {token_id: root@pam!gpunode, token_secret_file: ...} under the host's "
                       "vars (see docs/onboard.md); create a token with `pveum user token add root@pam gpunode "
                       "--privsep 0`", target=host_name)
    token_id = str(api.get("token_id", ""))
    m = TOKEN_ID.match(token_id)
    if not m:
        raise PveError(f"{where}: token_id {token_id!r} is not user@realm!tokenid",
                       hint="e.g. token_id: root@pam!gpunode", target=host_name)
    secret = api.get("token_secret")
    if secret is None and api.get("token_secret_file"):
        path = Path(str(api["token_secret_file"])).expanduser()
        try:
            secret = userfiles.read_text(path, what="token_secret_file", error=PveError).strip()
        except PveError as exc:
            raise PveError(f"{where}: {exc.message}", hint="write the token's secret (a UUID) into that file, mode 600",
                           target=host_name) from None
    if secret is None:
        secret = os.environ.get(SECRET_ENV)
    if not secret:
        raise PveError(f"{where}: no token secret (token_secret, token_secret_file or ${SECRET_ENV})",
                       hint="the secret is shown once by `pveum user token add`", target=host_name)
    secrets.register(secret)
    verify = api.get("verify_ssl", True)
    if isinstance(verify, str) and verify.lower() in ("true", "false"):
        verify = verify.lower() == "true"
    if isinstance(verify, str):
        verify = str(Path(verify).expanduser())
        if not Path(verify).is_file():
            raise PveError(f"{where}: verify_ssl names {verify}, which is not a file",
                           hint="give true, false, or the CA bundle that signed the node's certificate "
                           "(/etc/pve/pve-root-ca.pem on the node)", target=host_name)
    try:
        port = int(api.get("port", 8006))
        timeout = float(api.get("timeout", 60))
    except (TypeError, ValueError):
        raise PveError(f"{where}: port and timeout must be numbers", target=host_name,
                       hint="e.g. port: 8006, timeout: 60") from None
    return PveSettings(address=str(api.get("address", host_address)), user=m["user"], token_name=m["name"],
                       token_secret=str(secret), port=port, verify_ssl=verify, timeout=timeout)


class PveClient:
    """A thin wrapper over proxmoxer.ProxmoxAPI: call(method, path, **params) -> data."""

    def __init__(self, settings: PveSettings) -> None:
        from proxmoxer import ProxmoxAPI  # imported here: only onboard needs proxmoxer

        self.settings = settings
        self.api = ProxmoxAPI(settings.address, port=settings.port, user=settings.user,
                              token_name=settings.token_name, token_value=settings.token_secret,
                              verify_ssl=settings.verify_ssl, timeout=settings.timeout, backend="https")
        self.calls = 0  # how many requests this client made (tests and --check honesty)

    def call(self, method: str, path: str, **params: Any) -> Any:
        """One API request; path is relative to /api2/json, e.g. "nodes/lab/lxc"."""
        import requests
        from proxmoxer.core import ResourceException

        self.calls += 1
        resource = self.api(path.strip("/"))
        where = f"{method} {self.settings.url}/{path.strip('/')}"
        try:
            return getattr(resource, method.lower())(**params)
        except ResourceException as exc:
            raise _api_error(exc, where, self.settings) from None
        except requests.exceptions.SSLError as exc:
            raise PveError(f"TLS verification of {self.settings.url} failed", evidence=str(exc)[-500:],
                           hint="set pve_api.verify_ssl to the node's CA file (/etc/pve/pve-root-ca.pem), "
                           "or false to skip verification") from None
        except requests.exceptions.Timeout:
            raise PveError(f"{where}: no answer within {self.settings.timeout:.0f} s",
                           hint="the node may be loaded; raise pve_api.timeout") from None
        except requests.exceptions.ConnectionError as exc:
            raise PveError(f"cannot reach the Proxmox API at {self.settings.url}", evidence=str(exc)[-500:],
                           hint="check pve_api.address/port and that pveproxy runs on the node") from None

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, **params)

    def node_names(self) -> list[str]:
        return sorted(str(n["node"]) for n in self.get("nodes"))

    def check_node(self, node: str) -> None:
        names = self.node_names()
        if node not in names:
            raise PveError(f"node {node!r} is not in the cluster at {self.settings.url}",
                           hint=f"nodes there: {', '.join(names) or 'none'}; set `node:` of the inventory host "
                           "to the Proxmox node name", target=node)


def _api_error(exc: Any, where: str, settings: PveSettings) -> PveError:
    status = getattr(exc, "status_code", 0)
    detail = str(getattr(exc, "content", "") or "").strip()
    errors = getattr(exc, "errors", None)
    evidence = ""
    if isinstance(errors, dict):
        evidence = "\n".join(f"{k}: {v}" for k, v in sorted(errors.items()))
    if status == 401:
        return PveError(f"{where}: the API refused token {settings.token_id} ({status} {detail})",
                        hint="check pve_api.token_id and the secret; tokens made with --privsep 1 also need "
                        "permissions (pveum acl modify / --tokens ...)")
    if status == 403:
        return PveError(f"{where}: token {settings.token_id} lacks a permission ({detail})",
                        hint="grant the token VM.Allocate, VM.Config.*, Datastore.AllocateSpace, Sys.Modify "
                        "on / (or create it with --privsep 0)")
    return PveError(f"{where}: {status} {detail}", evidence=evidence,
                    hint="the message above is Proxmox's own; fix the value it names and run again")
