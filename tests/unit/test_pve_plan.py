"""Config diffing of gpunode.pve.containers: only what differs is PUT; other entries are left alone."""

from __future__ import annotations

import pytest

from gpunode.errors import PveError
from gpunode.pve.containers import Desired, MountPoint, create_params, parse_prop, plan_update
from gpunode.pve.tasks import decode_upid, succeeded

MODELS = MountPoint("/srv/models", "/mnt/models")
WHEELS = MountPoint("/srv/wheels", "/mnt/wheels")
GPU0 = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm")

# The shape GET /nodes/{node}/lxc/{vmid}/config answers (integers as JSON numbers).
CONF = {"arch": "amd64", "hostname": "gpu-200", "memory": 65536, "swap": 0, "cores": 16, "ostype": "debian",
        "rootfs": "local-lvm:vm-200-disk-0,size=64G", "unprivileged": 1, "net0": "name=eth0,bridge=vmbr0,ip=dhcp",
        "mp0": "/srv/models,mp=/mnt/models,ro=1", "dev0": "/dev/nvidia0", "dev1": "/dev/nvidiactl",
        "dev2": "/dev/nvidia-uvm", "digest": "0123456789abcdef0123456789abcdef01234567"}


def want(**kw) -> Desired:
    base = dict(vmid=200, hostname="gpu-200", memory=65536, swap=0, cores=16, mounts=(MODELS,), devices=GPU0)
    base.update(kw)
    return Desired(**base)


def test_same_config_plans_nothing():
    plan = plan_update(CONF, True, want(), "kpro6")
    assert not plan.changes
    assert plan.lines() == ["CT 200 on node kpro6: config already as wanted"]


def test_changed_memory_is_the_only_key_set_and_carries_the_digest():
    plan = plan_update(CONF, True, want(memory=98304), "kpro6")
    assert plan.set == {"memory": "98304"} and plan.delete == [] and not plan.start
    assert plan.digest == CONF["digest"]
    assert "  memory: 65536 -> 98304" in plan.lines()


def test_mount_property_order_does_not_matter():
    conf = {**CONF, "mp0": "/srv/models,ro=1,mp=/mnt/models"}
    assert not plan_update(conf, True, want(), "kpro6").changes


def test_new_mount_takes_the_next_free_slot_and_foreign_mounts_stay():
    conf = {**CONF, "mp1": "/srv/scratch,mp=/scratch"}
    plan = plan_update(conf, True, want(mounts=(MODELS, WHEELS)), "kpro6")
    assert plan.set == {"mp2": "/srv/wheels,mp=/mnt/wheels,ro=1"}
    assert any("mp1" in n and "left as is" in n for n in plan.notes)


def test_changed_mount_source_is_put_in_its_own_slot():
    plan = plan_update(CONF, True, want(mounts=(MountPoint("/tank/models", "/mnt/models"),)), "kpro6")
    assert plan.set == {"mp0": "/tank/models,mp=/mnt/models,ro=1"}


def test_more_gpus_add_devices_fewer_gpus_delete_only_nvidia_ones():
    conf = {**CONF, "dev3": "/dev/dri/renderD128"}
    more = plan_update(conf, True, want(devices=("/dev/nvidia0", "/dev/nvidia1", *GPU0[1:])), "kpro6")
    assert more.set == {"dev4": "/dev/nvidia1"}
    fewer = plan_update(conf, True, want(devices=()), "kpro6")
    assert fewer.delete == ["dev0", "dev1", "dev2"]  # dev3 (not NVIDIA) stays


def test_a_different_hostname_is_a_vmid_clash():
    with pytest.raises(PveError) as err:
        plan_update(CONF, True, want(hostname="new-node"), "kpro6")
    assert "already exists on node kpro6 as 'gpu-200'" in err.value.message
    assert "--hostname gpu-200" in err.value.hint
    assert plan_update(CONF, True, want(hostname="new-node"), "kpro6", adopt=True).set == {"hostname": "new-node"}


def test_locked_container_is_refused():
    with pytest.raises(PveError, match=r"locked \(backup\)"):
        plan_update({**CONF, "lock": "backup"}, True, want(), "kpro6")


def test_stopped_container_is_started():
    assert plan_update(CONF, False, want(), "kpro6").start


def test_create_params_number_mounts_and_devices_from_zero():
    params = create_params(want(mounts=(MODELS, WHEELS)))
    assert params["mp0"] == "/srv/models,mp=/mnt/models,ro=1" and params["mp1"] == "/srv/wheels,mp=/mnt/wheels,ro=1"
    assert [params[f"dev{i}"] for i in range(3)] == list(GPU0)
    assert params["start"] == 0 and params["unprivileged"] == 1


def test_parse_prop_default_key():
    assert parse_prop("/dev/nvidia0,gid=44", "path") == {"path": "/dev/nvidia0", "gid": "44"}


def test_upid_decodes_like_proxmoxer():
    from proxmoxer.tools import Tasks

    upid = "UPID:kpro6:0012F3A1:0A1B2C3D:6650A1B2:vzcreate:230:root@pam!gpunode:"
    ours, theirs = decode_upid(upid), Tasks.decode_upid(upid)
    assert (ours.node, ours.pid, ours.pstart, ours.starttime, ours.type, ours.id) == (
        theirs["node"], theirs["pid"], theirs["pstart"], theirs["starttime"], theirs["type"], theirs["id"])
    assert ours.user == theirs["user"] == "root@pam"  # proxmoxer's: the token's name is not the user's
    for bad in ("UPID:kpro6:1", "UPID:kpro6:zz:0A1B2C3D:6650A1B2:vzcreate:230:root@pam:"):
        with pytest.raises(PveError, match="not a Proxmox task id"):
            decode_upid(bad)


def test_exitstatus_semantics():
    assert succeeded("OK") and succeeded("WARNINGS: 2")
    assert not succeeded("startup for container '230' failed") and not succeeded(None)
