"""Which drafter the answer names (analysis/drafter_choice.py): one per server, decided head to head on the
configurations each drafter's table runs at the measured points, walking from the cheapest drafter per step."""

from __future__ import annotations

from test_recommend import recommend, sweep

from specmeter.analysis.recommend import recommend as neutral_recommend
from specmeter.config.models import SpecConfig
from specmeter.engines.deploy import with_deploy_configs
from specmeter.report.recommendation import deploy_lines
from specmeter.schemas.recommend import Recommendation

EAGLE = SpecConfig.model_validate({"method": "eagle3", "num_speculative_tokens": 3, "draft_model": "models/head"})
NGRAM = SpecConfig.model_validate({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3})
KS = {"draft_model-k3": 3, "eagle3-k3": 3, "ngram-k3": 3}
SPECS = {"eagle3-k3": EAGLE, "ngram-k3": NGRAM}
BATCHES = {"c1": 1.0, "c4": 3.9}


def _rec(rows: dict[str, dict[str, tuple[float, float, float]]]) -> Recommendation:
    ks = {cid: KS[cid] for cid in rows}
    return recommend(*sweep(rows, {p: BATCHES[p] for p in next(iter(rows.values()))}, ks=ks,
                            extra_specs={c: s for c, s in SPECS.items() if c in rows}))


def test_a_costlier_drafter_that_beats_the_cheaper_head_to_head_is_named_with_its_margin() -> None:
    rec = _rec({"ngram-k3": {"c1": (1.10, 1.05, 1.15), "c4": (1.05, 1.02, 1.08)},
                "eagle3-k3": {"c1": (1.60, 1.55, 1.65), "c4": (1.40, 1.35, 1.45)},
                "draft_model-k3": {"c1": (1.30, 1.25, 1.35), "c4": (1.15, 1.10, 1.20)}})
    choice = rec.drafter_choice
    assert choice is not None and rec.best is not None
    assert choice.chosen == rec.best.drafter == "eagle3 head" and choice.runner_up == "draft_model demo-draft"
    assert choice.margin is not None and choice.margin.outcome == "beats"
    assert choice.margin.low is not None and choice.margin.low > 1.0 + rec.min_gain
    # The walk met ngram first (cheapest per step), then the eagle3 head, which beat it.
    assert (choice.evidence[0].config_id, choice.evidence[0].against) == ("eagle3 head", "ngram n-gram -..3")
    assert any(line.text.startswith("drafter: eagle3 head beats the runner-up") for line in deploy_lines(rec))


def test_the_cheaper_drafter_stays_when_the_costlier_does_not_clearly_beat_it() -> None:
    """A draft model ahead by point estimate but not by the whole interval does not replace the n-gram lookup,
    although it scores higher: the same rule that keeps a smaller K."""
    rec = _rec({"ngram-k3": {"c1": (1.30, 1.10, 1.50), "c4": (1.20, 1.00, 1.40)},
                "draft_model-k3": {"c1": (1.33, 1.10, 1.56), "c4": (1.22, 1.00, 1.44)}})
    choice = rec.drafter_choice
    assert choice is not None and rec.best is not None
    assert rec.drafters[0].drafter == choice.chosen == "ngram n-gram -..3"
    assert choice.margin is not None and choice.margin.outcome != "beats"
    assert "cheapest per step" in choice.reason


def test_two_drafters_within_the_zone_are_a_tie_and_the_cheaper_is_named() -> None:
    """A draft model 1% ahead of the n-gram lookup on every request, at most 3% better: a tie in the walk, so the
    cheaper per step is named."""
    rec = _rec({"ngram-k3": {"c1": (1.30, 1.29, 1.31), "c4": (1.20, 1.19, 1.21)},
                "draft_model-k3": {"c1": (1.313, 1.303, 1.323), "c4": (1.212, 1.202, 1.222)}})
    choice = rec.drafter_choice
    assert choice is not None and choice.chosen == "ngram n-gram -..3" and "cheapest per step" in choice.reason
    (duel,) = choice.evidence
    assert duel.config_id == "draft_model demo-draft" and duel.outcome == "tie" and duel.indifference == 0.03
    assert "at most 3% better" in duel.summary()


def test_the_reason_names_the_choice_a_drafter_replaced_not_every_cheaper_one() -> None:
    """The walk is not transitive: the head, too uncertain to beat the n-gram lookup, is not beaten by the draft
    model either, which beats the lookup and is named; the reason says whom it beat, and that against the
    runner-up (the head) it is unsettled."""
    rec = _rec({"ngram-k3": {"c1": (1.30, 1.25, 1.35), "c4": (1.20, 1.15, 1.25)},
                "eagle3-k3": {"c1": (1.45, 1.15, 1.80), "c4": (1.35, 1.05, 1.70)},
                "draft_model-k3": {"c1": (1.50, 1.45, 1.55), "c4": (1.38, 1.33, 1.43)}})
    choice = rec.drafter_choice
    assert choice is not None and choice.chosen == "draft_model demo-draft"
    assert [(h.config_id, h.against, h.outcome) for h in choice.evidence] == [
        ("eagle3 head", "ngram n-gram -..3", "unsettled"), ("draft_model demo-draft", "ngram n-gram -..3", "beats")]
    assert choice.runner_up == "eagle3 head" and choice.margin is not None and choice.margin.outcome != "beats"
    assert choice.reason.startswith("draft_model demo-draft beat ngram n-gram -..3, the choice when the walk reached")
    assert "against the runner-up: draft_model demo-draft unsettled against eagle3 head" in choice.reason


def test_one_drafter_needs_no_choice() -> None:
    rec = _rec({"draft_model-k3": {"c1": (1.30, 1.25, 1.35), "c4": (1.15, 1.10, 1.20)}})
    assert rec.drafter_choice is None


def _floor(rows: dict[str, dict[str, tuple[float, float, float]]]) -> Recommendation:
    """The demo's draft model at static K = 3 against the same drafter under llama.cpp's confidence floor, rendered
    for llama-server (the engine that has the floor)."""
    floor = SpecConfig.model_validate({"method": "draft_model", "num_speculative_tokens": 3,
                                       "draft_model": "demo-draft", "draft_p_min": 0.5})
    return with_deploy_configs(neutral_recommend(*sweep(rows, BATCHES, ks={"draft_model-k3": 3,
                                                                          "draft_model-k3-p0.5": 3},
                                                        extra_specs={"draft_model-k3-p0.5": floor})), "llamacpp")


def test_the_engines_adaptive_mode_is_named_as_the_answer_where_it_wins_and_as_what_the_table_beat() -> None:
    wins = _floor({"draft_model-k3": {"c1": (1.20, 1.15, 1.25), "c4": (1.05, 1.00, 1.10)},
                   "draft_model-k3-p0.5": {"c1": (1.60, 1.55, 1.65), "c4": (1.40, 1.35, 1.45)}})
    choice = wins.drafter_choice
    assert choice is not None and "p-min 0.5" in choice.chosen
    assert choice.reason.startswith("deploy the engine's adaptive mode (drafting stops below confidence 0.5)")
    loses = _floor({"draft_model-k3": {"c1": (1.60, 1.55, 1.65), "c4": (1.40, 1.35, 1.45)},
                    "draft_model-k3-p0.5": {"c1": (1.20, 1.15, 1.25), "c4": (1.05, 1.00, 1.10)}})
    choice = loses.drafter_choice
    assert choice is not None and "p-min" not in choice.chosen
    assert choice.reason.startswith("a table of static Ks, over the engine's adaptive mode")
    assert choice.margin is not None and choice.margin.outcome == "beats"
