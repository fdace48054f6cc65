"""Tree drafts: the drafter proposes a tree of candidate tokens each step instead of one chain, the target
verifies every node in one pass, and the step accepts one path of it (EAGLE-2/3 style).

Two shapes, as the engines take them:
- grown each step: at every depth keep the `topk` most likely continuations, `depth` drafting steps, then
  verify the `nodes` best of them (SGLang `--speculative-eagle-topk` / `--speculative-num-steps` /
  `--speculative-num-draft-tokens` = nodes + 1, the root counted; TensorRT-LLM's dynamic tree:
  `dynamic_tree_max_topK`, `max_draft_len`, `max_total_draft_tokens`);
- fixed: `choices`, every node as its path of child indices from the root ([0], [1], [0, 0], ...;
  TensorRT-LLM's `eagle_choices`).

K is the tree's depth: the most drafts one step can accept. A step drafts `nodes` tokens but accepts at most
`depth`, so what a chain reports per drafted position means nothing here: trees are judged by the acceptance
length per step and its histogram, and per depth where the engine counts it (schemas/sd.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

# Engine extras that would shape a tree behind specmeter's back (SGLang's flags, TensorRT-LLM's
# EagleDecodingConfig fields, older vLLM's token tree): results would then read a tree as a chain.
_TREE_EXTRAS = ("speculative_eagle_topk", "speculative_num_steps", "speculative_num_draft_tokens",
                "eagle_choices", "use_dynamic_tree", "dynamic_tree_max_topK", "max_total_draft_tokens",
                "speculative_token_tree")
# Names other tools give the tree's settings, with what to write instead.
_OTHER_NAMES = {
    "num_draft_tokens": "SGLang's verify width counts the root: give nodes = num_draft_tokens - 1",
    "speculative_num_draft_tokens": "SGLang's verify width counts the root: give nodes = num_draft_tokens - 1",
    "max_total_draft_tokens": "give nodes (TensorRT-LLM's max_total_draft_tokens, the root not counted)",
    "eagle_topk": "give topk",
    "speculative_eagle_topk": "give topk",
    "dynamic_tree_max_topK": "give topk",
    "eagle_choices": "give choices",
    "max_draft_len": "give depth",
}
MAX_NODES = 4096  # far past any tree an engine verifies in one pass: a typo, not a tree


class TreeDraft(BaseModel):
    """`{topk, depth, nodes}` (grown each step) or `{choices: [[0], [1], [0, 0], ...]}` (fixed)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    topk: int | None = Field(default=None, ge=1, description="Continuations kept per node at each depth "
                             "(SGLang --speculative-eagle-topk; TensorRT-LLM dynamic_tree_max_topK).")
    depth: int | None = Field(default=None, ge=1, le=64, validation_alias=AliasChoices("depth", "steps"),
                              description="Drafting steps, the longest path: the most drafts one step can accept, "
                              "and so K (SGLang --speculative-num-steps; TensorRT-LLM max_draft_len).")
    nodes: int | None = Field(default=None, ge=1, le=MAX_NODES, description="Draft tokens verified per step, the "
                              "root (the last accepted token) not counted (SGLang --speculative-num-draft-tokens "
                              "is nodes + 1; TensorRT-LLM max_total_draft_tokens).")
    choices: list[list[int]] | None = Field(default=None, description="A fixed tree: each node as its path of child "
                                            "indices from the root; every prefix of a path is a node too "
                                            "(TensorRT-LLM eagle_choices).")

    @model_validator(mode="before")
    @classmethod
    def _names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if key in _OTHER_NAMES:
                    raise ValueError(f"tree.{key} is not a tree key here: {_OTHER_NAMES[key]}")
        return data

    @model_validator(mode="after")
    def _shape(self) -> TreeDraft:
        grown = (self.topk, self.depth, self.nodes)
        if self.choices is not None:
            if any(v is not None for v in grown):
                raise ValueError("tree takes either {topk, depth, nodes} (grown each step) or {choices} (a fixed "
                                 "tree), not both: drop one")
            _check_choices(self.choices)
            return self
        if any(v is None for v in grown):
            missing = ", ".join(n for n, v in zip(("topk", "depth", "nodes"), grown) if v is None)
            raise ValueError(f"tree needs topk, depth and nodes together (missing: {missing}), or choices for a "
                             "fixed tree")
        topk, depth, nodes = self.topk, self.depth, self.nodes
        assert topk is not None and depth is not None and nodes is not None
        if topk < 2:
            raise ValueError(f"tree.topk 1 keeps one continuation per depth: that is a chain; drop tree and give "
                             f"num_speculative_tokens: {depth}")
        if nodes <= depth:
            raise ValueError(f"tree.nodes {nodes} is not more than tree.depth {depth}: such a tree is no wider than a "
                             f"chain; give nodes > {depth}, or drop tree and give num_speculative_tokens: {depth}")
        most = tree_capacity(topk, depth)
        if nodes > most:
            raise ValueError(f"tree.nodes {nodes} exceeds the {most} nodes a tree of topk {topk} and depth {depth} "
                             f"has; give nodes <= {most}, or a larger topk or depth")
        return self

    @property
    def fixed(self) -> bool:
        """A fixed tree of choices (else one the engine grows each step)."""
        return self.choices is not None

    @property
    def max_depth(self) -> int:
        """The longest path: K, the most drafts one step can accept."""
        if self.choices is not None:
            return max(len(c) for c in self.choices)
        assert self.depth is not None
        return self.depth

    @property
    def size(self) -> int:
        """Draft tokens verified per step (the root not counted)."""
        if self.choices is not None:
            return len(self.choices)
        assert self.nodes is not None
        return self.nodes

    def label(self) -> str:
        """'tree depth 5, 63 nodes, top-8' or 'tree depth 3, 10 nodes, fixed choices'."""
        shape = "fixed choices" if self.fixed else f"top-{self.topk}"
        return f"tree depth {self.max_depth}, {self.size} nodes, {shape}"

    def id_part(self) -> str:
        """The part of a configuration id that names the tree: 'tree-d5-n63-top8', 'tree-d3-n10-c1a2b3'."""
        if self.choices is None:
            return f"tree-d{self.max_depth}-n{self.size}-top{self.topk}"
        digest = hashlib.sha256(json.dumps(sorted(self.choices)).encode()).hexdigest()[:6]
        return f"tree-d{self.max_depth}-n{self.size}-c{digest}"


def tree_capacity(topk: int, depth: int) -> int:
    """Nodes of a full tree with `topk` children per node and `depth` levels below the root."""
    return sum(topk ** level for level in range(1, depth + 1))


def _check_choices(choices: list[list[int]]) -> None:
    """Every node a non-empty path of child indices >= 0, listed once, whose every prefix is a node too; and a
    tree, not one chain."""
    if not choices:
        raise ValueError("tree.choices is empty; give the tree's nodes as paths, e.g. [[0], [1], [0, 0]]")
    seen: set[tuple[int, ...]] = set()
    for i, path in enumerate(choices):
        if not path or any(c < 0 for c in path):
            raise ValueError(f"tree.choices[{i}] = {path} is not a path: give child indices >= 0 from the root, "
                             "e.g. [0, 1]")
        if tuple(path) in seen:
            raise ValueError(f"tree.choices[{i}] = {path} is listed twice; list each node once")
        seen.add(tuple(path))
    if len(seen) > MAX_NODES:
        raise ValueError(f"tree.choices has {len(seen)} nodes; an engine verifies at most a few hundred per step")
    for i, path in enumerate(choices):
        if len(path) > 1 and tuple(path[:-1]) not in seen:
            raise ValueError(f"tree.choices[{i}] = {path} has no parent {path[:-1]}: every prefix of a path must be "
                             "a node too; add it")
    depth = max(len(p) for p in choices)
    if depth > 64:
        raise ValueError(f"tree.choices reaches depth {depth}; give paths of at most 64 steps")
    if len(seen) == depth:
        raise ValueError(f"tree.choices is one chain of {depth} nodes; drop tree and give num_speculative_tokens: "
                         f"{depth}")


def tree_extra(extra: Mapping[str, Any]) -> str | None:
    """The extra key that would shape a draft tree behind specmeter's back, if any."""
    return next((key for key in _TREE_EXTRAS if key in extra), None)
