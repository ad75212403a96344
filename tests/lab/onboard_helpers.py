"""What the `inv onboard` lab tests share (test_onboard_lab.py, test_onboard_driver_lab.py).

- `pve_inventory`: the text of an inventory as a user writes it by hand, the lab host over its
  sshd with the PVE API stand-in's token under `vars:`; text, not a YAML dump, because the tests
  check that onboard's edits keep the user's comments and layout, and edit the text themselves.
- `remove_pve_container`: a container of the test's own gone, with its PVE config, whatever
  state an earlier run left it in.
"""

from __future__ import annotations

from gpunode_lab import containers, paths, pve_api


def pve_inventory(api_port: int, token_id: str, secret: str, *, host_vars: str = "", containers: str = "",
                  comment: str = "") -> str:
    """hosts.yml text: `comment` on top, then host `lab` with the lines `host_vars` (YAML already
    indented under `vars:`) and `pve_api`, then `containers` (lines of a `containers:` block)."""
    head = f"# {comment}\n" if comment else ""
    return f"""\
{head}hosts:
  lab:
    address: 127.0.0.1
    port: {paths.SSH_PORT}
    key: {paths.CLIENT_KEY}
    known_hosts: {paths.KNOWN_HOSTS}
    pct_path: {paths.PCT}
    vars:
{host_vars}      pve_api:
        port: {api_port}
        token_id: {token_id}
        token_secret: {secret}
        verify_ssl: {pve_api.CERT}
{containers}"""


def remove_pve_container(vmid: int) -> None:
    """Remove container `vmid` and its PVE config (/etc/pve/lxc/VMID.conf of the stand-in), if any."""
    conf = paths.PVE_LXC / f"{vmid}.conf"
    parsed = pve_api.read_conf(str(vmid))[0] if conf.exists() else {}
    containers.remove(pve_api.lab_container(str(vmid), parsed))
