N=$1; GN_MODEL=$2; GN_VENV=$3; GN_VENV_ROOT=$4
export LC_ALL=C
PATH=$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
sec() { printf '@@gpunode:%s:section %s\n' "$N" "$1"; }
end() { printf '\n@@gpunode:%s:rc %s\n' "$N" "$1"; }
# A wedged GPU can hang nvidia-smi for minutes; bound every driver call.
t() { if command -v timeout >/dev/null 2>&1; then timeout 30 "$@"; else "$@"; fi; }
sec host
( echo "uname=$(uname -srm)"; echo "hostname=$(cat /proc/sys/kernel/hostname)"; echo "uid=$(id -u)"
) </dev/null 2>&1; rc_host=$?; end $rc_host
sec os_release
( cat /etc/os-release
) </dev/null 2>&1; rc_os_release=$?; end $rc_os_release
sec glibc
( getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>&1 | head -n 1
) </dev/null 2>&1; rc_glibc=$?; end $rc_glibc
sec pythons
( for v in 8 9 10 11 12 13 14 15; do p=$(command -v python3.$v) && echo "python3.$v $p"; done
p=$(command -v python3) && echo "python3 $p $("$p" -V 2>&1)"
true
) </dev/null 2>&1; rc_pythons=$?; end $rc_pythons
sec cpus
( echo "nproc=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
[ -r /sys/fs/cgroup/cpu.max ] && echo "cpu.max=$(cat /sys/fs/cgroup/cpu.max)"
true
) </dev/null 2>&1; rc_cpus=$?; end $rc_cpus
sec meminfo
( grep -E '^(MemTotal|MemAvailable):' /proc/meminfo
) </dev/null 2>&1; rc_meminfo=$?; end $rc_meminfo
sec memlimit
( p=$(sed -n 's/^0:://p' /proc/self/cgroup | head -n 1)
if [ -n "$p" ]; then d=/sys/fs/cgroup${p%/}; while :; do
  [ -r "$d/memory.max" ] && echo "v2 ${d#/sys/fs/cgroup} $(cat "$d/memory.max")"
  [ "$d" = /sys/fs/cgroup ] && break; d=${d%/*}; done; fi
p=$(sed -n 's/^[0-9]*:[^:]*memory[^:]*:\(.*\)$/\1/p' /proc/self/cgroup | head -n 1)
if [ -n "$p" ]; then d=/sys/fs/cgroup/memory${p%/}; while :; do
  [ -r "$d/memory.limit_in_bytes" ] && echo "v1 ${d#/sys/fs/cgroup/memory} $(cat "$d/memory.limit_in_bytes")"
  [ "$d" = /sys/fs/cgroup/memory ] && break; d=${d%/*}; done; fi
true
) </dev/null 2>&1; rc_memlimit=$?; end $rc_memlimit
sec shm
( df -Pk /dev/shm
) </dev/null 2>&1; rc_shm=$?; end $rc_shm
sec disk
( d=$GN_VENV_ROOT; while [ ! -d "$d" ]; do d=$(dirname "$d"); done
echo "path=$d"; df -Pk "$d"
) </dev/null 2>&1; rc_disk=$?; end $rc_disk
sec container
( echo "detect_virt=$(systemd-detect-virt -c 2>/dev/null)"
[ -r /run/systemd/container ] && echo "run_systemd_container=$(cat /run/systemd/container)"
echo "pid1_env=$(tr '\0' '\n' 2>/dev/null </proc/1/environ | sed -n 's/^container=//p')"
echo "pid1=$(cat /proc/1/comm 2>/dev/null)"
[ -d /run/systemd/system ] && echo "systemd=yes"
true
) </dev/null 2>&1; rc_container=$?; end $rc_container
sec nvidia_query
( t nvidia-smi --query-gpu=index,name,memory.total,compute_cap,pci.bus_id,mig.mode.current,uuid,driver_version --format=csv,nounits
) </dev/null 2>&1; rc_nvidia_query=$?; end $rc_nvidia_query
sec nvidia_smi
( t nvidia-smi
) </dev/null 2>&1; rc_nvidia_smi=$?; end $rc_nvidia_smi
if [ "$rc_nvidia_query" != 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
sec nvidia_smi_q
( t nvidia-smi -q
) </dev/null 2>&1; rc_nvidia_smi_q=$?; end $rc_nvidia_smi_q
fi
sec driver_proc
( cat /proc/driver/nvidia/version
) </dev/null 2>&1; rc_driver_proc=$?; end $rc_driver_proc
sec libs
( ldconfig -p 2>/dev/null | grep -E 'lib(cuda|nvidia-ml|numa)\.so' | sed 's/^[[:space:]]*/ldconfig: /'
for f in "/usr/lib/x86_64-linux-gnu"/libcuda.so* "/usr/lib/x86_64-linux-gnu"/libnvidia-ml.so* "/usr/lib/x86_64-linux-gnu"/libnuma.so* "/usr/lib/aarch64-linux-gnu"/libcuda.so* "/usr/lib/aarch64-linux-gnu"/libnvidia-ml.so* "/usr/lib/aarch64-linux-gnu"/libnuma.so* "/usr/lib64"/libcuda.so* "/usr/lib64"/libnvidia-ml.so* "/usr/lib64"/libnuma.so* "/usr/lib"/libcuda.so* "/usr/lib"/libnvidia-ml.so* "/usr/lib"/libnuma.so* "/lib/x86_64-linux-gnu"/libcuda.so* "/lib/x86_64-linux-gnu"/libnvidia-ml.so* "/lib/x86_64-linux-gnu"/libnuma.so* "/lib64"/libcuda.so* "/lib64"/libnvidia-ml.so* "/lib64"/libnuma.so* "/usr/local/nvidia/lib64"/libcuda.so* "/usr/local/nvidia/lib64"/libnvidia-ml.so* "/usr/local/nvidia/lib64"/libnuma.so* "/usr/local/nvidia/lib"/libcuda.so* "/usr/local/nvidia/lib"/libnvidia-ml.so* "/usr/local/nvidia/lib"/libnuma.so* "/usr/lib/wsl/lib"/libcuda.so* "/usr/lib/wsl/lib"/libnvidia-ml.so* "/usr/lib/wsl/lib"/libnuma.so*; do
  if [ -e "$f" ] || [ -L "$f" ]; then echo "file: $f -> $(readlink "$f")"; fi
done
true
) </dev/null 2>&1; rc_libs=$?; end $rc_libs
sec cuda_toolkits
( for d in /usr/local/cuda /usr/local/cuda-* /opt/cuda /usr/lib/cuda; do
  [ -d "$d" ] || continue
  echo "@toolkit $d $(readlink -f "$d")"
  if [ -r "$d/version.json" ]; then echo "@version.json"; cat "$d/version.json"; echo
  elif [ -r "$d/version.txt" ]; then echo "@version.txt"; cat "$d/version.txt"; fi
  [ -x "$d/bin/nvcc" ] && { echo "@nvcc $d/bin/nvcc"; "$d/bin/nvcc" --version; }
done
p=$(command -v nvcc) && { echo "@path-nvcc $(readlink -f "$p")"; "$p" --version; }
if [ -n "$GN_VENV" ]; then
  for n in "$GN_VENV"/lib/python3*/site-packages/nvidia/*/bin/nvcc; do
    [ -x "$n" ] && { echo "@nvcc $n"; "$n" --version; }
  done
fi
true
) </dev/null 2>&1; rc_cuda_toolkits=$?; end $rc_cuda_toolkits
if [ -n "$GN_VENV" ]; then
sec venv
( [ -d "$GN_VENV" ] || { echo "no such directory: $GN_VENV"; exit 2; }
echo "@pyvenv.cfg"; cat "$GN_VENV/pyvenv.cfg"
echo "@python"; "$GN_VENV/bin/python" -V
for sp in "$GN_VENV"/lib/python3*/site-packages; do
  [ -d "$sp" ] || continue
  echo "@site-packages $sp"
  ls -1 "$sp" | grep -E '\.dist-info$'
  [ -r "$sp/torch/version.py" ] && { echo "@torch/version.py"; cat "$sp/torch/version.py"; }
done
true
) </dev/null 2>&1; rc_venv=$?; end $rc_venv
fi
if [ -n "$GN_MODEL" ]; then
sec model_files
( [ -d "$GN_MODEL" ] || { echo "no such directory: $GN_MODEL"; exit 2; }
cd "$GN_MODEL" || exit 2
if stat -L -c %s . >/dev/null 2>&1; then find -L . -maxdepth 3 -type f -exec stat -L -c '%s %n' {} +
else find -L . -maxdepth 3 -type f -exec wc -c {} +; fi
) </dev/null 2>&1; rc_model_files=$?; end $rc_model_files
fi
if [ -n "$GN_MODEL" ]; then
sec model_config
( cat "$GN_MODEL/config.json"
) </dev/null 2>&1; rc_model_config=$?; end $rc_model_config
fi
if [ -n "$GN_MODEL" ]; then
sec model_index
( cat "$GN_MODEL/model.safetensors.index.json"
) </dev/null 2>&1; rc_model_index=$?; end $rc_model_index
fi
if [ -n "$GN_MODEL" ]; then
sec model_quant
( cat "$GN_MODEL/hf_quant_config.json"
) </dev/null 2>&1; rc_model_quant=$?; end $rc_model_quant
fi
if [ -n "$GN_MODEL" ] && [ ! -e "$GN_MODEL/model.safetensors.index.json" ] && [ -f "$GN_MODEL/model.safetensors" ]; then
sec model_header
( f="$GN_MODEL/model.safetensors"
n=$(od -An -tu8 -N8 "$f" | tr -d ' ')
case $n in ''|*[!0-9]*) echo "unreadable header length: $n"; exit 3;; esac
[ "$n" -le 104857600 ] || { echo "header too large: $n bytes"; exit 3; }
head -c $((8 + n)) "$f" | tail -c "$n"
) </dev/null 2>&1; rc_model_header=$?; end $rc_model_header
fi
