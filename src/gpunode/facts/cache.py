"""Facts that are slow to read and change only with files: reused from the last applying run
while a stat signature of those files is the same.

`python3 -V`, `getconf`, `ldconfig -p`, nvidia-smi's inventory and a model's JSON files and
safetensors header cost process starts (nvidia-smi on 8 GPUs, seconds) on every run, yet
they can only change when a file they come from changes. Each cache group names those files
(shell words, globs allowed) and fresh values read with builtins (the loaded driver's version
line). The probe stats all groups' files in ONE `stat -L` call; a group whose signature (the
probe text's digest, each file's device, inode, size, mtime, ctime and device numbers, the
fresh values) equals the one stored in the state folder prints its stored sections instead of
running them.

Stored in the engine's state folder (like the recorded probe batch, engine/recorded.py),
facts-<group>.sig and facts-<group>.val, written only by a probe that runs under the
exclusive lock (an applying run); a check run reads them when present and writes nothing.
Both are one shell assignment (gn_old='...', gn_out='...') that the probe sources: no `cat`
starts, and a file cut short is a syntax error, so its group is read again (and stored whole
when the run may write). The sections used to be stored as plain text in facts-<group>.out,
which is never sourced (its content is not shell) and is removed when its group is stored anew.
What can change without a file changing (free memory, /dev/shm and disk usage, cgroup
limits, the model folder's listing) is never in a group: it is read on every run.

The stored sections keep the nonce of the run that wrote them (the file starts with
`@@gpunode-cache <nonce>`); this run prints them between its own nonce's `cached` markers,
so that no file content can fake a section of either run.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpunode import marked
from gpunode.errors import FactError
from gpunode.facts.snapshot import Section


@dataclass(frozen=True)
class Group:
    """Sections reused while the files they come from are unchanged."""

    name: str
    #: shell words of the files, given to stat (globs allowed): every file they find counts
    paths: tuple[str, ...]
    #: pieces of shell text run before the stat (their variables are seen by `paths` and
    #: `fresh`); a piece that several groups share runs once
    setup: tuple[str, ...] = ()
    #: shell words of values read fresh on every run that belong in the signature
    fresh: str = ""


# One stat for every group; its first line is "/" (a stat that failed or printed something else
# first turns the cache off for this run).
_STAT = "stat -L -c '%d|%i|%s|%y|%z|%t:%T|%n' -- / \"$@\" 2>/dev/null"


def _digest(group: Group, text: str) -> str:
    return hashlib.sha256(repr((group, text)).encode()).hexdigest()[:16]


def _segments(groups: Sequence[Group]) -> list[tuple[tuple[str, ...], list[str]]]:
    """Each word once (groups share the driver's libraries, and a glob reads its whole folder),
    gathered by the groups that name it: [(group names, words)], in the order the words come."""
    owners: dict[str, list[str]] = {}
    for g in groups:
        for word in g.paths:
            names = owners.setdefault(word, [])
            if g.name not in names:
                names.append(g.name)
    segments: dict[tuple[str, ...], list[str]] = {}
    for word, names in owners.items():
        segments.setdefault(tuple(names), []).append(word)
    return list(segments.items())


def shell(groups: Sequence[Group], bodies: dict[str, str]) -> tuple[str, dict[str, str]]:
    """(signature text, {group: its sections wrapped in the reuse-or-run-and-store shell}).
    bodies: each group's section blocks as the probe would run them."""
    segments = _segments(groups)
    setups = dict.fromkeys(piece.strip() for g in groups for piece in g.setup)
    # stat answers in the order of its arguments, a line per file it finds. "/" opens the answer
    # and stands between the segments, so a line's place says whose signature it joins: one test
    # and one `case` of small numbers a line, half the shell work of cutting the path out of the
    # line and matching it against every group's paths (a GPU node has dozens of lines: device
    # nodes, driver libraries).
    cases = [f"    {k}) " + " ".join(f'gn_sig_{n}="$gn_sig_{n} $l"' for n in names) + ";;"
             for k, (names, _) in enumerate(segments, start=1)]
    sig = ["gn_ok=", *(f"gn_sig_{g.name}={_digest(g, bodies[g.name])}" for g in groups),
           'if [ -n "$GN_CACHE" ]; then', *setups,
           "set -- " + " / ".join(" ".join(words) for _, words in segments),
           f"gn_stat=$({_STAT})",
           "set -f; IFS=$gn_nl; gn_k=0 gn_root=",
           "for l in $gn_stat; do",
           '  if [ "$l" = "$gn_root" ]; then gn_k=$((gn_k + 1))',
           "  else case $gn_k in",
           "    0) case $l in *'|/') gn_root=$l gn_ok=1 gn_k=1;; *) break;; esac;;",
           *cases,
           "  esac; fi",
           "done; unset IFS; set +f"]
    sig += [f'gn_sig_{g.name}="$gn_sig_{g.name} | {g.fresh}"' for g in groups if g.fresh]
    sig += ["fi", "gn_cached=", _QUOTE]
    wrapped = {}
    for g in groups:
        f = f'"$GN_CACHE/facts-{g.name}'
        # Both stores are lines of shell, sourced: `read` takes a byte per read(2) in dash (~0.4 ms
        # for a 600-byte signature) and `cat` is a process. `command .` survives a damaged file (a
        # syntax error) where `.` would end the probe; a signature holding a quote is never stored.
        # The signature is emptied first and written last: a run cut in between leaves no match.
        wrapped[g.name] = f"""gn_run_{g.name}() {{
{bodies[g.name]}}}
gn_old= gn_out=; [ -n "$gn_ok" ] && [ -r {f}.sig" ] && command . {f}.sig" 2>/dev/null
if [ -n "$gn_ok" ] && [ -n "$gn_old" ] && [ "$gn_old" = "$gn_sig_{g.name}" ] && [ -r {f}.val" ] &&
  command . {f}.val" 2>/dev/null && [ -n "$gn_out" ]; then gn_cached=$gn_cached$gn_out
elif [ -n "$gn_ok" ] && [ -n "$GN_WRITE" ] && [ "${{gn_sig_{g.name}#*\\'}}" = "$gn_sig_{g.name}" ] &&
  : 2>/dev/null >{f}.sig"; then
  gn_out=$(printf '@@gpunode-cache %s\\n' "$N"; gn_run_{g.name}; printf '@@gpunode-cache-end %s' "$N")$gn_nl
  gn_quote "$gn_out" && printf "gn_out='%s'\\n" "$gn_q" >{f}.val" &&
    printf "gn_old='%s'\\n" "$gn_sig_{g.name}" >{f}.sig"
  [ ! -e {f}.out" ] || rm -f {f}.out"  # what an older gpunode stored, once
  gn_cached=$gn_cached$gn_out
else gn_run_{g.name}; fi
"""
    return "\n".join(sig) + "\n", wrapped


# $1 made safe inside single quotes (each ' becomes '\''), in gn_q: run only where a group is stored.
_QUOTE = r"""gn_quote() { gn_q= gn_r=$1; while :; do case $gn_r in
  *\'*) gn_q=$gn_q${gn_r%%\'*}\'\\\'\' gn_r=${gn_r#*\'};; *) gn_q=$gn_q$gn_r; return 0;; esac; done; }"""

# Every stored group at once, between this run's markers.
EMIT = r"""if [ -n "$gn_cached" ]; then
printf '@@gpunode:%s:cached\n%s\n@@gpunode:%s:cached-end 0\n' "$N" "$gn_cached" "$N"
fi
"""


def stored(stdout: str, nonce: str) -> tuple[dict[str, Section], str]:
    """The sections that the probe printed from the cache, and the output without them (pure)."""
    marker = f"@@gpunode:{nonce}:"
    region = next(marked.blocks(stdout, f"{marker}cached", lambda _: f"{marker}cached-end ",
                                key_ok=lambda key: key == "", newline=False), None)
    if region is None:
        return {}, stdout
    body, out, pos = region.body, {}, 0
    if region.code != "0":  # the probe always prints 0: anything else did not come from it
        raise _damaged(f"its end marker says {region.code}", body)
    while pos < len(body):
        head = re.compile(r"@@gpunode-cache (\S+)\n").match(body, pos)
        if head is None:
            raise _damaged("a stored group does not start with its header", body[pos:])
        old, pos = re.escape(head.group(1)), head.end()
        section = re.compile(rf"@@gpunode:{old}:section ([a-z0-9_]+)\n(.*?)\n@@gpunode:{old}:rc (-?\d+)\n", re.DOTALL)
        while (m := section.match(body, pos)) is not None:
            out[m.group(1)] = Section(m.group(2), int(m.group(3)))
            pos = m.end()
        tail = re.compile(rf"@@gpunode-cache-end {old}\n").match(body, pos)
        if tail is None:
            raise _damaged("a stored group ends early", body[pos:])
        pos = tail.end()
    return out, stdout[:region.start] + stdout[region.stop:]


def _damaged(why: str, evidence: str) -> FactError:
    return FactError(f"the facts cache in the state folder is damaged: {why}", evidence=evidence[-2000:],
                     hint="remove the state folder's facts-*.sig files on the target (default "
                     "/var/lib/gpunode/facts-*.sig) and re-run: the facts are then read afresh")
