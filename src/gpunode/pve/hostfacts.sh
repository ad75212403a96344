# shellcheck shell=sh
# What a Proxmox host says about itself and its NVIDIA driver, as "@name" blocks
# (gpunode.pve.hostfacts.parse). $1: the host's root, "" on a real host (the lab's stand-in
# keeps its /dev, /proc/driver and pveversion under a folder); $2: where onboard keeps the
# fetched installers; $3: the files NVIDIA's .run leaves, blank-separated; the rest: the
# dpkg-query patterns of the driver's packages.
R=$1; installers=$2; markers=$3; shift 3
echo @pveversion; if [ -x "$R/usr/bin/pveversion" ]; then "$R/usr/bin/pveversion" 2>&1; fi
echo @kernel; uname -r
echo @driver; cat "$R/proc/driver/nvidia/version" 2>/dev/null
echo @run_markers; for m in $markers; do [ -e "$R$m" ] && echo "$m"; done
echo @packages
if [ -z "$R" ] || [ -d "$R/var/lib/dpkg" ]; then
  COLUMNS=200 dpkg-query ${R:+--admindir="$R/var/lib/dpkg"} -l "$@" 2>/dev/null
fi
echo @proc_devices; cat "$R/proc/devices" 2>/dev/null
echo @ls; ls -al "$R"/dev/nvidia* 2>&1
echo @installers; ls "$R$installers" 2>/dev/null
true
