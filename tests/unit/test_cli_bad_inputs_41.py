"""The rest of issue 41's battery: hostile files written here, each refused by the CLI in its own
process within DEADLINE_S, exit 2, naming the file, line, host or value and what to do, no traceback,
no secret echoed and nothing written (the runner and the checks are test_cli_bad_inputs_table's).
Each section of ROWS is one guard; its comment names the bad input.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_cli_bad_inputs_table import FIFO, ct_vars, deep, refused_cleanly, snap
from tests.unit.test_cli_badinput import GOOD, H200, OFFLINE, PROVISION, SECRET

ONBOARD = ["onboard", "--inventory", "{d}/inv", "--host", "lab", "--ct", "300", "--check"]
RESOLVE_SNAP = ["resolve", "--facts", "{d}/snap"]
LAB_CYRILLIC = "l\u0430b"  # "lab" with a Cyrillic а (U+0430)


def meta_with(extra: str) -> dict:
    """The recorded H200 snapshot whose meta.json gains `"x": <extra>` (written raw, not by json.dumps)."""
    meta = json.dumps(json.loads((H200 / "meta.json").read_text()))
    return {**snap(), "snap/meta.json": meta[:-1] + f', "x": {extra}}}'}


def big_inventory(size: int = 22_000_000) -> str:
    host = "  host{0:06d}:\n    address: 10.0.{1}.{2}\n    containers: {{200: {{gpus: [0]}}}}\n"
    parts, n, total = ["hosts:\n"], 0, 0
    while total < size:
        parts.append(host.format(n, n // 256 % 256, n % 256))
        total += len(parts[-1])
        n += 1
    return "".join(parts)


ROWS = [
    # --- YAML keys that cannot be keys -------------------------------------------------------------
    ("inventory-list-key", {"inv/hosts.yml": GOOD.replace("vars: {model_source: /mnt/models/m}",
                                                          "vars: {model_source: /mnt/models/m, [a, b]: 1}")},
     PROVISION, ["inv/hosts.yml:8: a key is a list (['a', 'b']); a key must be a name or a number"]),
    ("inventory-mapping-host-name", {"inv/hosts.yml": "hosts:\n  ? {a: 1}\n  : {address: 127.0.0.1}\n"}, PROVISION,
     ["inv/hosts.yml:2: a key is a mapping"]),
    ("group-vars-complex-key", {"inv/group_vars/all.yml": "? [engine]\n: vllm\n"}, PROVISION,
     ["inv/group_vars/all.yml:1: a key is a list"]),
    ("e-file-list-key", {"vars.yml": "? [tp, 1]\n: 2\n"}, [*PROVISION, "-e", "@{d}/vars.yml"],
     ["vars.yml:1: a key is a list"]),
    # --- snapshot meta.json ------------------------------------------------------------------------
    ("snapshot-meta-deep", meta_with(deep(100_000)), RESOLVE_SNAP,
     ["snap/meta.json is nested too deeply to read"]),
    ("snapshot-meta-5000-digits", meta_with("9" * 5000), RESOLVE_SNAP,
     ["snap/meta.json holds a value that cannot be read", "4300"]),
    # --- size ----------------------------------------------------------------------------------------
    ("inventory-22mb", {"inv/hosts.yml": big_inventory()}, PROVISION,
     ["inv/hosts.yml: YAML file is 2200", "bytes, too large (at most 4194304 are read)", "split it"]),
    ("inventory-ini-22mb", {"ini/hosts": "[gpu]\n" + "lab ansible_port=1\n" * 1_200_000},
     [*PROVISION[:2], "{d}/ini/hosts", *PROVISION[3:]], ["ini/hosts: inventory file is 22800006 bytes, too large"]),
    ("inventory-million-values-no-alias", {"inv/hosts.yml": GOOD + "vars: {extra_args: [" + "1," * 1_100_000 + "]}\n"},
     PROVISION, ["inv/hosts.yml:11: YAML holds more than 1000000 values"]),
    # --- names that look like known ones --------------------------------------------------------------
    ("host-homoglyph", {}, [*PROVISION[:4], LAB_CYRILLIC, *PROVISION[5:]],
     [f"unknown host '{LAB_CYRILLIC}'", "it looks like 'lab' but differs from it by look-alike characters",
      "CYRILLIC SMALL LETTER A, U+0430) at character 2"]),
    ("group-member-homoglyph",
     {"inv/hosts.yml": GOOD.replace("gpu: {hosts: [lab]}", f"gpu: {{hosts: [{LAB_CYRILLIC}]}}")}, PROVISION,
     [f"group gpu names unknown host '{LAB_CYRILLIC}'", "'l\\u0430b' holds 'а'"]),
    ("limit-zero-width-space", {}, [*PROVISION[:3], "--limit", "lab\u200b/200", "--check"],
     ["it looks like 'lab/200'", "ZERO WIDTH SPACE, U+200B"]),
    ("host-vars-file-fullwidth", {"inv/host_vars/\uff4cab.yml": "tp: 1\n"}, PROVISION,
     ["is for unknown host '\uff4cab'", "FULLWIDTH LATIN SMALL LETTER L"]),
    ("variable-homoglyph", ct_vars("t\u0440: 1"), PROVISION, ["variable t\u0440 (from ", "it looks like 'tp'"]),
    # --- Jinja: refused, never run ----------------------------------------------------------------
    ("jinja-pipe-lookup", ct_vars("served_model_name: \"{{ lookup('pipe', 'touch {d}/pwned') }}\""), PROVISION,
     ["inv/hosts.yml:8: served_model_name holds a Jinja template", "does not evaluate", "!unsafe"]),
    ("jinja-in-a-list", ct_vars("extra_args: ['--x', '{% for i in range(9) %}{% endfor %}']"), PROVISION,
     ["extra_args[1] holds a Jinja template"]),
    ("jinja-in-group-vars", {"inv/group_vars/gpu.yml": "served_model_name: '{{ inventory_hostname }}'\n"}, PROVISION,
     ["inv/group_vars/gpu.yml:1: served_model_name holds a Jinja template ('{{ inventory_hostname }}')"]),
    ("jinja-secret-not-echoed", ct_vars("hf_token: '{{ " + SECRET + " }}'"), PROVISION,
     ["hf_token holds a Jinja template, which"]),
    ("jinja-ini", {"ini/hosts": "[gpu]\nlab ansible_host=127.0.0.1 ansible_port=1 containers=\"{200: {}}\"\n\n"
                   "[gpu:vars]\nserved_model_name={{ lookup('env', 'HOME') }}\n"},
     [*PROVISION[:2], "{d}/ini/hosts", *PROVISION[3:]], ["ini/hosts:5: served_model_name holds a Jinja template",
                                                         "set it in a YAML file, tagged !unsafe"]),
    ("jinja-set", {}, [*PROVISION, "--set", "served_model_name={{ 7 * 7 }}"],
     ["--set: served_model_name holds a Jinja template"]),
    ("jinja-e-file", {"vars.yml": "served_model_name: '{{ 7 * 7 }}'\n"}, [*PROVISION, "-e", "@{d}/vars.yml"],
     ["vars.yml:1: served_model_name holds a Jinja template"]),
    # --- a path that is a link round in a loop or to nothing: said so, not "does not exist" ----------
    ("inventory-link-loop", {"loop": ("link", "loop")}, [*PROVISION[:2], "{d}/loop", *PROVISION[3:]],
     ["loop is a symbolic link whose links lead round in a loop"]),
    ("inventory-dangling-link", {"hosts.yml": ("link", "gone.yml")}, [*PROVISION[:2], "{d}/hosts.yml", *PROVISION[3:]],
     ["hosts.yml is a symbolic link to 'gone.yml', which does not exist"]),
    ("e-file-link-loop", {"loop": ("link", "loop")}, [*PROVISION, "-e", "@{d}/loop"],
     ["loop: is a symbolic link whose links lead round in a loop"]),
    ("limit-file-link-loop", {"loop": ("link", "loop")}, [*PROVISION[:3], "--limit", "@{d}/loop", "--check"],
     ["loop: is a symbolic link whose links lead round in a loop"]),
    ("facts-link-loop", {"loop": ("link", "loop")}, ["resolve", "--facts", "{d}/loop"],
     ["facts snapshot ", "loop is a symbolic link whose links lead round in a loop"]),
    ("facts-meta-link-loop", {**snap(), "snap/meta.json": ("link", "meta.json")}, RESOLVE_SNAP,
     ["meta.json: its symbolic links lead round in a loop"]),
    ("model-link-loop", {"loop": ("link", "loop")}, [*OFFLINE[:3], "--model", "{d}/loop"],
     ["loop is a symbolic link whose links lead round in a loop"]),
    ("model-config-dangling", {"model/config.json": ("link", "gone.json")}, OFFLINE,
     ["config.json: cannot read it: a symbolic link to gone.json, which is missing"]),
    ("e-file-fifo", {"vars.yml": FIFO}, [*PROVISION, "-e", "@{d}/vars.yml"],
     ["vars.yml: YAML file is a named pipe (FIFO), not a regular file"]),
    ("limit-file-fifo", {"hosts.txt": FIFO}, [*PROVISION[:3], "--limit", "@{d}/hosts.txt", "--check"],
     ["hosts.txt: --limit file is a named pipe (FIFO), not a regular file"]),
    ("journal-link-loop", {"loop": ("link", "loop")}, ["doctor", "--journal", "{d}/loop"],
     ["--journal ", "loop: is a symbolic link whose links lead round in a loop"]),
    # --- host and group names past 255 characters ----------------------------------------------------
    ("host-name-100kb", {"inv/hosts.yml": "hosts:\n  ? " + "h" * 100_000 + "\n  : {address: 127.0.0.1}\n"}, PROVISION,
     ["inv/hosts.yml:2: the host name 'hhhhh", "(100000 characters) is too long: a name is at most 255 characters"]),
    ("group-name-100kb", {"inv/hosts.yml": GOOD + "  ? " + "g" * 100_000 + "\n  : {hosts: [lab]}\n"}, PROVISION,
     ["inv/hosts.yml:11: the group name 'ggggg", "is too long"]),
    ("ini-group-name-5000", {"ini/hosts": "[" + "g" * 5000 + "]\nlab ansible_host=127.0.0.1 ansible_port=1\n"},
     [*PROVISION[:2], "{d}/ini/hosts", *PROVISION[3:]], ["ini/hosts:1: the group name 'ggggg", "is too long"]),
    ("group-name-yes", {"inv/hosts.yml": GOOD + "  yes: {hosts: [lab]}\n"}, PROVISION,
     ["inv/hosts.yml:11: the group name yes/true/on is read by YAML as True, not a name"]),
    # --- keys inside a mapping variable ----------------------------------------------------------------
    ("pve-api-misspelled-secret-key", {"inv/host_vars/lab.yml":
                                       f"pve_api: {{token_id: 'root@pam!g', token_secrte: {SECRET}}}\n"}, ONBOARD,
     ["variable pve_api=... (from ", "has the key 'token_secrte', which nothing reads (did you mean token_secret?)"]),
]


def test_the_rows_have_distinct_names():
    assert len({r[0] for r in ROWS}) == len(ROWS)


@pytest.mark.parametrize("files,argv,expected", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_input_exits_2_naming_it_in_time_and_writes_nothing(files, argv, expected, tmp_path):
    refused_cleanly(files, argv, expected, tmp_path)
