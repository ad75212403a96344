"""One section of the facts probe (probe.py joins them into one script): its name, its shell body, when
it runs and which cache group it belongs to. Each area of facts/ keeps its sections beside its parser;
they import this, not probe.py, which imports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.facts.cache import Group

# Directories where driver libraries live on Debian/Ubuntu/RHEL hosts, in
# containers with bind-mounted drivers, and in NVIDIA's container images.
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/lib/x86_64-linux-gnu", "/lib64", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib",
            "/usr/lib/wsl/lib")


@dataclass(frozen=True)
class Snippet:
    """One section: a name and a shell body run in a subshell, stderr merged."""

    name: str
    body: str
    #: shell condition; when it is false the section is left out entirely
    when: str = ""
    #: shell text run once before every section, in the probe's own shell (its variables are
    #: seen by all sections): one process that serves several sections, such as one df
    prepare: str = ""
    #: the cache group this section belongs to (facts/cache.py): its output is reused while
    #: the files the group names are unchanged
    cached: Group | None = None
    #: run in the probe's own shell instead of a subshell: a fork each costs ~0.25 ms in a
    #: container, and a no-op pays for every section. Only for a body that leaves that shell as it
    #: found it: no exit, cd, set, shift, trap or exec, IFS restored, none of the probe's own
    #: variables (N, GN_*, gn_*, rc_*) assigned (tests/unit/test_facts_inline.py checks each one)
    inline: bool = False
