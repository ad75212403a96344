"""--set key=value: YAML types for values, but versions stay exactly as typed."""

from __future__ import annotations

import pytest

from gpunode.cli.common import parse_sets
from gpunode.errors import InventoryError


def test_values_keep_their_yaml_types():
    assert parse_sets(["mem_fraction=0.85", "servers_router=false", "gpus=[0, 1]", "router_policy=random"]) == {
        "mem_fraction": 0.85, "servers_router": False, "gpus": [0, 1], "router_policy": "random"}


def test_a_python_version_with_a_trailing_zero_is_not_read_as_a_number():
    # Found by the provision lab test: --set python=3.10 was refused as "python 3.1".
    assert parse_sets(["python=3.10", "engine_version=0.5.10"]) == {"python": "3.10", "engine_version": "0.5.10"}


def test_an_item_without_a_value_is_refused():
    with pytest.raises(InventoryError, match="is not key=value"):
        parse_sets(["python"])


def test_a_python_version_that_yaml_turned_into_a_number_is_refused():
    import pytest

    from gpunode.errors import InventoryError
    from gpunode.resolve.choices import from_vars

    with pytest.raises(InventoryError, match=r"python=3.1 \(from .+\) is a number") as err:
        from_vars({"python": 3.1})
    assert 'quote it, python: "3.10"' in err.value.message
    assert from_vars({"python": "3.10"}).python == "3.10"
