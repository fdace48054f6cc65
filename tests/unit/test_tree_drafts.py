"""Tree drafts: the spec's `tree` (validated, K its depth, named in labels and ids), rendered as SGLang's flags and
TensorRT-LLM's YAML, and refused by vLLM and llama.cpp with their reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from specmeter.config import EngineSpec, SpecConfig
from specmeter.engines.registry import get_engine
from specmeter.engines.trtllm import TRTLLMLauncher
from specmeter.errors import InputError
from specmeter.plans.run import config_id
from specmeter.plans.sweep import CandidateSpec

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
