"""devN lists from recorded `ls -al /dev/nvidia*` outputs (tests/data/pve/ls-dev-nvidia/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.errors import PveError
from gpunode.pve import devices

DATA = Path(__file__).parents[1] / "data" / "pve" / "ls-dev-nvidia"


def found(name: str) -> list[str]:
    return devices.parse_ls((DATA / name).read_text())


def test_parser_reads_full_paths_and_the_caps_folder():
    assert sorted(found("gentoo-r465-caps.txt")) == [
        "/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2", "/dev/nvidia-modeset",
        "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidiactl"]


def test_no_driver_means_no_nodes():
    assert found("debian12-no-driver.txt") == []


def test_passthrough_order_required_then_optional_then_caps():
    assert devices.passthrough(found("gentoo-r465-caps.txt"), [0]) == [
        "/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
        "/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2"]


def test_a_gpu_that_is_not_there_is_an_error_naming_what_is():
    with pytest.raises(PveError) as err:
        devices.passthrough(found("lxc-ollama-uvm511.txt"), [0, 1], host="kpro6")
    assert "/dev/nvidia1" in err.value.message and "kpro6" in err.value.message
    assert "GPUs there: [0]" in err.value.hint


def test_missing_uvm_says_how_to_create_it():
    listing = [p for p in found("lxc-ollama-uvm511.txt") if p != "/dev/nvidia-uvm"]
    with pytest.raises(PveError) as err:
        devices.passthrough(listing, [0], host="kpro6")
    assert "/dev/nvidia-uvm does not exist" in err.value.message
    assert "nvidia-modprobe -u -c=0" in err.value.hint


def test_no_gpus_asked_no_devices_even_without_driver():
    assert devices.passthrough(found("debian12-no-driver.txt"), []) == []


def test_driver_missing_entirely_is_an_error_when_gpus_are_asked():
    with pytest.raises(PveError, match="/dev/nvidia0 do not exist"):
        devices.passthrough(found("debian12-no-driver.txt"), [0], host="lab")
