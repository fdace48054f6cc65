"""A drafter's label (analysis/families.py) says what tells two drafters of one model apart: its confidence floor
and the engine's adaptive mode, each a drafter of its own in the drafter choice."""

from __future__ import annotations

from specmeter.analysis.families import drafter_label
from specmeter.config.models import SpecConfig


def test_the_drafter_label_tells_a_floor_and_an_adaptive_mode_from_the_plain_drafter() -> None:
    floor = SpecConfig.model_validate({"method": "draft_model", "draft_model": "m/demo-draft",
                                       "num_speculative_tokens": 4, "draft_p_min": 0.5})
    assert drafter_label(floor) == "draft_model demo-draft p-min 0.5"
    assert drafter_label(floor.model_copy(update={"draft_p_min": None})) == "draft_model demo-draft"
    head = SpecConfig.model_validate({"method": "eagle3", "draft_model": "head", "num_speculative_tokens": 4,
                                      "adaptive": True})
    assert drafter_label(head) == "eagle3 head adaptive"


def test_an_mtp_drafter_served_from_its_own_checkpoint_names_it() -> None:
    mtp = SpecConfig.model_validate({"method": "mtp", "num_speculative_tokens": 2, "target_model": "models/demo-mtp/"})
    assert drafter_label(mtp) == "mtp demo-mtp"
    assert drafter_label(mtp.model_copy(update={"target_model": None})) == "mtp"
