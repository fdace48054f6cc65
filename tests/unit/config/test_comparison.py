"""compare's readings are one model (config/comparison.py): --check's bounds read as fractions from a percentage or
a fraction, and a combination compare cannot read refused in one line naming the flags."""

from __future__ import annotations

from typing import Any

import pytest

from specmeter.cli.settings import validated
from specmeter.common.errors import InputError
from specmeter.config import flag_text
from specmeter.config.comparison import Bounds, Comparison


def test_the_bounds_default_and_take_a_percentage_or_a_fraction() -> None:
    assert Bounds() == Bounds(max_al_drop=0.02, max_speedup_drop=0.03)
    given = Comparison(check=True, max_al_drop=flag_text.drop("5%", "--max-al-drop"))
    assert given.max_al_drop == pytest.approx(0.05) and given.max_speedup_drop == Bounds().max_speedup_drop


@pytest.mark.parametrize(("given", "says"), [
    ({"max_al_drop": 0.05}, "--max-al-drop bound --check: add --check"),
    ({"pool": True, "max_speedup_drop": 0.1}, "--max-speedup-drop bound --check"),
    ({"pool": True, "check": True}, "--pool takes runs of one plan, without --check"),
    ({"pool": True, "allow_different_workloads": True}, "--allow-different-workloads"),
])
def test_a_reading_compare_cannot_give_is_one_line(given: dict[str, Any], says: str) -> None:
    with pytest.raises(InputError, match=says):
        validated(Comparison, given)
