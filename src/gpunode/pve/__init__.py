"""The Proxmox VE API: proxmoxer calls, task (UPID) waits, container config.

Knows nothing about steps or roles; `inv onboard` wires it to the inventory.
"""
