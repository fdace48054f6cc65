"""The one mechanism that turns an engine's flag table into argv or a config object (engines/flags.py)."""

from __future__ import annotations

import pytest

from specmeter.common.errors import InputError
from specmeter.config.models import SpecConfig
from specmeter.engines.flags import Each, Flag, Row, Unsupported, argv, dashed, fixed, overridden, settings

SPEC = SpecConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4,
                  extra={"some_option": 2, "a_switch": True, "gone": False})


def test_unset_values_write_nothing_and_true_is_a_bare_flag() -> None:
    table: tuple[Row[SpecConfig], ...] = (
        Flag("--k", "k"), Flag("--lo", "prompt_lookup_min"), Flag("--hi", "prompt_lookup_max"),
        Flag("--on", fixed(True)), Flag("--off", fixed(False)), Flag("--never", "k", when=lambda s: False),
        Flag("--method", "method"),
    )
    assert argv(settings(table, SPEC)) == ["--k", "3", "--hi", "4", "--on", "--method", "ngram"]


def test_each_spreads_a_mapping_and_a_later_pair_overrides_in_place() -> None:
    table: tuple[Row[SpecConfig], ...] = (Flag("--some-option", fixed(1)), Flag("--gone", fixed(1)),
                                          Each("extra", name=dashed))
    pairs = settings(table, SPEC)
    assert argv(pairs) == ["--some-option", "1", "--gone", "1", "--some-option", "2", "--a-switch", "--gone",
                           "False"]
    assert argv(overridden(pairs)) == ["--some-option", "2", "--a-switch"]
    assert dict(settings((Flag("some_option", fixed(1)), Each("extra")), SPEC)) == {
        "some_option": 2, "a_switch": True, "gone": False}


def test_an_unsupported_field_is_refused_with_its_reason_only_when_set() -> None:
    table: tuple[Row[SpecConfig], ...] = (Unsupported("draft_tensor_parallel_size", "no draft tp here"),
                                          Unsupported("prompt_lookup_max", lambda s: f"no window for {s.method.value}"))
    with pytest.raises(InputError, match=r"^no window for ngram$"):
        settings(table, SPEC)
    assert settings(table[:1], SPEC) == []
