"""How the machine a server runs on reaches it: the one rule for worker URLs and readiness.

A server listening on a wildcard (`host: 0.0.0.0` or `::`, README's fleet example) is reached on
loopback; one bound to an address only there. The router's --worker-urls, the Ready step's
URLs and the names it looks for in the router's /workers are all made here, so they agree for
every `host` (issue 41: the router had http://0.0.0.0:PORT while Ready waited for 127.0.0.1).
A server's own command line says what it binds (flag_value(argv, "--host")): the servers role reads
it from the plan, inv status and the scrape targets from the unit systemd runs.
"""

from __future__ import annotations

WILDCARD = ("0.0.0.0", "::", "")


def near(host: str) -> str:
    """The address, as a URL writes it, at which this machine reaches a listener on `host`."""
    if host in WILDCARD:
        return "127.0.0.1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def url(host: str, port: int) -> str:
    return f"http://{near(host)}:{port}"


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value after `flag` (or in `flag=value`) on a command line."""
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None
