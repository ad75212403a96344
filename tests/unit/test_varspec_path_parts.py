"""Paths that name another folder than they seem to are refused before any target is touched (issue 29:
model_source=/m/tiny-qwen3/.. staged into /dev/shm/.. and its probe walked all of /dev)."""

from __future__ import annotations

import pytest

from gpunode import variables
from gpunode.errors import InventoryError


@pytest.mark.parametrize(("value", "said"), [
    ("/mnt/lab/models/tiny-qwen3/..",
     "has a '.' or '..' part; write the folder it means without one (/mnt/lab/models)"),
    ("/mnt/lab/models/tiny-qwen3/.", "(/mnt/lab/models/tiny-qwen3)"),
    ("/mnt/lab/../etc/models", "(/mnt/etc/models)"),
    ("/", "is the root folder /; name the folder itself"),
    ("//", "is the root folder /"),
])
def test_a_path_with_dot_parts_or_the_root_is_refused_naming_the_key(value, said):
    with pytest.raises(InventoryError) as refused:
        variables.check({"model_source": value}, {"model_source": "--set"})
    assert said in str(refused.value) and "model_source" in str(refused.value)


@pytest.mark.parametrize("value", ["/mnt/lab/models/tiny-qwen3", "/mnt/lab/models/tiny-qwen3/", "/srv/m..x/.hidden"])
def test_plain_paths_pass(value):
    variables.check({"model_source": value})
