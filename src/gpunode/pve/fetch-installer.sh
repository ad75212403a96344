# shellcheck shell=sh
# Fetch NVIDIA's .run installer onto the Proxmox host (gpunode.pve.userspace.fetch_installer):
# $1 where it goes, $2 its URL. A partial download or an HTML error page never takes the name.
set -e
d=$(dirname "$1"); mkdir -p "$d"; t="$1.part"
curl -fsSL --retry 3 -o "$t" "$2"
head -c 2 "$t" | grep -q "#!"
mv -f "$t" "$1"
