"""gpunode: provision GPU inference nodes on Proxmox LXC containers and plain SSH hosts."""

__version__ = "0.1.0"
