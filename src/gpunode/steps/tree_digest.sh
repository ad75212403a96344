# shellcheck shell=sh

[ -d "$1" ] || { echo missing; exit 0; }
cd "$1" || exit 1
{ find . -mindepth 1 -printf '%y\t%P\t%m\t%l\n' | LC_ALL=C sort
  find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum
} | sha256sum | cut -c1-64
