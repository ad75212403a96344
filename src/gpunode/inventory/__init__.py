"""The inventory: which hosts and containers there are, in which groups, with which variables.

    core.py      a YAML inventory folder or file -> typed hosts, containers, groups, layered variables
    ansible.py   Ansible's YAML shape (and `ansible-inventory --list` output) into ours
    ini.py       Ansible's INI shape into the YAML one
    patterns.py  --limit: Ansible's host patterns over targets and groups
    edit.py      `inv onboard` adding a container to the user's file, checked by loading it

Callers take the public names from here (`from gpunode.inventory import Target, load`).
"""

from gpunode.inventory.core import Container, Host, Inventory, Target, load

__all__ = ["Container", "Host", "Inventory", "Target", "load"]
