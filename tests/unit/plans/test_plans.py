"""Plans: what `run`, `compare-workloads` and `sweep` build (plans/run.py, plans/sweep.py), what a Plan
accepts (schemas/plan.py), and the order its cells run in (runner.schedule). No server is involved."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.execution.runner import schedule
from specmeter.plans.run import ATTACHED, BASELINE, compare_workloads_plan, config_id, run_plan
from specmeter.plans.sweep import SweepSpec, read_sweep_file
from specmeter.schemas.plan import MatchedRandom, Plan, PlannedConfig, Role, WorkloadSelection

WORKLOAD = WorkloadSelection(dataset="sample")
NGRAM4 = SpecConfig(method="ngram", num_speculative_tokens=4)


# ---- run / compare-workloads --------------------------------------------------------------------------


def test_config_ids() -> None:
    assert config_id(SpecConfig()) == BASELINE
    assert config_id(NGRAM4) == "ngram-k4"
    assert config_id(SpecConfig(method="draft_model", num_speculative_tokens=2, draft_model="d")) == "draft_model-k2"
    assert config_id(SpecConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=2,
                                prompt_lookup_max=5)) == "ngram-k3-n2-5"
    assert config_id(SpecConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_max=5)) == "ngram-k3-n-5"
    dyn = SpecConfig(method="ngram", num_speculative_tokens=4, num_speculative_tokens_per_batch_size=[(1, 8, 4)])
    assert config_id(dyn) == "ngram-k4-dynamic"


def test_run_plan_attach_without_spec_is_one_attached_config() -> None:
    plan = run_plan(EngineSpec(endpoint="http://127.0.0.1:1"), SpecConfig(), LoadSpec(), baseline=True,
                    baseline_endpoint=None, workload=WORKLOAD)
    (only,) = plan.configs
    assert only.id == ATTACHED and only.role is Role.candidate
    assert only.label == "as the server runs"  # specmeter does not know what the server speculates with
    assert plan.kind == "run" and plan.repeats == 1 and not plan.interleave


def test_run_plan_attach_with_spec_and_baseline_endpoint() -> None:
    plan = run_plan(EngineSpec(endpoint="http://127.0.0.1:1"), NGRAM4, LoadSpec(concurrency=[1, 4]), baseline=True,
                    baseline_endpoint="http://127.0.0.1:2", workload=WORKLOAD, repeats=3, interleave=True)
    assert [c.id for c in plan.configs] == ["ngram-k4", BASELINE]
    sd, base = plan.configs
    assert sd.engine.endpoint == "http://127.0.0.1:1" and base.engine.endpoint == "http://127.0.0.1:2"
    assert base.role is Role.baseline and not base.spec.enabled and base.label == "off"
    assert sd.server != base.server
    assert plan.baseline_for(sd) is base and plan.baseline_for(base) is None
    assert plan.repeats == 3 and plan.interleave
    # without a baseline endpoint, attach mode has nothing to run speculation off on
    alone = run_plan(EngineSpec(endpoint="http://127.0.0.1:1"), NGRAM4, LoadSpec(), baseline=True,
                     baseline_endpoint=None, workload=WORKLOAD)
    assert [c.id for c in alone.configs] == ["ngram-k4"]
    off = run_plan(EngineSpec(endpoint="http://127.0.0.1:1"), NGRAM4, LoadSpec(), baseline=False,
                   baseline_endpoint="http://127.0.0.1:2", workload=WORKLOAD)
    assert [c.id for c in off.configs] == ["ngram-k4"]


def test_run_plan_launch_mode() -> None:
    engine = EngineSpec(model="/models/target")
    plan = run_plan(engine, NGRAM4, LoadSpec(), baseline=True, baseline_endpoint=None, workload=WORKLOAD)
    assert [c.id for c in plan.configs] == ["ngram-k4", BASELINE]
    assert all(c.engine == engine for c in plan.configs)  # the same launch, speculation on and off
    assert plan.configs[0].label == "ngram K=4" and plan.configs[1].label == "off"
    no_base = run_plan(engine, NGRAM4, LoadSpec(), baseline=False, baseline_endpoint=None, workload=WORKLOAD)
    assert [c.id for c in no_base.configs] == ["ngram-k4"]
    # no speculation asked: the plan is the baseline alone
    only_off = run_plan(engine, SpecConfig(), LoadSpec(), baseline=False, baseline_endpoint=None, workload=WORKLOAD)
    assert [(c.id, c.role) for c in only_off.configs] == [(BASELINE, Role.baseline)]


def test_compare_workloads_plan_derives_random_configs_from_the_speculative_one() -> None:
    load = LoadSpec(concurrency=[2, 8], seed=7)
    plan = compare_workloads_plan(EngineSpec(model="/m"), NGRAM4, load, vocab_size=1000, excluded_token_ids=[0, 2],
                                  baseline_endpoint=None, workload=WORKLOAD)
    assert [c.id for c in plan.configs] == ["ngram-k4", "ngram-k4:random", BASELINE, f"{BASELINE}:random"]
    for c in plan.configs[1::2]:
        assert c.workload == "random"
        mr = c.matched_random
        assert mr is not None and mr.source_config == "ngram-k4" and mr.source_point == "c2"
        assert (mr.vocab_size, mr.excluded_token_ids, mr.seed) == (1000, [0, 2], 7)
        assert plan.load_for(c).ignore_eos and plan.load_for(c).points == load.points  # forced lengths, same points
    assert not plan.load_for(plan.configs[0]).ignore_eos
    # each random config runs on its real twin's server; the baselines pair by workload
    assert plan.configs[0].server == plan.configs[1].server != plan.configs[2].server == plan.configs[3].server
    assert plan.baseline_for(plan.configs[1]).id == f"{BASELINE}:random"  # type: ignore[union-attr]
    assert plan.baseline_for(plan.configs[0]).id == BASELINE  # type: ignore[union-attr]
    with pytest.raises(InputError, match="--spec"):
        compare_workloads_plan(EngineSpec(model="/m"), SpecConfig(), load, vocab_size=10, excluded_token_ids=[],
                               baseline_endpoint=None, workload=WORKLOAD)


# ---- Plan validation ----------------------------------------------------------------------------------


def _cfg(cid: str, server: str | None = None, spec: SpecConfig = NGRAM4, role: Role = Role.candidate,
         endpoint: str = "http://127.0.0.1:1", **kw: Any) -> PlannedConfig:
    return PlannedConfig(id=cid, role=role, spec=spec, engine=EngineSpec(endpoint=endpoint), server=server or cid, **kw)


def _plan(configs: list[PlannedConfig], **kw: Any) -> Plan:
    kw.setdefault("load", LoadSpec(concurrency=[1, 4]))
    return Plan(kind="sweep", configs=configs, workload=WORKLOAD, **kw)


def test_plan_rejects_inconsistent_configurations() -> None:
    with pytest.raises(ValidationError, match="unique"):
        _plan([_cfg("a"), _cfg("a", server="other")])
    with pytest.raises(ValidationError, match="share server s"):
        _plan([_cfg("a", server="s"), _cfg("b", server="s", spec=SpecConfig(method="ngram", num_speculative_tokens=2))])
    with pytest.raises(ValidationError, match="share server s"):
        _plan([_cfg("a", server="s"), _cfg("b", server="s", endpoint="http://127.0.0.1:2")])
    mr = MatchedRandom(source_config="nowhere", source_point="c1", vocab_size=10)
    with pytest.raises(ValidationError, match="nowhere"):
        _plan([_cfg("a"), _cfg("a:random", server="a", workload="random", matched_random=mr)])
    with pytest.raises(ValidationError):
        _plan([_cfg("a")], repeats=0)
    # a plan survives its own JSON (summary.json stores it; resume reloads it)
    plan = _plan([_cfg("a"), _cfg(BASELINE, spec=SpecConfig(), role=Role.baseline)], repeats=2, interleave=True)
    assert Plan.model_validate_json(plan.model_dump_json()) == plan


# ---- schedule --------------------------------------------------------------------------------------------


def _cells(plan: Plan) -> list[list[tuple[str, str, int]]]:
    return [[(c.config.id, c.point.id, c.repeat) for c in block.cells] for block in schedule(plan)]


def _every_cell_once(plan: Plan) -> None:
    flat = [cell for block in _cells(plan) for cell in block]
    want = {(c.id, p.id, r) for c in plan.configs for p in plan.points for r in range(plan.repeats)}
    assert len(flat) == len(set(flat)) == len(want) and set(flat) == want


def test_schedule_without_interleave_runs_one_server_at_a_time_with_repeats_outer() -> None:
    plan = _plan([_cfg("a"), _cfg("b")], repeats=2)
    blocks = schedule(plan)
    assert [[[c.id for c in group] for group in block.servers] for block in blocks] == [[["a"]], [["b"]]]
    assert _cells(plan) == [
        [("a", "c1", 0), ("a", "c4", 0), ("a", "c1", 1), ("a", "c4", 1)],
        [("b", "c1", 0), ("b", "c4", 0), ("b", "c1", 1), ("b", "c4", 1)],
    ]
    _every_cell_once(plan)


def test_schedule_interleaved_is_one_block_alternating_order_each_repeat() -> None:
    plan = _plan([_cfg("a"), _cfg("b"), _cfg("c")], repeats=3, interleave=True)
    (block,) = schedule(plan)
    assert [[c.id for c in group] for group in block.servers] == [["a"], ["b"], ["c"]]  # all up together
    assert _cells(plan) == [[
        ("a", "c1", 0), ("b", "c1", 0), ("c", "c1", 0), ("a", "c4", 0), ("b", "c4", 0), ("c", "c4", 0),
        ("c", "c1", 1), ("b", "c1", 1), ("a", "c1", 1), ("c", "c4", 1), ("b", "c4", 1), ("a", "c4", 1),
        ("a", "c1", 2), ("b", "c1", 2), ("c", "c1", 2), ("a", "c4", 2), ("b", "c4", 2), ("c", "c4", 2),
    ]]
    _every_cell_once(plan)


@pytest.mark.parametrize("interleave", [False, True])
@pytest.mark.parametrize("repeats", [1, 2])
def test_schedule_runs_derived_workloads_after_their_source(interleave: bool, repeats: int) -> None:
    plan = compare_workloads_plan(EngineSpec(model="/m"), NGRAM4, LoadSpec(concurrency=[1, 4]), vocab_size=100,
                                  excluded_token_ids=[], baseline_endpoint=None, workload=WORKLOAD)
    plan = plan.model_copy(update={"interleave": interleave, "repeats": repeats})
    _every_cell_once(plan)
    flat = [cell for block in _cells(plan) for cell in block]
    source = flat.index(("ngram-k4", "c1", 0))  # what the random prompts are matched to
    for cid in ("ngram-k4:random", f"{BASELINE}:random"):
        for i, cell in enumerate(flat):
            if cell[0] == cid:
                assert i > source, (cell, flat)
    blocks = schedule(plan)
    if interleave:
        assert len(blocks) == 1 and len(blocks[0].servers) == 2
    else:  # configurations sharing a server run in its block
        assert [[[c.id for c in g] for g in b.servers] for b in blocks] == [
            [["ngram-k4", "ngram-k4:random"]], [[BASELINE, f"{BASELINE}:random"]]]


# ---- sweep files -----------------------------------------------------------------------------------------


def _sweep_file(tmp_path: Path, raw: dict[str, Any]) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _sweep_error(tmp_path: Path, raw: dict[str, Any]) -> str:
    path = _sweep_file(tmp_path, raw)
    with pytest.raises(InputError) as info:
        read_sweep_file(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:"), msg  # names the file
    assert "\n" not in msg
    return msg


LAUNCH = {"model": "/models/target", "dtype": "float32"}


def test_sweep_lists_expand_to_the_cartesian_product(tmp_path: Path) -> None:
    drafts, ks, windows = ["/d/small", "/d/large"], [2, 4, 6], [3, 5]
    sw = read_sweep_file(_sweep_file(tmp_path, {
        "workload": {"dataset": "sample", "num_prompts": 5},
        "engine": LAUNCH,
        "candidates": [
            {"method": "draft_model", "model": drafts, "num_speculative_tokens": ks},
            {"method": "ngram", "k": 4, "prompt_lookup_min": 2, "prompt_lookup_max": windows},
        ],
        "load": {"concurrency": [1, 4], "request_rate": [2.0], "max_tokens": 64},
        "repeats": 2, "interleave": True, "seed": 11,
    }))
    configs = sw.configs()
    assert configs[0].id == BASELINE and configs[0].role is Role.baseline and not configs[0].spec.enabled
    cands = configs[1:]
    assert all(c.role is Role.candidate for c in cands)
    assert len(cands) == len(drafts) * len(ks) + len(windows)
    ids = [c.id for c in configs]
    assert len(set(ids)) == len(ids)
    combos = {(c.spec.draft_model, c.spec.k) for c in cands if c.spec.method.value == "draft_model"}
    assert combos == set(itertools.product(drafts, ks))
    assert {c.spec.prompt_lookup_max for c in cands if c.spec.method.value == "ngram"} == set(windows)
    assert all(c.spec.prompt_lookup_min == 2 for c in cands if c.spec.method.value == "ngram")
    assert "draft_model-k2-small" in ids and "draft_model-k6-large" in ids  # draft models told apart
    assert all(c.engine == EngineSpec(**LAUNCH) for c in configs)
    assert len({c.server for c in configs}) == len(configs)  # one server per configuration
    plan = sw.plan(WORKLOAD)
    assert plan.kind == "sweep" and plan.repeats == 2 and plan.interleave
    assert [p.id for p in plan.points] == ["c1", "c4", "r2"]
    assert plan.load.seed == 11 and plan.load.num_prompts == 5 and plan.load.max_tokens == 64


def test_sweep_with_one_draft_keeps_short_ids_and_ids_can_be_given(tmp_path: Path) -> None:
    sw = read_sweep_file(_sweep_file(tmp_path, {
        "engine": LAUNCH,
        "candidates": [{"method": "draft_model", "model": "/d/only", "k": [1, 3]},
                       {"id": "wide-ngram", "method": "ngram", "k": 8}],
    }))
    assert [c.id for c in sw.configs()] == [BASELINE, "draft_model-k1", "draft_model-k3", "wide-ngram"]


@pytest.mark.parametrize(("k", "runs"), [("1-5", [2, 4]), ("1-6", [2, 5]), ("2-8", [4, 6]), ("1-3", [1, 3]),
                                          ("3-4", [3, 4]), ("4", [4])])
def test_a_k_range_runs_a_spread_of_it_and_every_config_carries_the_range(tmp_path: Path, k: str,
                                                                          runs: list[int]) -> None:
    """`num_speculative_tokens: LO-HI` measures two Ks inside the range (its ends where it is narrow), never one
    outside it, and keeps the range on the configs it expands to: proposals take the rest of it."""
    sw = read_sweep_file(_sweep_file(tmp_path, {
        "engine": LAUNCH, "candidates": [{"method": "eagle3", "model": "/d/head", "num_speculative_tokens": k},
                                         {"method": "ngram", "k": 4}]}))
    low, _, high = k.partition("-")
    ranged = [c for c in sw.configs() if c.spec.method.value == "eagle3"]
    assert [c.k for c in ranged] == runs
    assert all(c.k_range == (int(low), int(high or low)) for c in ranged)
    assert all(c.k_range is None for c in sw.configs() if c not in ranged)


def test_sweep_attach_mode_uses_each_endpoint(tmp_path: Path) -> None:
    sw = read_sweep_file(_sweep_file(tmp_path, {
        "engine": {"endpoint": "http://127.0.0.1:1"},
        "baseline_endpoint": "http://127.0.0.1:2",
        "candidates": [{"method": "ngram", "k": 4, "endpoint": "http://127.0.0.1:3"}],
    }))
    assert [(c.id, c.engine.endpoint) for c in sw.configs()] == [
        (BASELINE, "http://127.0.0.1:2"), ("ngram-k4", "http://127.0.0.1:3")]


@pytest.mark.parametrize(
    ("raw", "needles"),
    [
        ({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": 2, "lookahead": 1}]},
         ["unknown key 'candidates.0.lookahead'"]),
        ({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": 2}, {"method": "ngram", "k": [2, 0]}]},
         ["'candidates.1.num_speculative_tokens'", "got 0"]),
        ({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": []}]}, ["'candidates.0'", "empty list"]),
        ({"engine": LAUNCH, "candidates": [{"id": "x", "method": "ngram", "k": [1, 2]}]},
         ["'candidates.0'", "id 'x'", "expands to 2"]),
        ({"engine": LAUNCH, "candidates": [{"method": "none"}]}, ["'candidates.0'", "baseline"]),
        ({"engine": LAUNCH, "candidates": [{"method": "draft_model", "k": [1, 2]}]},
         ["'candidates.0'", "draft_model"]),
        ({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": 2, "prompt_lookup_min": 4,
                                            "prompt_lookup_max": [2, 5]}]},
         ["'candidates.0'", "prompt_lookup_min (4)", "prompt_lookup_max (2)"]),
        ({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": [2, 4]}, {"method": "ngram", "k": 4}]},
         ["candidates.1", "ngram-k4"]),
        ({"engine": LAUNCH, "candidates": [{"id": BASELINE, "method": "ngram", "k": 4}]},
         ["candidates.0", BASELINE]),
        ({"engine": LAUNCH, "candidates": []}, ["'candidates'"]),
        ({"engine": {"endpoint": "http://127.0.0.1:1"}, "candidates": [{"method": "ngram", "k": 2,
                                                                         "endpoint": "http://127.0.0.1:2"}]},
         ["baseline_endpoint"]),
        ({"engine": {"endpoint": "http://127.0.0.1:1"}, "baseline_endpoint": "http://127.0.0.1:2",
          "candidates": [{"method": "ngram", "k": 2, "endpoint": "http://127.0.0.1:3"}, {"method": "ngram", "k": 3}]},
         ["candidates.1", "endpoint"]),
        ({"engine": {"endpoint": "http://127.0.0.1:1"}, "baseline_endpoint": "http://127.0.0.1:2",
          "candidates": [{"method": "ngram", "k": [2, 3], "endpoint": "http://127.0.0.1:3"}]},
         ["'candidates.0'", "endpoint", "expands to 2"]),
        ({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": 2}], "load": {"concurrency": [1, 0]}},
         ["'load.points.1.concurrency'"]),
        ({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": 2}], "repeats": 0}, ["'repeats'"]),
        ({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": 2}], "repeat": 3}, ["unknown key 'repeat'"]),
        ({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": 2}], "workload": {"num_prompts": 0}},
         ["'workload.num_prompts'"]),
        ({"candidates": [{"method": "ngram", "k": 2}]}, ["'engine'"]),
        ({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": "6-1"}]},
         ["'candidates.0'", "num_speculative_tokens 6-1", "LOW is at most HIGH", "1-6"]),
        ({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": "two"}]},
         ["'candidates.0'", "num_speculative_tokens 'two'", "LOW-HIGH"]),
    ],
    ids=["unknown-key", "bad-k-in-list", "empty-list", "id-with-list", "method-none", "draft-missing",
         "lookup-min-over-max", "duplicate", "candidate-named-baseline", "no-candidates", "attach-no-baseline",
         "attach-candidate-without-endpoint", "endpoint-with-list", "bad-load", "bad-repeats",
         "unknown-top-level-key", "bad-workload", "no-engine", "k-range-reversed", "k-range-not-numbers"],
)
def test_sweep_file_errors_name_the_key_path(tmp_path: Path, raw: dict[str, Any], needles: list[str]) -> None:
    msg = _sweep_error(tmp_path, raw)
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_sweep_spec_revalidates_overrides() -> None:
    """The CLI applies --repeats/--interleave by validating the dumped spec again: it must round-trip."""
    sw = SweepSpec.model_validate({"engine": LAUNCH, "candidates": [{"method": "ngram", "k": [2, 4]}]})
    again = SweepSpec.model_validate({**sw.model_dump(by_alias=False), "repeats": 3})
    assert again.repeats == 3 and [c.id for c in again.configs()] == [c.id for c in sw.configs()]


def test_the_indifference_zone_defaults_to_three_percent_and_is_never_narrower_than_min_gain() -> None:
    """A sweep's zone is 3% by default, the min gain where that is larger, or as given; a plan stored before ties
    existed reads the same default; a zone below min gain is refused where it is given."""
    candidates = [{"method": "ngram", "k": [2, 4]}]
    default = SweepSpec.model_validate({"engine": LAUNCH, "candidates": candidates})
    assert default.indifference is None and default.plan(WORKLOAD).indifference == 0.03
    wide_gain = SweepSpec.model_validate({"engine": LAUNCH, "candidates": candidates, "min_gain": 0.05})
    assert wide_gain.plan(WORKLOAD).indifference == 0.05
    given = SweepSpec.model_validate({"engine": LAUNCH, "candidates": candidates, "indifference": 0.02})
    assert given.plan(WORKLOAD).indifference == 0.02
    off = SweepSpec.model_validate({"engine": LAUNCH, "candidates": candidates, "indifference": 0.01})
    assert off.plan(WORKLOAD).indifference == off.plan(WORKLOAD).min_gain  # equal: no ties
    with pytest.raises(ValidationError, match=r"indifference 0\.02 is below min_gain 0\.05"):
        SweepSpec.model_validate({"engine": LAUNCH, "candidates": candidates, "min_gain": 0.05, "indifference": 0.02})
    stored = default.plan(WORKLOAD).model_dump(mode="json")
    assert Plan.model_validate(stored).indifference == 0.03
    del stored["indifference"]  # a plan from before the zone
    assert Plan.model_validate(stored).indifference == 0.03
    assert Plan.model_validate({**stored, "min_gain": 0.08}).indifference == 0.08
    with pytest.raises(ValidationError, match=r"set indifference to 0\.08 or more"):
        Plan.model_validate({**stored, "min_gain": 0.08, "indifference": 0.03})


def test_sweep_flags_set_min_gain_and_indifference_over_the_file(tmp_path: Path) -> None:
    from specmeter.config.drafts import Drafts
    from specmeter.workflows.sweep import sweep_spec

    flags, engine = Drafts(spec=['{"method": "ngram", "num_speculative_tokens": 2}']), {"model": "m"}
    assert sweep_spec(None, flags, {"engine": engine}).plan(WORKLOAD).indifference == 0.03
    asked = sweep_spec(None, flags, {"engine": engine}, {"indifference": 0.05}).plan(WORKLOAD)
    assert (asked.min_gain, asked.indifference) == (0.01, 0.05)
    wider = sweep_spec(None, flags, {"engine": engine}, {"min_gain": 0.04}).plan(WORKLOAD)
    assert (wider.min_gain, wider.indifference) == (0.04, 0.04)  # the default follows a larger min gain
