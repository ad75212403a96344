# shellcheck shell=sh

ldconfig -p 2>/dev/null | awk '/libcuda\.so(\.1)? /{print $1, $NF}'
for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib /usr/local/nvidia/lib64; do
  [ -e "$d/libcuda.so.1" ] && echo "file $d/libcuda.so.1"
done
true
