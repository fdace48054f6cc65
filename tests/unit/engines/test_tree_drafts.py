"""Tree drafts: the spec's `tree` (validated, K its depth, named in labels and ids), rendered as SGLang's flags and
TensorRT-LLM's YAML, refused by vLLM and llama.cpp with their reasons, and a tree run's acceptance reported as what
it is (AL per step, the accepted-drafts histogram, how deep each step's path reached) with no per-position chain
rates anywhere, on the SGLang- and TensorRT-LLM-shaped fake engines."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from fakeengine.drive import conversations, only_config, run_plan
from fakeengine.server import FakeEngine
from fakeengine.sglang import SGLang
from fakeengine.trtllm import TensorRTLLM
from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.engines.registry import get_engine
from specmeter.engines.trtllm import TRTLLMLauncher
from specmeter.execution.runner import Execution
from specmeter.metrics.sd import sum_counts
from specmeter.plans.run import config_id
from specmeter.plans.run import run_plan as build_run_plan
from specmeter.plans.sweep import CandidateSpec
from specmeter.predict.profiles import profile_of_run
from specmeter.report.csv_output import CsvOutput
from specmeter.report.plots_acceptance import acceptance_position, al_histogram
from specmeter.report.tables import notes, summary_tables
from specmeter.rundir.run_data import load_run
from specmeter.rundir.store import load_summary
from specmeter.schemas.plan import WorkloadSelection
from specmeter.schemas.results import RunSummary
from specmeter.schemas.sd import SDCounts
from specmeter.workflows.recompute import recompute

pytestmark = pytest.mark.timeout(60)

GROWN = {"topk": 8, "depth": 5, "nodes": 63}
CHOICES = [[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0]]


def _tree(tree: dict[str, Any], method: str = "eagle3", **more: Any) -> SpecConfig:
    return SpecConfig.model_validate({"method": method, "draft_model": "org/e3", "tree": tree, **more})


def _error(raw: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as exc:
        SpecConfig.model_validate(raw)
    return str(exc.value)


# ---- the spec ------------------------------------------------------------------------------------------------
def test_a_grown_tree_takes_its_depth_as_k_and_says_so_in_label_and_id() -> None:
    spec = _tree(GROWN)
    assert spec.drafts_tree and spec.k == GROWN["depth"]
    assert spec.label() == "eagle3 tree depth 5, 63 nodes, top-8"
    assert config_id(spec) == "eagle3-tree-d5-n63-top8"
    assert SpecConfig.model_validate(spec.model_dump(mode="json")) == spec  # stored and read back unchanged
    assert _tree({"topk": 8, "steps": 5, "nodes": 63}) == spec  # SGLang's name for the depth
    assert _tree(GROWN, num_speculative_tokens=5) == spec  # K given, equal to the depth


def test_a_fixed_tree_of_choices_has_the_depth_of_its_longest_path() -> None:
    spec = _tree({"choices": CHOICES})
    assert spec.k == max(len(c) for c in CHOICES) and spec.tree is not None and spec.tree.size == len(CHOICES)
    assert spec.label() == f"eagle3 tree depth 3, {len(CHOICES)} nodes, fixed choices"
    other = _tree({"choices": [*CHOICES, [3]]})
    assert config_id(spec).startswith("eagle3-tree-d3-n7-c") and config_id(spec) != config_id(other)


@pytest.mark.parametrize(("raw", "says"), [
    ({"tree": {"topk": 8, "depth": 5, "num_draft_tokens": 64}}, "give nodes = num_draft_tokens - 1"),
    ({"tree": {"topk": 8, "depth": 5}}, "tree needs topk, depth and nodes together (missing: nodes)"),
    ({"tree": {"topk": 1, "depth": 4, "nodes": 6}}, "drop tree and give num_speculative_tokens: 4"),
    ({"tree": {"topk": 4, "depth": 4, "nodes": 4}}, "give nodes > 4"),
    ({"tree": {"topk": 2, "depth": 3, "nodes": 15}}, "exceeds the 14 nodes a tree of topk 2 and depth 3 has"),
    ({"tree": {"choices": [[0], [1, 0]]}}, "tree.choices[1] = [1, 0] has no parent [1]"),
    ({"tree": {"choices": [[0], [0, 0], [0]]}}, "tree.choices[2] = [0] is listed twice"),
    ({"tree": {"choices": [[0], [0, 0]]}}, "tree.choices is one chain of 2 nodes"),
    ({"tree": {"choices": [[0], [1]], "topk": 2, "depth": 1, "nodes": 2}}, "not both"),
    ({"tree": GROWN, "num_speculative_tokens": 4}, "num_speculative_tokens 4 differs from the tree's depth 5"),
    ({"tree": GROWN, "method": "ngram", "draft_model": None}, "tree needs an EAGLE-style drafter"),
    ({"tree": GROWN, "method": "draft_model"}, "tree needs an EAGLE-style drafter"),
    ({"tree": GROWN, "synthetic_acceptance": {"length": 3}}, "a tree has no chain positions"),
    ({"tree": GROWN, "num_speculative_tokens_per_batch_size": [[1, 4, 3]]}, "give K 0 or the depth"),
    ({"tree": None, "num_speculative_tokens": 4, "extra": {"speculative_eagle_topk": 4}},
     "extra.speculative_eagle_topk shapes a draft tree"),
    ({"tree": None, "num_speculative_tokens": 4, "extra": {"eagle_choices": [[0], [1]]}},
     "extra.eagle_choices shapes a draft tree"),
])
def test_a_tree_spec_that_cannot_be_is_refused_naming_the_key_and_the_fix(raw: dict[str, Any], says: str) -> None:
    assert says in _error({"method": "eagle3", "draft_model": "org/e3", **raw})


def test_a_sweep_candidate_expands_a_list_of_trees_into_configurations_of_their_own() -> None:
    cand = CandidateSpec.model_validate({"method": "eagle3", "model": "org/e3",
                                         "tree": [GROWN, {"topk": 4, "depth": 3, "nodes": 10}]})
    specs = cand.expand()
    assert [s.k for s in specs] == [5, 3]
    assert len({config_id(s) for s in specs}) == 2


# ---- rendered for the engines that draw trees --------------------------------------------------------------
def _flags(argv: list[str]) -> dict[str, str | None]:
    return {a: (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None)
            for i, a in enumerate(argv) if a.startswith("--")}


@pytest.mark.parametrize("method", ["eagle", "eagle3", "mtp"])
def test_sglang_launches_and_deploys_a_tree_as_steps_topk_and_a_verify_width_counting_the_root(method: str) -> None:
    launcher = get_engine("sglang").launcher
    spec = _tree(GROWN, method=method)
    cmd = _flags(launcher.server_command(EngineSpec(kind="sglang", model="org/target"), spec, 30001))
    deploy = launcher.deploy_spec(spec, None)
    for flags in (cmd, _flags(deploy.flags)):
        assert (flags["--speculative-num-steps"], flags["--speculative-eagle-topk"],
                flags["--speculative-num-draft-tokens"]) == ("5", "8", "64")
    assert deploy.k == 5


@pytest.mark.parametrize(("spec", "says"), [
    (_tree({"choices": CHOICES}), "takes no fixed tree of choices"),
    (_tree({"topk": 2, "depth": 3, "nodes": 11}), "give tree.nodes <= 10"),  # 2 + 2 x 2² candidates scored
])
def test_sglang_refuses_a_tree_it_cannot_grow_with_the_reason(spec: SpecConfig, says: str) -> None:
    launcher = get_engine("sglang").launcher
    with pytest.raises(InputError, match=says):
        launcher.server_command(EngineSpec(kind="sglang", model="org/target"), spec, 30001)
    with pytest.raises(InputError, match=says):
        launcher.deploy_spec(spec, None)


def test_trtllm_writes_a_grown_tree_as_its_dynamic_tree_and_choices_as_eagle_choices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECMETER_TRTLLM_CONFIG_DIR", str(tmp_path))
    launcher = TRTLLMLauncher()
    grown = _tree({"topk": 8, "depth": 5, "nodes": 32})  # at most topk x depth nodes on TensorRT-LLM
    cmd = launcher.server_command(EngineSpec(kind="trtllm", model="org/target"), grown, 8000)
    written = yaml.safe_load(Path(cmd[cmd.index("--extra_llm_api_options") + 1]).read_text(encoding="utf-8"))
    assert written["speculative_config"] == {
        "decoding_type": "Eagle3", "max_draft_len": 5, "speculative_model_dir": "org/e3", "use_dynamic_tree": True,
        "dynamic_tree_max_topK": 8, "max_total_draft_tokens": 32}
    assert launcher.deploy_spec(grown, None).config == {"speculative_config": written["speculative_config"]}
    fixed = launcher.deploy_spec(_tree({"choices": CHOICES}), None)
    assert fixed.config is not None and fixed.config["speculative_config"] == {
        "decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model_dir": "org/e3", "eagle_choices": CHOICES}
    assert any("eagle_choices" in n and "deprecated" in n for n in fixed.notes)


@pytest.mark.parametrize(("spec", "says"), [
    (_tree(GROWN, method="mtp", draft_model=None), "draws trees with its Eagle3 decoding only"),
    (_tree({"topk": 2, "depth": 3, "nodes": 7}), "give tree.nodes <= 6"),  # max_total_draft_tokens <= topK x depth
])
def test_trtllm_refuses_a_tree_it_cannot_draw_with_the_reason(spec: SpecConfig, says: str) -> None:
    with pytest.raises(InputError, match=says):
        TRTLLMLauncher().deploy_spec(spec, None)


# ---- refused where the engine drafts one chain ----------------------------------------------------------------
@pytest.mark.parametrize(("kind", "why"), [
    ("vllm", "vLLM 0.32's speculative config has no token-tree option"),
    ("llamacpp", "llama-server drafts one chain per request"),
])
def test_vllm_and_llamacpp_refuse_a_tree_before_launch_with_the_reason(kind: str, why: str) -> None:
    launcher = get_engine(kind).launcher
    spec = _tree(GROWN)
    refusal = f"{kind} drafts no token trees: {why}"
    for attempt in (lambda: launcher.check_method(spec),
                    lambda: launcher.server_command(EngineSpec(kind=kind, model="org/target"), spec, 8000),
                    lambda: launcher.deploy_spec(spec, None)):
        with pytest.raises(InputError, match=refusal) as exc:
            attempt()
        assert "run the tree on sglang or trtllm" in str(exc.value)
    # the same drafter as a chain is fine there
    launcher.check_method(SpecConfig(method="eagle3", draft_model="org/e3", num_speculative_tokens=5))


# ---- acceptance of tree drafts --------------------------------------------------------------------------------
def test_tree_counts_carry_per_depth_rates_and_no_chain_rates() -> None:
    hist = [2, 3, 4, 1]  # 10 steps, depth 3: accepted 0, 1, 2, 3 drafts
    reach = [sum(hist[d + 1:]) for d in range(3)]
    chain = SDCounts(source="per_request", num_steps=10, num_draft_tokens=30, num_accepted_tokens=sum(reach),
                     accepted_per_pos=reach, histogram=hist)
    tree = chain.model_copy(update={"num_draft_tokens": 100, "tree": True})
    assert chain.per_depth_rate is None and chain.per_position_rate
    assert tree.per_position_rate == [] and tree.conditional_rate == []
    assert tree.per_depth_rate == [r / 10 for r in reach]
    assert tree.acceptance_length == chain.acceptance_length  # AL is per step, whatever the shape
    pooled = sum_counts([tree, tree])
    assert pooled.tree and pooled.per_position_rate == [] and pooled.per_depth_rate == tree.per_depth_rate


def _tree_run(server: FakeEngine, kind: str, spec: SpecConfig, root: Path) -> RunSummary:
    convs = conversations([f"Question {i}: how do caches work?" for i in range(6)])
    plan = build_run_plan(EngineSpec(kind=kind, endpoint=server.url), spec,
                          LoadSpec(concurrency=[2], warmup=0, max_tokens=24), baseline=False, baseline_endpoint=None,
                          workload=WorkloadSelection(dataset=f"{kind}-tree-fake"))
    summary, error, _ = run_plan(Execution(plan=plan, conversations=convs, api_key=None,
                                           command=["specmeter", "run", "--endpoint", server.url]), root)
    assert error is None, repr(error)
    assert isinstance(summary, RunSummary)
    return summary


def _points_csv(root: Path) -> list[dict[str, str]]:
    """points.csv as `specmeter report --csv` writes it."""
    CsvOutput(root / "csv").write(load_run(root))
    with (root / "csv" / "points.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _no_chain_rates_shown(summary: RunSummary, config: str, root: Path) -> None:
    """The tree's rows in the SD and category tables show no a_i or c_i, its AR says it is over nodes, a note says
    why, and the CSV's per-position column is empty."""
    tables = {t.title.split(" (")[0]: t for t in summary_tables(summary)}
    sd = tables["Speculative decoding"]
    names = [c.name for c in sd.columns]
    row = dict(zip(names, sd.rows[0]))
    assert row["configuration"] == config
    assert row["per-position a_i"] == row["conditional c_i"] == "- (tree)"
    assert row["AR"].endswith("of nodes")
    for t in tables.values():
        if t.title.startswith("Acceptance per category"):
            col = [c.name for c in t.columns].index("per-position a_i")
            assert {r[col] for r in t.rows} <= {"- (tree)", ""}
    assert any(config in n.text and "chain rates (a_i, c_i) are not shown" in n.text for n in notes(summary))
    (csv_row,) = _points_csv(root)
    assert csv_row["sd_tree"] == "true" and csv_row["sd_per_position"] == ""


def test_a_tree_run_on_sglang_reports_al_the_histogram_and_per_depth_rates(tmp_path: Path) -> None:
    depth, nodes = 3, 10
    spec = _tree({"topk": 4, "depth": depth, "nodes": nodes})
    root = tmp_path / "run"
    with FakeEngine(SGLang(), k=depth, tree_nodes=nodes, step_s=0.002) as server:
        summary = _tree_run(server, "sglang", spec, root)
    assert not server.problems
    truth = server.true_totals
    point = only_config(summary).points[0]
    counts = point.sd.per_request
    assert point.sd.reference == "per_request" and counts is not None and counts.tree
    # SGLang proposes every node of every step's tree (steps x (num_draft_tokens - 1)) and accepts one path
    assert (counts.num_steps, counts.num_draft_tokens, counts.num_accepted_tokens) == (
        truth.steps, truth.steps * nodes, truth.accepted)
    assert counts.acceptance_length == pytest.approx(1 + truth.accepted / truth.steps)
    assert counts.histogram is not None and len(counts.histogram) == depth + 1 and sum(counts.histogram) == truth.steps
    depth_rates = counts.per_depth_rate
    assert depth_rates is not None and len(depth_rates) == depth
    assert depth_rates == sorted(depth_rates, reverse=True)  # a path that reached depth d reached every one above
    assert 1 + sum(depth_rates) == pytest.approx(counts.acceptance_length)
    assert counts.per_position_rate == [] and counts.conditional_rate == []
    cats = point.categories
    assert cats is not None and all(r.per_position_rate == [] and r.per_depth_rate for r in cats.categories)

    _no_chain_rates_shown(summary, config_id(spec), root)
    tree_table = next(t for t in summary_tables(summary) if t.title.startswith("Tree drafts"))
    row = dict(zip([c.name for c in tree_table.columns], tree_table.rows[0]))
    assert row["tree"] == "tree depth 3, 10 nodes, top-4"
    assert len(row["accepted per step, share of steps j = 0..K"].split()) == depth + 1
    assert len(row["path reached depth d, share of steps"].split()) == depth
    (csv_row,) = _points_csv(root)
    assert sum(int(v) for v in csv_row["sd_histogram"].split(";")) == truth.steps
    assert len(csv_row["sd_per_depth"].split(";")) == depth

    run = load_run(root)
    assert acceptance_position(run) is None  # no chain configuration: no per-position figure
    assert al_histogram(run) is not None
    with pytest.raises(InputError, match="the planner models chains"):  # its acceptance is no chain profile
        profile_of_run(root, config_id(spec))
    recompute(root)  # summarized again from the stored captures: still a tree
    again = only_config(load_summary(root)).points[0].sd.per_request
    assert again is not None and again.tree and again.per_depth_rate == depth_rates


def test_a_tree_run_on_trtllm_reports_al_over_steps_and_ar_over_nodes(tmp_path: Path) -> None:
    depth, nodes = 4, 12
    spec = _tree({"topk": 3, "depth": depth, "nodes": nodes})
    # A build without per-position counters: what they count under a tree is not documented, so the run-level
    # counts come from the iteration stats, whose draft tokens are the nodes of every step's tree.
    root = tmp_path / "run"
    with FakeEngine(TensorRTLLM(per_position=False), k=depth, tree_nodes=nodes, step_s=0.002) as server:
        summary = _tree_run(server, "trtllm", spec, root)
    assert not server.problems
    truth = server.true_totals
    counts = only_config(summary).points[0].sd.counters
    assert counts is not None and counts.tree
    assert (counts.num_steps, counts.num_draft_tokens, counts.num_accepted_tokens) == (
        truth.steps, truth.steps * nodes, truth.accepted)
    assert counts.acceptance_length == pytest.approx(1 + truth.accepted / truth.steps)
    assert counts.acceptance_rate == pytest.approx(truth.accepted / (truth.steps * nodes))
    assert counts.per_position_rate == [] and counts.per_depth_rate == []  # depths: not counted by this build
    _no_chain_rates_shown(summary, config_id(spec), root)
    tree_table = next(t for t in summary_tables(summary) if t.title.startswith("Tree drafts"))
    row = dict(zip([c.name for c in tree_table.columns], tree_table.rows[0]))
    assert row["path reached depth d, share of steps"] == "- (not counted by this engine)"
    assert row["nodes per step"] == f"{nodes:.1f}"
