"""Tree drafts: the spec's `tree` (validated, K its depth, named in labels and ids)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from specmeter.config import SpecConfig
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
