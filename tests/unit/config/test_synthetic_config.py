"""Synthetic acceptance as a spec carries it (synthetic.py, config.SpecConfig): validation in one line naming the
key and the fix, the rates each engine turns a length into, the label and id that say so, and the sweep's
ceiling (plans/sweep.py)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from pydantic import ValidationError

from specmeter.common.errors import InputError
from specmeter.config.files import build_model
from specmeter.config.models import SpecConfig
from specmeter.config.synthetic import SyntheticAcceptance, geometric_rates, min_variance_rates
from specmeter.plans.run import config_id
from specmeter.plans.sweep import SweepSpec


def spec(k: int = 4, method: str = "draft_model", **kw: Any) -> SpecConfig:
    raw: dict[str, Any] = {"method": method, "num_speculative_tokens": k, **kw}
    if method == "draft_model":
        raw["model"] = "models/demo-draft"
    return SpecConfig.model_validate(raw)


@pytest.mark.parametrize(("synthetic", "must_say"), [
    ({"rates": [0.9, 0.7]}, "one rate per drafted position"),
    ({"rates": [0.5, 0.7, 0.2, 0.1]}, "must not increase"),
    ({"rates": [1.2, 1.0, 1.0, 1.0]}, "rates[0] = 1.2 is not a probability"),
    ({"rates": [0.9, 0.7, 0.5, float("nan")]}, "is not a probability"),
    ({"length": 6}, "exceeds K + 1 = 5"),
    ({"length": 0.5}, "in [1, K+1]"),
    ({}, "exactly one of rates"),
    ({"rates": [0.9, 0.7, 0.5, 0.3], "length": 3}, "exactly one of rates"),
    ({"rate": [0.9]}, "rate"),
])
def test_invalid_synthetic_acceptance_fails_in_one_line_naming_the_fix(synthetic: dict[str, Any],
                                                                      must_say: str) -> None:
    raw = {"method": "draft_model", "model": "d", "num_speculative_tokens": 4, "synthetic_acceptance": synthetic}
    with pytest.raises(InputError) as err:
        build_model(SpecConfig, raw, "spec")
    message = str(err.value)
    assert "\n" not in message and "synthetic_acceptance" in message and must_say in message


def test_synthetic_acceptance_needs_a_drafter() -> None:
    with pytest.raises(ValidationError, match="needs a drafter"):
        SpecConfig.model_validate({"synthetic_acceptance": {"length": 2}})


@pytest.mark.parametrize("extra", [{"spec_synth_rates": "0.9,0.5"}, {"spec_synth_len": "2"},
                                   {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.0}])
def test_engine_extras_that_switch_synthetic_acceptance_on_are_refused(extra: dict[str, Any]) -> None:
    """Behind specmeter's back the results would never say the run is synthetic."""
    with pytest.raises(ValidationError, match="give synthetic_acceptance"):
        spec(2, extra=extra)
    spec(2, extra={"rejection_sample_method": "block"})  # another verification method is not synthetic


def test_the_geometric_length_solve_meets_the_length_like_llamacpps() -> None:
    for k in (1, 2, 4, 7):
        for length in (1.0, 1.3, 2.0, k + 0.5, k + 1.0):
            rates = geometric_rates(length, k)
            assert len(rates) == k and rates == sorted(rates, reverse=True)
            assert 1.0 + sum(rates) == pytest.approx(length, abs=1e-6)
            assert all(b == pytest.approx(rates[0] * a) for a, b in itertools.pairwise(rates))  # one p per step


def test_the_min_variance_schedule_is_whole_positions_then_a_fraction_like_vllms() -> None:
    assert min_variance_rates(3.4, 4) == pytest.approx([1.0, 1.0, 0.4, 0.0])
    assert min_variance_rates(5.0, 4) == [1.0] * 4
    assert min_variance_rates(1.0, 3) == [0.0] * 3
    for length in (1.5, 2.25, 3.0, 4.75):
        assert 1.0 + sum(min_variance_rates(length, 4)) == pytest.approx(length)


def test_a_length_resolves_per_engine_schedule_and_rates_as_given() -> None:
    by_length = SyntheticAcceptance(length=3.4)
    assert by_length.rates_for(4) == geometric_rates(3.4, 4)
    assert by_length.rates_for(4, "min_variance") == min_variance_rates(3.4, 4)
    by_rates = SyntheticAcceptance(rates=[0.9, 0.7, 0.5, 0.3])
    assert by_rates.rates_for(4, "min_variance") == [0.9, 0.7, 0.5, 0.3]
    assert by_rates.set_al(4) == pytest.approx(3.4) and by_length.set_al(4) == 3.4


def test_label_and_id_say_synthetic_and_never_equal_the_real_drafters() -> None:
    real = spec(4)
    synth = spec(4, synthetic_acceptance={"rates": [0.9, 0.7, 0.5, 0.3]})
    ceiling = spec(4, synthetic_acceptance={"length": 5})
    assert not real.synthetic and synth.synthetic and ceiling.synthetic
    assert "synthetic AL=3.4" in synth.label() and "synthetic" not in real.label()
    assert "ceiling" in ceiling.label() and "AL=5" in ceiling.label()
    ids = {config_id(real), config_id(synth), config_id(ceiling)}
    assert len(ids) == 3
    assert "synth" in config_id(synth) and config_id(ceiling).endswith("ceiling")
    assert SyntheticAcceptance(rates=[1.0, 1.0]).is_ceiling(2) and not SyntheticAcceptance(length=2.9).is_ceiling(2)


def sweep(candidates: list[dict[str, Any]], **kw: Any) -> SweepSpec:
    return SweepSpec.model_validate({"engine": {"model": "models/demo-target", "kind": "llamacpp"},
                                     "candidates": candidates, **kw})


DRAFT = {"method": "draft_model", "model": "models/demo-draft"}


def test_a_sweep_candidate_carries_synthetic_acceptance_under_its_own_id() -> None:
    sw = sweep([{**DRAFT, "k": [2, 4]}, {**DRAFT, "k": 4, "synthetic_acceptance": {"rates": [0.9, 0.7, 0.5, 0.3]}}])
    by_id = {c.id: c for c in sw.configs()}
    synthetic = [c for c in by_id.values() if c.spec.synthetic]
    assert len(synthetic) == 1 and synthetic[0].k == 4 and "synth" in synthetic[0].id
    assert "draft_model-k4" in by_id and not by_id["draft_model-k4"].spec.synthetic


def test_synthetic_rates_fit_one_k_so_a_k_list_fails_naming_the_key() -> None:
    with pytest.raises(ValidationError, match=r"synthetic_acceptance\.rates has 2 values"):
        sweep([{**DRAFT, "k": [2, 4], "synthetic_acceptance": {"rates": [0.9, 0.5]}}])


def test_a_named_synthetic_candidate_must_say_so_in_its_name() -> None:
    with pytest.raises(ValidationError, match="put 'synth' in it"):
        sweep([{**DRAFT, "k": 2, "id": "fast", "synthetic_acceptance": {"length": 2}}])
    sweep([{**DRAFT, "k": 2, "id": "fast-synth", "synthetic_acceptance": {"length": 2}}])


def test_ceiling_adds_every_drafter_and_k_at_100_percent_acceptance() -> None:
    sw = sweep([{**DRAFT, "k": [2, 4]}, {"method": "ngram", "k": 3, "prompt_lookup_max": 3},
                {**DRAFT, "k": 4, "synthetic_acceptance": {"length": 3}}], ceiling=True)
    configs = sw.configs()
    real = [c for c in configs if c.spec.enabled and not c.spec.synthetic]
    ceilings = [c for c in configs if c.spec.synthetic_acceptance is not None
                and c.spec.synthetic_acceptance.is_ceiling(c.k)]
    assert len(ceilings) == len(real) == 3
    for c in ceilings:
        assert c.id.endswith("-ceiling") and c.spec.synthetic_acceptance is not None
        assert c.spec.synthetic_acceptance.set_al(c.k) == c.k + 1
        twin = next(r for r in real if r.id == c.id.removesuffix("-ceiling"))
        assert c.spec.model_copy(update={"synthetic_acceptance": None}) == twin.spec
    assert not any(c.id.endswith("-ceiling") for c in sweep([{**DRAFT, "k": 2}]).configs())


def test_ceiling_needs_a_launched_candidate() -> None:
    with pytest.raises(ValidationError, match="every candidate attaches"):
        sweep([{**DRAFT, "k": 2, "endpoint": "http://127.0.0.1:9"}], ceiling=True)
