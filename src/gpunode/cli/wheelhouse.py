"""inv wheelhouse: download a pin set once per node, for offline installs in its containers."""

from __future__ import annotations

from gpunode.cli.common import load_inventory, task
from gpunode.errors import CommandError, InventoryError, tail

HELP = {
    "pinset": "pin set id from gpunode/compat/pinsets.yml (inv provision --check shows the one chosen)",
    "dest": "folder on the host (default /var/lib/gpunode/wheelhouse/<pinset>); bind-mount it into containers",
    "host": "download on this inventory host (the Proxmox host); omit to download on this machine",
    "python": "the containers' Python, e.g. 3.11",
    "glibc": "the containers' glibc, e.g. 2.36 (Debian 12)",
    "inventory": "inventory folder or file",
}


@task(help=HELP)
def wheelhouse(c, pinset=None, dest=None, host=None, python="3.11", glibc="2.36", inventory=None):
    """Download a pin set's wheels (and the router's and uv) into one folder on the node."""
    from gpunode import roles
    from gpunode.cli.session import Session
    from gpunode.transport import LocalTransport
    from gpunode.wheelhouse import pinset_download

    if not pinset:
        raise InventoryError("which pin set? pass --pinset ID", hint="`inv provision --check` names the one chosen")
    folder = dest or f"/var/lib/gpunode/wheelhouse/{pinset}"
    uv = roles.defaults(("base",))["base_uv_requirement"]
    download = pinset_download(pinset, python=python, glibc=glibc, extra=(uv,))
    with Session() as session:
        target = session.host_transport(load_inventory(inventory).host(host)) if host else LocalTransport()
        print(f"{target.name}: pip download {len(download.requirements)} requirements with their dependencies "
              f"into {folder} (python {python}, glibc {glibc})")
        target.run(["mkdir", "-p", folder], check=True)
        result = None
        if download.locked:
            listing = f"{folder}/gpunode-lock-requirements.txt"
            target.write_file(listing, ("\n".join(download.locked) + "\n").encode())
            print(f"{target.name}: {len(download.locked)} wheels by hash from the lock {download.lock}")
            result = target.run(download.locked_argv(folder, listing), timeout=7200)
        if result is None or result.ok:
            result = target.run(download.argv(folder), timeout=7200)
        if not result.ok:
            raise CommandError(f"downloading pin set {pinset} failed (exit {result.exit_code})", target=target.name,
                               evidence=tail(result.stderr or result.stdout, 20),
                               hint="the host needs python3 with pip and a route to the indexes; "
                               "or download here without --host and copy the folder")
        count = target.run(["sh", "-c", 'ls "$1"/*.whl | wc -l', "sh", folder]).stdout.strip()
    print(f"{count} wheels in {folder}. Mount it into the containers (pct set <vmid> -mp1 {folder},mp=/mnt/wheels) "
          "and provision with --set wheelhouse=/mnt/wheels")


ns = wheelhouse
