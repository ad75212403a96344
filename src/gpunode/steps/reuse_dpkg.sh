# shellcheck shell=sh disable=SC3013
# SC3013: dash, bash and busybox sh all have [ -ef ].
gn_print() { while IFS= read -r gn_l; do printf '%s\n' "$gn_l"; done < "$1"; }
gn_c="$GN_STATE/reuse-dpkg-$1"; shift
gn_pending() { for gn_u in /var/lib/dpkg/updates/*; do [ -e "$gn_u" ] && return 0; done; return 1; }
if [ -n "$GN_STATE" ] && [ -s "$gn_c.out" ] && [ /var/lib/dpkg/status -ef "$gn_c.status" ] && ! gn_pending; then
  gn_print "$gn_c.out"
else
  gn_store=; if [ -n "$GN_STATE" ] && [ -n "$GN_EXCLUSIVE" ]; then
    # Emptied first (an empty answer is never reused); linked before the query, so that a
    # dpkg run that ends between the two leaves a link to the status file it replaced.
    : 2>/dev/null > "$gn_c.out" && ln -f /var/lib/dpkg/status "$gn_c.status" 2>/dev/null && gn_store=1
  fi
  gn_o=$(dpkg-query -W -f='${Package}\t${db:Status-Abbrev}\t${Version}\n' -- "$@" 2>&1); gn_rc=$?
  [ -z "$gn_o" ] || printf '%s\n' "$gn_o"
  if [ -n "$gn_store" ] && [ "$gn_rc" = 0 ] && ! gn_pending; then printf '%s\n' "$gn_o" > "$gn_c.out"; fi
  # dpkg-query's own status (1: a name it does not know): a subshell, only when it ran.
  [ "$gn_rc" = 0 ] || (exit "$gn_rc")
fi
