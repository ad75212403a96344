#!/bin/sh
# The lab's fan-out bench (bench/noop.py --group) on a machine with more cores than the lab's.
#
# Run as root from the repository root on a throwaway Linux machine (it mounts and leaves
# processes behind), with the image that bench/more_cores/pack.sh made in .devhost/. No network
# is needed there. The image is this lab's own host userland (Debian 12: lxc, sshd, python3 and
# gpunode's libraries in /opt/gnvenv) and the containers' base rootfs; everything runs in a
# chroot of it, so the containers, the pct stand-in and sshd are the very programs the lab runs.
#
#   sh bench/more_cores/run.sh [image folder] [-- arguments for bench/noop.py]
set -eu
# Its own mount namespace: every mount below goes with it.
[ -n "${GPUNODE_MORE_CORES_NS:-}" ] || exec env GPUNODE_MORE_CORES_NS=1 unshare -m --propagation private sh "$0" "$@"
repo=$(pwd)
img=${1:-.devhost}
[ $# -gt 0 ] && shift
[ "${1:-}" = -- ] && shift
R=/tmp/gpunode-more-cores
[ -f "$img/devhost.tar.xz" ] || { echo "no $img/devhost.tar.xz: run bench/more_cores/pack.sh where the lab is" >&2; exit 2; }
[ ! -e "$R" ] || { echo "$R exists: this script runs once per machine" >&2; exit 2; }

echo "== unpacking the image ($(nproc) cores here)"
mkdir -p "$R"
# Python's tarfile, not tar -J: the machine may have no xz.
python3 - "$img/devhost.tar.xz" "$R" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    t.extractall(sys.argv[2], numeric_owner=True, filter="fully_trusted")
EOF
base=$R/var/cache/gpunode-lab/lxc/base/rootfs
mkdir -p "$base"
(cd "$R" && tar --one-file-system --exclude=./var/cache/gpunode-lab -cf - .) | tar -C "$base" -xpf -
tar -C "$R" --numeric-owner -xpf "$img/labstate.tar"

mount --bind "$R" "$R"  # a mount of its own, for pivot_root below
mount --rbind /dev "$R/dev"
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
mount -t tmpfs tmpfs "$R/run"
mount -t tmpfs tmpfs "$R/tmp"
mkdir -p "$R/work/main"
mount --bind "$repo" "$R/work/main"

cat > "$R/tmp/hosts.yml" <<'EOF'
hosts:
  lab:
    address: 127.0.0.1
    port: 2222
    user: root
    key: /var/lib/gpunode-lab/ssh/id_ed25519
    known_hosts: /var/lib/gpunode-lab/ssh/known_hosts
    pct_path: /var/lib/gpunode-lab/bin/pct
    containers:
      250: {}
EOF

# LXC pivots into each container's root, which fails under a plain chroot: the image becomes
# this mount namespace's root (pivot_root), as on a host.
mkdir -p "$R/.oldroot"
cd "$R"
pivot_root . .oldroot
cd /
umount -l /.oldroot

# A privileged LXC container's cgroup goes below PID 1's and gets the memory controller, which
# cgroup v2 refuses below a cgroup that holds processes (a job runner's PID 1 in its own cgroup):
# on such a machine this shell moves to the root cgroup and LXC makes its cgroups below the
# caller's (lxc.cgroup.relative), as from a host's PID 1.
cg=$(sed -n 's/^0:://p' /proc/1/cgroup)
if [ -f /sys/fs/cgroup/cgroup.subtree_control ] && [ -n "$cg" ] && [ "$cg" != / ]; then
  echo "== PID 1 is in the cgroup $cg: LXC's cgroups go below the root one"
  echo $$ > /sys/fs/cgroup/cgroup.procs
  echo "lxc.cgroup.relative = 1" >> /usr/share/lxc/config/common.conf
fi

echo "== sshd, container 250, then bench/noop.py $*"
# shellcheck disable=SC2016  # the script in single quotes expands its variables in the clean environment
/usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  LANG=C.UTF-8 PYTHONPATH=/work/main/src:/work/main/lab PYTHONUNBUFFERED=1 /bin/sh -c '
set -e
mkdir -p /run/sshd
/usr/sbin/sshd -f /var/lib/gpunode-lab/ssh/sshd_config -E /var/lib/gpunode-lab/ssh/sshd.log
cd /work/main
/opt/gnvenv/bin/python - <<EOF
from gpunode_lab import containers
box = containers.Container(250, "cpu", "lab-noop-250", 384, True, 1, 0, containers.SHARES)
containers.ensure(box)
containers.start(box)
print("container 250 running")
EOF
rc=0; /opt/gnvenv/bin/python bench/noop.py --inventory /tmp/hosts.yml --ct 250 "$@" || rc=$?
/opt/gnvenv/bin/python -c "from gpunode_lab import containers
containers.remove(containers.Container(250, \"cpu\", \"lab-noop-250\", 384, True, 1, 0, containers.SHARES))"
kill "$(cat /var/lib/gpunode-lab/ssh/sshd.pid)"
exit $rc
' sh "$@"
