"""What issue 41's guards still let through, as they should, and what they mask. The refusals
themselves are rows of tests/unit/test_cli_bad_inputs_41.py."""

from __future__ import annotations

from gpunode import secrets


def test_every_text_under_a_secret_name_is_masked():
    secrets.register_vars({"vault_token": {"primary": "tok-aaaa-1111", "spares": ["tok-bbbb-2222"]}})
    assert secrets.redact("tok-aaaa-1111 tok-bbbb-2222") == f"{secrets.MASK} {secrets.MASK}"
