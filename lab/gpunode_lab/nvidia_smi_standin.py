#!/usr/bin/python3 -IS
# STAND-IN for NVIDIA's `nvidia-smi`, installed by the gpunode lab at /usr/bin/nvidia-smi in
# the "gpu" container (201). There is no GPU here: this program only REPLAYS outputs recorded
# on real machines. The recorded "shape" is bind-mounted read-only at /mnt/lab/nvidia-smi
# (host: /var/lib/gpunode-lab/share/nvidia-smi, filled from tests/data/nvidia-smi/<shape>/):
#
#   nvidia-smi.txt                  printed for `nvidia-smi` (no arguments)
#   nvidia-smi-q.txt                printed for `nvidia-smi -q` (optional)
#   query-gpu.csv + query-gpu.args  the csv is printed when argv equals the recorded arguments
#                                   (.args: one shell-quoted line, or one argument per line;
#                                   any other NAME.args + NAME.csv pair works the same way)
#
# Anything else fails like nvidia-smi does for arguments it cannot serve: a message on
# stderr and a non-zero exit (2, "invalid argument"; 9 when no recording is mounted, like a
# missing driver).
#
# The lab's stand-in driver installer (gpunode_lab/gpuhost.py) installs a copy with
# INSTALLED_VERSION set: that copy is the user-space of one driver version. Like NVIDIA's it
# then needs the kernel module (/proc/driver/nvidia/version, the host's) and /dev/nvidiactl,
# fails with NVML's "Driver/library version mismatch" (exit 18) when the module's version
# differs, reports its own version in place of the recorded one, and lists in the CSV query
# only the GPUs whose /dev/nvidiaN exists in the container (the ones passed through).

import os
import sys

SHAPE_DIR = "/mnt/lab/nvidia-smi"
INSTALLED_VERSION = None
PROC_VERSION = "/proc/driver/nvidia/version"
DEV = "/dev"


def read(name):
    with open(os.path.join(SHAPE_DIR, name), "rb") as f:
        return f.read()


def emit(name, names):
    data = read(name)
    if INSTALLED_VERSION is not None:
        data = as_installed(data, name, names)
    sys.stdout.buffer.write(data)


def split_args(line):
    import shlex

    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def kernel_module():
    try:
        with open(PROC_VERSION) as f:
            for line in f:
                if line.startswith("NVRM version:"):
                    for word in line.split():
                        if word[:1].isdigit() and "." in word:
                            return word
    except OSError:
        pass
    return None


def recorded_version(names):
    """The driver version in the recorded CSV (its driver_version column)."""
    for name in sorted(names):
        if not name.endswith(".csv"):
            continue
        rows = read(name).decode("utf-8", "replace").splitlines()
        head = [c.strip() for c in rows[0].split(",")] if rows else []
        if "driver_version" in head and len(rows) > 1:
            return rows[1].split(",")[head.index("driver_version")].strip()
    return None


def as_installed(data, name, names):
    """The recording as this installed version prints it: its version, only the GPUs passed in."""
    old = recorded_version(names)
    if old:
        data = data.replace(old.encode(), INSTALLED_VERSION.encode())
    if name.endswith(".csv"):
        lines = data.decode("utf-8", "replace").splitlines(True)
        head = [c.strip() for c in lines[0].split(",")] if lines else []
        if head and head[0] == "index":
            keep = [r for r in lines[1:] if os.path.exists(DEV + "/nvidia" + r.split(",")[0].strip())]
            data = "".join(lines[:1] + keep).encode()
    return data


def installed_checks():
    """None when the driver answers, else the exit code after printing what nvidia-smi prints."""
    kernel = kernel_module()
    if kernel is None or not os.path.exists(DEV + "/nvidiactl"):
        sys.stderr.write("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                         "Make sure that the latest NVIDIA driver is installed and running.\n")
        return 9
    if kernel != INSTALLED_VERSION:
        sys.stdout.write("Failed to initialize NVML: Driver/library version mismatch\n"
                         "NVML library version: {}\n".format(".".join(INSTALLED_VERSION.split(".")[:2])))
        return 18
    return None


def main(argv):
    if INSTALLED_VERSION is not None:
        failed = installed_checks()
        if failed is not None:
            return failed
    try:
        names = set(os.listdir(SHAPE_DIR))
    except OSError:
        names = set()
    if "nvidia-smi.txt" not in names:
        sys.stderr.write(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
            f"(gpunode lab stand-in: no nvidia-smi recording is mounted at {SHAPE_DIR}; choose one with "
            "`inv lab.up --gpu-shape NAME`, recordings live in tests/data/nvidia-smi/)\n"
        )
        return 9
    if not argv:
        emit("nvidia-smi.txt", names)
        return 0
    if argv == ["-q"] and "nvidia-smi-q.txt" in names:
        emit("nvidia-smi-q.txt", names)
        return 0
    for name in sorted(names):
        if not name.endswith(".args"):
            continue
        stem = name[: -len(".args")]
        data = [d for d in (stem + ".csv", stem + ".txt") if d in names]
        if not data:
            continue
        text = read(name).decode("utf-8", "replace").strip()
        one_per_line = [a.strip() for a in text.splitlines() if a.strip()]
        if argv in (split_args(text), one_per_line) or " ".join(argv) == text:
            emit(data[0], names)
            return 0
    shape = ""
    if ".lab-shape" in names:
        shape = read(".lab-shape").decode("utf-8", "replace").strip()
    recorded = ["(no arguments)"] + (["-q"] if "nvidia-smi-q.txt" in names else [])
    recorded += [" ".join(read(n).decode("utf-8", "replace").split()) for n in sorted(names) if n.endswith(".args")]
    sys.stderr.write(
        "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
        "(gpunode lab stand-in: no recording of `nvidia-smi {}` in shape {}; recorded: {})\n".format(
            " ".join(argv), shape or "?", "; ".join(recorded)
        )
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
