"""The acceptance profiles of a real demo run load in each simulator's documented input shape: the field names,
types and ranges each simulator's own source checks (docs/profiles.md cites them), one file per scope it holds, and
the identities that tie the numbers to the run's own counts."""

from __future__ import annotations

import json
import math
import shlex
import shutil
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml

from specmeter.metrics.sd import sum_counts
from specmeter.predict.acceptance import AcceptanceProfile
from specmeter.report.outputs import output
from specmeter.rundir.run_data import load_run
from specmeter.schemas.results import RunSummary

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunSummary]:
    work = tmp_path_factory.mktemp("profiles")
    run = load_run(Path(shutil.copytree(FIXTURE, work / FIXTURE.name)))
    output("profiles", work / "profiles").write(run)
    return work / "profiles", run.summary


def _drafters(summary: RunSummary) -> dict[str, int]:
    """The run's speculative configurations and their K (the fixture's are chains at one K each)."""
    return {c.id: c.k for c in summary.plan.configs if c.spec.enabled}


def _categories(summary: RunSummary, config_id: str) -> set[str]:
    res = summary.config(config_id)
    assert res is not None
    return {row.category for pr in res.points for row in (pr.categories.categories if pr.categories else ())}


def _al(summary: RunSummary, config_id: str, category: str | None = None) -> float:
    """AL from the run's own counts: the headline's over every point, or a category's per-request ones."""
    res = summary.config(config_id)
    assert res is not None
    counts = [pr.sd.headline for pr in res.points if pr.sd.headline is not None] if category is None else [
        row.counts for pr in res.points for row in (pr.categories.categories if pr.categories else ())
        if row.category == category]
    al = sum_counts(counts).acceptance_length
    assert al is not None
    return al


def _scopes(summary: RunSummary, config_id: str) -> list[tuple[str | None, str]]:
    """(category, file suffix) of every file a per-scope format writes for a configuration."""
    return [(None, ""), *((cat, f"-{cat}") for cat in sorted(_categories(summary, config_id)))]


def test_blis_takes_its_three_flags_with_a_rate_in_0_1(written: tuple[Path, RunSummary]) -> None:
    """BLIS (inference-sim PR #1538, cmd/root.go, sim/config.go): --num-speculative-tokens K in 0..1024,
    --speculative-acceptance-rate in [0, 1], required with K > 0, an optional --speculative-method label; decode
    advances 1 + rate x K tokens a step, so that is the measured AL."""
    root, summary = written
    for cid, k in _drafters(summary).items():
        for category, suffix in _scopes(summary, cid):
            words = shlex.split((root / cid / f"blis{suffix}.args").read_text(encoding="utf-8"))
            flags = dict(zip(words[::2], words[1::2], strict=True))
            assert set(flags) <= {"--num-speculative-tokens", "--speculative-acceptance-rate", "--speculative-method"}
            assert int(flags["--num-speculative-tokens"]) == k and 0 < k <= 1024
            rate = float(flags["--speculative-acceptance-rate"])
            assert math.isfinite(rate) and 0.0 <= rate <= 1.0
            assert flags.get("--speculative-method", "draft") in {"mtp", "eagle", "medusa", "ngram", "draft"}
            assert 1 + rate * k == pytest.approx(_al(summary, cid, category), abs=1e-5)


def test_aiconfigurator_experiments_carry_nextn_and_nextn_accepted_within_it(
        written: tuple[Path, RunSummary]) -> None:
    """AIConfigurator (src/aiconfigurator/sdk/speculative.py, cli/example.yaml): an experiment's nextn (draft
    depth, an int) and nextn_accepted, the average accepted draft tokens per step, 0 <= nextn_accepted <= nextn
    (each step yields 1 + nextn_accepted tokens)."""
    root, summary = written
    experiments: dict[str, Any] = yaml.safe_load((root / "aiconfigurator.yaml").read_text(encoding="utf-8"))
    expected = {cid + (f"--{cat}" if cat else "") for cid in _drafters(summary) for cat, _ in _scopes(summary, cid)}
    assert set(experiments) == expected
    for cid, k in _drafters(summary).items():
        for category, suffix in _scopes(summary, cid):
            exp = experiments[cid + suffix.replace("-", "--", 1)]
            assert set(exp) == {"nextn", "nextn_accepted"}
            assert isinstance(exp["nextn"], int) and exp["nextn"] == k
            assert isinstance(exp["nextn_accepted"], float) and 0.0 <= exp["nextn_accepted"] <= k
            assert 1 + exp["nextn_accepted"] == pytest.approx(_al(summary, cid, category), abs=1e-5)


def _rates(values: Any, k: int) -> list[float]:
    assert isinstance(values, list) and len(values) == k
    assert all(isinstance(v, float | int) and 0.0 <= v <= 1.0 for v in values)
    return [float(v) for v in values]


def _chain(entry: dict[str, Any], k: int) -> None:
    """One scope of a speculation profile: marginal P(first i+1 accepted), non-increasing; conditional P(draft i+1
    | first i), their ratios; the mean accept length 1 + the sum of the marginals (bonus token counted)."""
    marginal, conditional = _rates(entry["marginal_accept_rates"], k), _rates(entry["conditional_accept_rates"], k)
    assert all(b <= a for a, b in pairwise(marginal))
    assert conditional[0] == pytest.approx(marginal[0])
    for i in range(1, k):
        assert conditional[i] * marginal[i - 1] == pytest.approx(marginal[i], abs=1e-5)
    assert entry["mean_accept_length"] == pytest.approx(1 + sum(marginal), abs=1e-5)


def test_specdec_bench_speculation_profile_is_schema_1_0_with_both_conventions(
        written: tuple[Path, RunSummary]) -> None:
    """specdec_bench's speculation_profile.json (NVIDIA/Model-Optimizer PR #2247): schema_version "1.0", measured,
    method, num_speculative_tokens, conditional_accept_rates and marginal_accept_rates, mean_accept_length,
    acceptance_length_histogram keyed by acceptance length, accept_length_model, verification_method,
    per_category."""
    root, summary = written
    for cid, k in _drafters(summary).items():
        doc = json.loads((root / cid / "speculation_profile.json").read_text(encoding="utf-8"))
        assert doc["schema_version"] == "1.0" and doc["measured"] is True
        assert doc["method"] == "draft_model" and doc["num_speculative_tokens"] == k
        _chain(doc, k)
        assert doc["mean_accept_length"] == pytest.approx(_al(summary, cid), abs=1e-5)
        assert doc["accept_length_model"] in {"chain_analytic", "measured_per_k"}
        assert doc["verification_method"] in {"longest_prefix", "block"}
        hist = {int(length): n for length, n in doc["acceptance_length_histogram"].items()}
        assert set(hist) <= set(range(1, k + 2)) and all(isinstance(n, int) and n >= 0 for n in hist.values())
        # the histogram and the scalar describe one measurement: its step-weighted mean is the AL
        assert sum(length * n for length, n in hist.items()) / sum(hist.values()) == pytest.approx(
            doc["mean_accept_length"], abs=0.05)
        assert set(doc["per_category"]) == _categories(summary, cid)
        for category, entry in doc["per_category"].items():
            _chain(entry, k)
            assert entry["mean_accept_length"] == pytest.approx(_al(summary, cid, category), abs=1e-5)
        assert isinstance(doc["measurement_conditions"], dict) and doc["measurement_conditions"]["dataset"]


def test_dynamo_mocker_args_are_its_extra_engine_args_keys(written: tuple[Path, RunSummary]) -> None:
    """Dynamo's mocker (lib/mocker/src/common/protocols.rs, speculative.rs): --extra-engine-args JSON whose unknown
    keys are refused; aic_nextn in 1..=5; aic_nextn_accept_rates comma-separated floats in [0, 1], entry i P(draft i
    accepted | every earlier one was), as many as aic_nextn (fewer are padded with 0, more cut); its sampler's mean
    output per step is 1 + the sum of their running products."""
    root, summary = written
    for cid, k in _drafters(summary).items():
        for category, suffix in _scopes(summary, cid):
            args = json.loads((root / cid / f"dynamo-mocker{suffix}.json").read_text(encoding="utf-8"))
            assert set(args) == {"aic_nextn", "aic_nextn_accept_rates"}
            assert isinstance(args["aic_nextn"], int) and 1 <= args["aic_nextn"] <= 5 and args["aic_nextn"] == k
            rates = [float(r) for r in args["aic_nextn_accept_rates"].split(",")]
            assert len(rates) == k and all(math.isfinite(r) and 0.0 <= r <= 1.0 for r in rates)
            expected = 1 + sum(math.prod(rates[: i + 1]) for i in range(k))
            assert expected == pytest.approx(_al(summary, cid, category), abs=1e-4)


def test_planner_profiles_are_acceptance_profiles(written: tuple[Path, RunSummary]) -> None:
    """specmeter's planner profile (predict/acceptance.py): AcceptanceProfile's own fields, which it checks
    (rates in [0, 1], a step count per position), unconditional rates that never rise, per configuration and
    category."""
    root, summary = written
    doc = json.loads((root / "planner-profiles.json").read_text(encoding="utf-8"))
    assert set(doc["configurations"]) == set(_drafters(summary))
    for cid, k in _drafters(summary).items():
        entry = doc["configurations"][cid]
        assert entry["k"] == k
        assert set(entry["categories"]) == _categories(summary, cid)
        for fields in [entry["profile"], *entry["categories"].values()]:
            profile = AcceptanceProfile(**fields)
            assert profile.width == k and all(isinstance(s, int) and s > 0 for s in profile.steps)
            AcceptanceProfile.given(profile.per_position)  # refuses rates that rise
        assert entry["profile"]["category"] is None
        assert all(fields["category"] == cat for cat, fields in entry["categories"].items())
