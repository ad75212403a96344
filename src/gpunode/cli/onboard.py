"""inv onboard: bring a container in through the Proxmox API, then list it in the inventory."""

from __future__ import annotations

from gpunode.cli.common import VMID_HINT, load_inventory, parse_int, task
from gpunode.errors import InventoryError

HELP = {
    "host": "inventory host (the Proxmox node, reached over SSH for its /dev/nvidia* list)",
    "ct": "container vmid to create or update",
    "gpus": "GPU indices to pass through, e.g. 0,1,2,3 (devN on Proxmox >= 8.2, classic lxc.* lines before)",
    "template": "OS template for a new container (storage:vztmpl/file)",
    "memory": "memory in MiB (default 16384; weights staged in /dev/shm count against it)",
    "swap": "swap in MiB (default 0)",
    "cores": "CPU cores (default: not limited)",
    "mount": "host:ct[:rw] bind mount, e.g. /srv/models:/mnt/models (repeatable; read-only unless :rw)",
    "hostname": "container hostname (default gpunode-<vmid>)",
    "rootfs": "root disk as storage:GiB for a new container",
    "adopt": "take over an existing container whose hostname differs",
    "check": "print the plan; change nothing",
    "inventory": "inventory folder or file (default: $GPUNODE_INVENTORY, gpunode.yaml's inventory:, ./inventory)",
    "timeout": "seconds to wait for each Proxmox task (default 600)",
}
# With --gpus, onboard also installs the driver's user-space in the container at the host's
# version (gpunode.pve.userspace; host vars nvidia_installer_url, host_root: docs/onboard.md).


def parse_mount(text: str):
    from gpunode.pve.containers import MountPoint

    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(p.startswith("/") for p in parts[:2]) or parts[2:] not in ([], ["rw"]):
        raise InventoryError(f"--mount {text!r} is not host:ct[:rw] with absolute paths",
                             hint="e.g. --mount /srv/models:/mnt/models")
    return MountPoint(parts[0], parts[1], ro=parts[2:] != ["rw"])


def parse_gpus(text: str | None) -> list[int]:
    if not text:
        return []
    items = [g.strip() for g in str(text).split(",")]
    if not all(g.isascii() and g.isdigit() for g in items):
        raise InventoryError(f"--gpus {str(text)[:60]!r} is not a list of GPU indices", hint="e.g. --gpus 0,1,2,3")
    return sorted({int(g) for g in items})


@task(iterable=["mount"], help=HELP)
def onboard(c, host=None, ct=None, gpus=None, template=None, memory=None, swap=None, cores=None, mount=None,
            hostname=None, rootfs=None, adopt=False, check=False, inventory=None, timeout=None):
    """Create or update an LXC container through the Proxmox API (GPUs, mounts, memory), start it, list it."""
    from gpunode.cli.session import Session
    from gpunode.errors import ConnectError
    from gpunode.inventory import edit
    from gpunode.pve import containers, gpuhost, userspace
    from gpunode.pve.client import PveClient, settings_from_vars
    from gpunode.transport import PctTransport

    # Not positional: `inv onboard -h` would read -h as the host.
    if not host or ct in (None, ""):
        raise InventoryError("onboard needs --host H and --ct N", hint="e.g. inv onboard --host kpro6 --ct 203 --check")
    # Numbers are parsed here, not by invoke (whose int() would end in a ValueError traceback).
    vmid = parse_int(ct, "--ct", 100, 999_999_999, VMID_HINT)
    memory_mib = parse_int(memory or 16384, "--memory", 16, 1 << 30, "memory in MiB, e.g. --memory 65536")
    swap_mib = parse_int(swap or 0, "--swap", 0, 1 << 30, "swap in MiB, e.g. --swap 0")
    cores_n = parse_int(cores, "--cores", 1, 8192, "CPU cores, e.g. --cores 16") if cores else None
    timeout_s = parse_int(timeout or 600, "--timeout", 1, 86400, "seconds, e.g. --timeout 600")
    gpu_list = parse_gpus(gpus)
    mounts = tuple(parse_mount(m) for m in mount or [])
    inv = load_inventory(inventory)
    h = inv.host(host)
    from gpunode import variables

    host_target = inv.target(host)
    variables.check(host_target.vars, host_target.origins, h.name)  # the one registry: pve_api, host_root, ...
    host_vars = host_target.vars
    settings = settings_from_vars(h.name, h.address, host_vars)
    node = h.node or h.name
    with Session() as session:
        gpu = None
        if gpu_list:
            # host_root: only the lab's stand-in host keeps its /dev/nvidia* elsewhere (docs/lab.md).
            facts = gpuhost.gather(session.host_transport(h), str(host_vars.get("host_root") or ""))
            gpu = gpuhost.plan(facts, gpu_list, h.name)
            for line in gpu.lines():
                print(line)
        desired = containers.Desired(
            vmid=vmid, hostname=hostname or f"gpunode-{vmid}", memory=memory_mib, swap=swap_mib,
            cores=cores_n, mounts=mounts, devices=tuple(gpu.devn if gpu else ()),
            device_root=gpu.facts.root if gpu else "",
            **({"template": template} if template else {}), **({"rootfs": rootfs} if rootfs else {}))
        client = PveClient(settings)
        plan = containers.plan(client, node, desired, adopt=bool(adopt))
        inv_file = edit.inventory_file(inv.source)
        listed = vmid in h.containers
        for line in plan.lines():
            print(line)
        print(f"inventory {inv_file}: " + (f"{host}/{vmid} already listed" if listed
                                          else f"add {host}/{vmid}" + (f" with gpus {gpu_list}" if gpu_list else "")))
        url = str(host_vars.get("nvidia_installer_url") or userspace.DEFAULT_URL)

        def ct_transport():
            return PctTransport(session.host_transport(h), vmid, pct=h.pct_path, host_name=h.name)

        if check:
            if gpu:
                state = None
                if not plan.create and not plan.start:
                    try:
                        state = userspace.probe_ct(ct_transport())
                    except ConnectError:
                        state = None
                for line in userspace.plan_lines(gpu.facts, state, url):
                    print(line)
            print("check mode: nothing was changed")
            return
        classic_notes: list[str] = []

        def write_classic() -> None:
            if gpu and gpu.classic:
                conf_dir = str(host_vars.get("pve_conf_dir") or gpuhost.PVE_CONF_DIR)  # the lab's differs
                merged = gpuhost.apply_classic(session.host_transport(h), vmid, gpu.classic, gpu.facts, conf_dir)
                if merged.changed:
                    classic_notes.append(f"wrote {len(merged.added)} classic passthrough line(s) into CT {vmid}'s "
                                         f"config, removed {len(merged.removed)} stale one(s)"
                                         + ("" if plan.start else f"; restart CT {vmid} to apply them"))

        notes = containers.apply(client, plan, progress=lambda line: print(f"  task: {line}"),
                                 timeout=float(timeout_s), before_start=write_classic)
        for note in notes + classic_notes:
            print(f"note: {note}")
        installed = ""
        if gpu:
            ct_t = ct_transport()
            state = userspace.probe_ct(ct_t)
            for line in userspace.plan_lines(gpu.facts, state, url):
                print(line)
            if state.version != gpu.facts.driver:
                installed = userspace.install(session.host_transport(h), ct_t, gpu.facts, vmid, h.pct_path, url)
                print(f"CT {vmid}: {installed}")
            listed = userspace.verify(ct_t, gpu.facts, gpu_list, vmid)
            print(f"nvidia-smi in CT {vmid}: {len(listed)} GPU(s) at driver {gpu.facts.driver}: "
                  + ", ".join(f"{g.index} {g.name}" for g in listed))
        if not listed:
            edit.add_container_file(inv_file, host, vmid, gpu_list or None)
        done = ("created" if plan.create else "updated" if plan.set or plan.delete or classic_notes or installed
                else "unchanged")
        print(f"{host}/{vmid}: {done}, running" + ("" if listed else f"; added to {inv_file}") +
              f" ({client.calls} API calls)")

ns = onboard
