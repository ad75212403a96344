"""Fleet and multi-node mistakes the inventory alone shows are refused before any node is
contacted (issue 41). Every host here listens on port 1 of an address where nothing answers: a
check made only after connecting would fail with "cannot reach" instead of its message."""

from __future__ import annotations

from pathlib import Path

import pytest

FLEET = """\
hosts:
  a: {address: 127.0.0.1, port: 1, vars: {fleet_router: a, host: 0.0.0.0, fleet_address: 10.0.0.5%(a)s}}
  b: {address: 127.0.0.1, port: 1, vars: {fleet_router: a, host: 0.0.0.0, fleet_address: %(b)s}}
groups:
  fleet: {hosts: [a, b]}
"""
MULTI = """\
hosts:
  h1: {address: %(head)s, port: 1}
  h2: {address: 10.0.0.2, port: 1}
groups:
  mn: {hosts: [h1, h2], vars: {multinode: true, model_source: /mnt/models/m%(more)s}}
"""

CASES = {
    "one-address": (FLEET % {"a": "", "b": "10.0.0.5"}, ["-g", "fleet"],
                    "a and b have one address, 10.0.0.5"),
    "address-with-port": (FLEET % {"a": ":8000", "b": "10.0.0.6"}, ["-g", "fleet"],
                          "fleet_address '10.0.0.5:8000' is not an address"),
    "router-port-on-a-server": (FLEET.replace("fleet_router: a,", "fleet_router: a, fleet_router_port: 30002,", 1)
                                % {"a": "", "b": "10.0.0.6"}, ["-g", "fleet"],
                                "fleet_router_port 30002 is also the port of its server 2"),
    "router-port-on-the-router": (FLEET.replace("fleet_router: a,", "fleet_router: a, fleet_router_port: 30000,", 1)
                                  % {"a": "", "b": "10.0.0.6"}, ["-g", "fleet"],
                                  "fleet_router_port 30000 is also its router_port"),
    "loopback-head": (MULTI % {"head": "127.0.0.1", "more": ""}, ["-g", "mn"],
                      "the head h1's address 127.0.0.1 is loopback"),
    "limit-leaves-a-node-out": (MULTI % {"head": "10.0.0.1", "more": ""}, ["-g", "mn", "-l", "h1"],
                                "group mn is one multi-node server, but this run selects only h1 of it (not h2)"),
    "dist-init-port-on-a-server": (MULTI % {"head": "10.0.0.1", "more": ", dist_init_port: 30001"}, ["-g", "mn"],
                                   "h1: dist_init_port 30001 is also its base_port"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_before_any_node_is_contacted(case, tmp_path: Path, capsys, monkeypatch):
    from gpunode.cli.main import main

    text, argv, said = CASES[case]
    (tmp_path / "hosts.yml").write_text(text)
    monkeypatch.setenv("HOME", str(tmp_path))
    code: object = 0
    try:
        main(["gpunode", "provision", "-i", str(tmp_path / "hosts.yml"), "--check", *argv])
    except SystemExit as done:
        code = done.code
    err = capsys.readouterr().err
    assert code == 2 and said in err, err
    assert "cannot reach" not in err
