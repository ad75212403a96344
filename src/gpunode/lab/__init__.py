"""The lab: a local stand-in for a Proxmox VE node and GPU servers, for rehearsal and tests."""
