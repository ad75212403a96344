"""Every fixed path of the lab, in one place (other code and CI depend on these exact values).

The lab is a local stand-in for a Proxmox VE node ("lab"): an OpenSSH server on
127.0.0.1:2222, real LXC containers, and a `pct` command that follows real pct.
"""

from __future__ import annotations

from pathlib import Path

NODE = "lab"

# -- the lab's own role (demo) and its templates: a user's folders, put on the search path where used --
ROLES = Path(__file__).resolve().parent / "roles"
TEMPLATES = Path(__file__).resolve().parent / "templates"

# -- state (removed by destroy) and cache (kept by destroy) --------------------
STATE = Path("/var/lib/gpunode-lab")
CACHE = Path("/var/cache/gpunode-lab")

# -- sshd ---------------------------------------------------------------------------
SSH_DIR = STATE / "ssh"
SSH_ADDRESS = "127.0.0.1"
SSH_PORT = 2222
SSH_USER = "root"
SSHD_CONFIG = SSH_DIR / "sshd_config"
SSHD_PID = SSH_DIR / "sshd.pid"
SSHD_LOG = SSH_DIR / "sshd.log"
HOST_KEY = SSH_DIR / "ssh_host_ed25519_key"
CLIENT_KEY = SSH_DIR / "id_ed25519"  # private key of the lab's root login (public: .pub)
AUTHORIZED_KEYS = SSH_DIR / "authorized_keys"
KNOWN_HOSTS = SSH_DIR / "known_hosts"  # holds [127.0.0.1]:2222

# -- pct stand-in and PVE-format configs -------------------------------------------
BIN = STATE / "bin"
PCT = BIN / "pct"  # a launcher; the stand-in itself is byte-compiled in PCT_LIB
PCT_LIB = BIN / "lib"
PVE_ROOT = STATE / "pve"
PVE_LXC = PVE_ROOT / "nodes" / NODE / "lxc"  # <vmid>.conf, what `pct config` prints

# -- LXC ---------------------------------------------------------------------------
LXC_PATH = STATE / "lxc"  # lxcpath of the lab's containers (LXC names = vmids)
RUN = STATE / "run"  # lock files, start logs
CACHE_LXC_PATH = CACHE / "lxc"  # lxcpath holding the cached base container
BASE_NAME = "base"
BASE_ROOTFS = CACHE_LXC_PATH / BASE_NAME / "rootfs"
TEMPLATE_CACHE = CACHE / "lxc-template"  # LXC_CACHE_PATH of the debian template (debootstrap result)
DEBS = CACHE / "debs"  # downloaded .deb files (the apt repo's source)

# -- what containers install from (read-only bind mounts) ---------------------------
SHARE = STATE / "share"
SHARE_APT = SHARE / "apt"
SHARE_WHEELS = SHARE / "wheels"
SHARE_MODELS = SHARE / "models"
SHARE_NVIDIA_SMI = SHARE / "nvidia-smi"  # holds the chosen recorded nvidia-smi shape

CT_APT = "/mnt/lab/apt"
CT_WHEELS = "/mnt/lab/wheels"
CT_MODELS = "/mnt/lab/models"
CT_NVIDIA_SMI = "/mnt/lab/nvidia-smi"

# -- containers ----------------------------------------------------------------------
CT_CPU = 200  # "cpu" profile, running
CT_GPU = 201  # "gpu" profile, running, nvidia-smi stand-in
CT_STOPPED = 202  # created, left stopped (for error tests)

DEFAULT_GPU_SHAPE = "rtx-pro-6000-x8"

LAB_STATE_FILE = STATE / "lab.json"  # what up() last set (gpu shape, timings)
