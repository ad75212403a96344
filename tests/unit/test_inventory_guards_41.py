"""What issue 41's guards still let through, as it should: a value tagged !unsafe keeps its braces,
pve_api's own token_secret is a secret where it belongs (provision refused the documented form once
the inventory's secrets were registered), and every text under a secret name is masked. The refusals
themselves are rows of tests/unit/test_cli_bad_inputs_41.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode import inventory, lookalike, secrets
from gpunode.cli.common import select_targets
from gpunode.errors import InventoryError

HOSTS = """\
hosts:
  kpro6:
    address: 127.0.0.1
    vars:
      pve_api: {{token_id: 'root@pam!gpunode', token_secret: {secret}}}
    containers:
      200:
        vars: {{model_source: /mnt/models/m, {more}}}
"""


def targets(tmp_path: Path, more: str, secret: str = "9f1c2b7e-pve-secret") -> list[inventory.Target]:
    (tmp_path / "hosts.yml").write_text(HOSTS.format(secret=secret, more=more))
    return select_targets(inventory.load(tmp_path / "hosts.yml"), "kpro6", 200, None, {})


def test_a_value_tagged_unsafe_keeps_its_braces(tmp_path):
    (target,) = targets(tmp_path, "served_model_name: !unsafe '{{ qwen }}'")
    assert target.vars["served_model_name"] == "{{ qwen }}"


def test_unsafe_tags_text_only(tmp_path):
    with pytest.raises(InventoryError, match=r"hosts.yml:8: !unsafe tags one text value, not a list"):
        targets(tmp_path, "extra_args: !unsafe ['{{ a }}']")


def test_pve_apis_own_token_secret_is_taken_and_masked(tmp_path):
    (target,) = targets(tmp_path, "tp: 1", secret="9f1c2b7e-pve-secret")
    assert target.vars["pve_api"]["token_secret"] == "9f1c2b7e-pve-secret"
    assert secrets.redact("token 9f1c2b7e-pve-secret") == f"token {secrets.MASK}"


def test_the_secret_copied_into_another_key_of_pve_api_is_still_refused(tmp_path):
    (tmp_path / "hosts.yml").write_text(HOSTS.format(secret="9f1c2b7e-pve-secret", more="tp: 1").replace(
        "token_secret: 9f1c2b7e-pve-secret", "token_secret: 9f1c2b7e-pve-secret, address: 9f1c2b7e-pve-secret"))
    with pytest.raises(InventoryError, match="variable pve_api .* holds the value of a secret variable"):
        select_targets(inventory.load(tmp_path / "hosts.yml"), "kpro6", 200, None, {})


def test_every_text_under_a_secret_name_is_masked():
    secrets.register_vars({"vault_token": {"primary": "tok-aaaa-1111", "spares": ["tok-bbbb-2222"]}})
    assert secrets.redact("tok-aaaa-1111 tok-bbbb-2222") == f"{secrets.MASK} {secrets.MASK}"


@pytest.mark.parametrize(("typed", "known", "says"), [
    ("kpro6", ["k\u0440ro6"], "the known 'k\\u0440ro6' holds 'р' (CYRILLIC SMALL LETTER ER, U+0440) at character 2"),
    ("\u039a\u0420RO6", ["KPRO6"], "GREEK CAPITAL LETTER KAPPA"),
    ("kpro7", ["kpro6"], ""),  # a different name, not a look-alike: difflib's "did you mean" stays
])
def test_a_lookalike_is_told_apart_from_a_typo(typed, known, says):
    found = lookalike.hint(typed, known)
    assert (says in found) if says else found == ""


MERGED = """\
groups:
  gpu:
    hosts: [kpro6]
    vars: &common {tp: 1, engine: vllm}
  big:
    hosts: [kpro6]
    vars:
      <<: *common
      tp: 2
hosts:
  kpro6: {address: 127.0.0.1}
"""


def test_a_key_of_a_mapping_overrides_the_one_its_merge_key_brings(tmp_path):
    """issue 41: `<<: *common` then `tp: 2`, what merge keys are for, was refused as a key that appears twice."""
    (tmp_path / "hosts.yml").write_text(MERGED)
    assert inventory.load(tmp_path / "hosts.yml").group_vars["big"] == {"tp": 2, "engine": "vllm"}


def test_two_keys_of_one_name_beside_a_merge_key_are_still_refused(tmp_path):
    (tmp_path / "hosts.yml").write_text(MERGED.replace("      tp: 2\n", "      tp: 2\n      tp: 3\n"))
    with pytest.raises(InventoryError, match=r"hosts.yml:10: key 'tp' appears twice"):
        inventory.load(tmp_path / "hosts.yml")
