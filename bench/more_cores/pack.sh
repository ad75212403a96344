#!/bin/sh
# Make the image bench/more_cores/run.sh runs on a machine with more cores, in .devhost/ (one
# folder, ~45 MB; keep it out of git). Run as root from the repository root where `inv lab.up`
# has built the lab, with Debian's mirror and PyPI reachable.
#
# The image: the lab's base rootfs (Debian 12, python3, systemd) plus what the lab host has
# (lxc, lxc-templates, openssh-server) and gpunode's libraries at the versions of .venv, in
# /opt/gnvenv; then the lab's state that the bench needs (the pct stand-in, the sshd keys and
# config, a one-package apt source holding `hello` for the demo role).
set -eu
repo=$(pwd)
out=$repo/.devhost
base=/var/cache/gpunode-lab/lxc/base/rootfs
lab=/var/lib/gpunode-lab
if [ ! -d "$base" ] || [ ! -x "$lab/bin/pct" ]; then echo "no lab here: run inv lab.up first" >&2; exit 2; fi
work=$(mktemp -d /tmp/gpunode-pack.XXXXXX)
trap 'umount "$work/root/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
R=$work/root

cp -a "$base" "$R"
# Debian's mirror while the packages go in; the lab's own source again after (the containers').
mv "$R/etc/apt/sources.list.d/gpunode-lab.list" "$work/gpunode-lab.list"
cp -a "$R/etc/resolv.conf" "$work/resolv.conf" 2>/dev/null || :
printf 'deb http://deb.debian.org/debian bookworm main\ndeb http://deb.debian.org/debian bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
  > "$R/etc/apt/sources.list"
cp /etc/resolv.conf "$R/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' > "$R/usr/sbin/policy-rc.d"; chmod +x "$R/usr/sbin/policy-rc.d"
mount -t proc proc "$R/proc"
chroot "$R" apt-get update -q
DEBIAN_FRONTEND=noninteractive chroot "$R" apt-get install -y -q --no-install-recommends \
  lxc lxc-templates openssh-server openssh-client python3-venv
# The same tree is the containers' base there: no LXC of their own inside them.
for unit in lxc.service lxc-net.service lxc-monitord.service; do
  ln -sf /dev/null "$R/etc/systemd/system/$unit"; rm -f "$R/etc/systemd/system/multi-user.target.wants/$unit"
done

# gpunode's runtime libraries, at .venv's versions, as wheels fetched here (offline there).
"$repo/.venv/bin/pip" freeze | grep -iE '^(fabric|paramiko|invoke|proxmoxer|requests|pyyaml|jinja2|tenacity|rich|packaging|cryptography|bcrypt|pynacl|cffi|pycparser|markupsafe|urllib3|idna|certifi|charset-normalizer|decorator|deprecated|wrapt|markdown-it-py|mdurl|pygments)==' \
  > "$R/tmp/req.txt"
"$repo/.venv/bin/pip" download -q --only-binary=:all: --python-version 3.11 --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d "$R/tmp/whl" -r "$R/tmp/req.txt"
chroot "$R" sh -c 'python3 -m venv /opt/gnvenv && /opt/gnvenv/bin/pip install -q --no-compile --no-index --find-links /tmp/whl -r /tmp/req.txt'
umount "$R/proc"
rm -f "$R/etc/apt/sources.list" "$R/usr/sbin/policy-rc.d" "$R/etc/resolv.conf"
mv "$work/gpunode-lab.list" "$R/etc/apt/sources.list.d/gpunode-lab.list"
[ ! -e "$work/resolv.conf" ] || mv "$work/resolv.conf" "$R/etc/resolv.conf"

# Smaller: no pip in the venv, no docs, caches, locales or bundled wheels.
sp=$R/opt/gnvenv/lib/python3.11/site-packages
rm -rf "$sp"/pip "$sp"/pip-* "$sp"/setuptools "$sp"/setuptools-* "$sp"/pkg_resources "$sp"/_distutils_hack \
  "$sp"/distutils-precedence.pth "$R"/tmp/* "$R"/usr/share/doc/* "$R"/usr/share/man/* "$R"/usr/share/info/* \
  "$R"/usr/share/i18n "$R"/usr/share/python-wheels/* "$R"/usr/lib/python3.11/test \
  "$R"/usr/lib/python3.11/ensurepip/_bundled/* "$R"/var/cache/apt/*.bin "$R"/var/cache/apt/archives/*.deb
find "$R/var/lib/apt/lists" -type f -name '*_*' -delete
find "$R/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'C*' -exec rm -rf {} +
find "$R" -name __pycache__ -type d -prune -exec rm -rf {} +

mkdir -p "$out"
(cd "$R" && tar --numeric-owner -cf - .) | xz -9 -T0 -c > "$out/devhost.tar.xz"

# The lab's state the bench needs.
S=$work/state
mkdir -p "$S$lab/ssh" "$S$lab/share/apt" "$S$lab/share/wheels" "$S$lab/share/models" "$S$lab/pve/nodes/lab/lxc" \
  "$S$lab/run" "$S$lab/lxc" "$S/var/cache/gpunode-lab"
cp -a "$lab/bin" "$lab/lab.json" "$S$lab/"
find "$S$lab/bin" -name __pycache__ -type d -prune -exec rm -rf {} +
for f in authorized_keys id_ed25519 id_ed25519.pub known_hosts ssh_host_ed25519_key ssh_host_ed25519_key.pub sshd_config; do
  cp -a "$lab/ssh/$f" "$S$lab/ssh/"
done
cp -a /var/cache/gpunode-lab/base.stamp /var/cache/gpunode-lab/debs.stamp "$S/var/cache/gpunode-lab/"
cp -a "$lab"/share/apt/hello_*.deb "$S$lab/share/apt/"
python3 - "$lab/share/apt" "$S$lab/share/apt" <<'EOF'
import hashlib, sys
src, dst = sys.argv[1:]
[hello] = [s for s in open(f"{src}/Packages").read().split("\n\n") if s.startswith("Package: hello\n")]
packages = (hello.strip() + "\n").encode()
open(f"{dst}/Packages", "wb").write(packages)
head = open(f"{src}/Release").read().split("MD5Sum:")[0]
open(f"{dst}/Release", "w").write(
    f"{head}MD5Sum:\n {hashlib.md5(packages).hexdigest()} {len(packages)} Packages\n"
    f"SHA256:\n {hashlib.sha256(packages).hexdigest()} {len(packages)} Packages\n")
EOF
tar -C "$S" --numeric-owner -cf "$out/labstate.tar" .
ls -l "$out"
