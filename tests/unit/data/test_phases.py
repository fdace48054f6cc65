"""A phase-shift workload: its phases validated as a sweep file gives them, laid out in order and marked, cycled
within each phase at a point that needs more requests than one pass, and refused in one line where it cannot
hold."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from specmeter.common.errors import InputError
from specmeter.config.models import ConcurrencyPoint, LoadSpec
from specmeter.config.workload import PhaseSpec, WorkloadSpec
from specmeter.data.model import Conversation
from specmeter.data.workload import load_conversations, reload_conversations
from specmeter.load.point import point_conversations
from specmeter.plans.sweep import read_sweep_file

CODE_THEN_CHAT = [{"name": "code", "categories": ["coding", "math"], "conversations": 4},
                  {"name": "chat", "categories": ["roleplay"], "conversations": 3}]


def _phases(raw: list[dict[str, object]]) -> list[PhaseSpec]:
    phases = WorkloadSpec.model_validate({"dataset": "sample", "phases": raw}).phases
    assert phases is not None
    return phases


def test_phases_are_sent_in_order_each_conversation_marked_with_its_phase() -> None:
    convs, info = load_conversations("sample", None, LoadSpec(), phases=_phases(CODE_THEN_CHAT))
    assert [c.phase for c in convs] == ["code"] * 4 + ["chat"] * 3
    assert {c.category for c in convs[:4]} == {"coding", "math"} and {c.category for c in convs[4:]} == {"roleplay"}
    assert len({c.id for c in convs}) == len(convs)
    assert info.phases is not None and [p.name for p in info.phases] == ["code", "chat"]
    assert [c.id for c in reload_conversations(info, LoadSpec(), "here")] == info.conversation_ids


def test_a_phase_without_a_count_sends_all_of_its_categories() -> None:
    convs, _ = load_conversations("sample", None, LoadSpec(), phases=_phases(
        [{"name": "code", "categories": ["coding"]}, {"name": "chat", "categories": ["roleplay", "writing"]}]))
    assert sum(c.phase == "code" for c in convs) == 7 and sum(c.phase == "chat" for c in convs) == 14


def test_a_point_needing_more_requests_cycles_each_phase_in_place() -> None:
    convs, _ = load_conversations("sample", None, LoadSpec(), phases=_phases(CODE_THEN_CHAT))
    sent = point_conversations(convs, ConcurrencyPoint(concurrency=8), LoadSpec())  # a floor of 32 requests
    phases = [c.phase for c in sent]
    switch = phases.index("chat")
    assert set(phases[:switch]) == {"code"} and set(phases[switch:]) == {"chat"}  # one switch, in order
    assert sum(len(c.turns) for c in sent) >= 32
    assert switch % 4 == 0 and (len(sent) - switch) % 3 == 0 and (len(sent) - switch) // 3 == switch // 4
    assert len({c.id for c in sent}) == len(sent)


@pytest.mark.parametrize(("raw", "says"), [
    ([CODE_THEN_CHAT[0]], "at least two phases"),
    ([CODE_THEN_CHAT[0], {**CODE_THEN_CHAT[1], "name": "code"}], "name each phase once"),
    ([CODE_THEN_CHAT[0], {"name": "more", "categories": ["math"]}], "'math' is in phases 'code' and 'more'"),
])
def test_phases_that_cannot_hold_apart_are_refused(raw: list[dict[str, object]], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        _phases(raw)


def test_phases_beside_a_whole_workload_sample_are_refused() -> None:
    with pytest.raises(ValidationError, match="drop categories, num_prompts"):
        WorkloadSpec.model_validate({"dataset": "sample", "phases": CODE_THEN_CHAT, "categories": ["qa"],
                                     "num_prompts": 4})


@pytest.mark.parametrize(("load", "phases", "says"), [
    (LoadSpec(num_prompts=4), CODE_THEN_CHAT, "drop num_prompts and duration_s"),
    (LoadSpec(), [CODE_THEN_CHAT[0], {"name": "chat", "categories": ["cooking"]}], "'chat': unknown category"),
    (LoadSpec(), [CODE_THEN_CHAT[0], {"name": "chat", "categories": ["qa"], "conversations": 9}],
     "'chat': num_prompts 9 exceeds"),
])
def test_phases_the_dataset_or_load_cannot_give_are_refused_in_one_line(
        load: LoadSpec, phases: list[dict[str, object]], says: str) -> None:
    with pytest.raises(InputError, match=says) as err:
        load_conversations("sample", None, load, phases=_phases(phases))
    assert "\n" not in str(err.value)


def test_a_sweep_file_carries_phases_to_its_workload(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("workload:\n  dataset: sample\n  phases:\n    - {name: code, categories: [coding]}\n"
                    "    - {name: chat, categories: [roleplay], conversations: 2}\n"
                    "engine: {model: m}\ncandidates: [{method: ngram, num_speculative_tokens: 2}]\n"
                    "load: {concurrency: [1]}\n", encoding="utf-8")
    phases = read_sweep_file(path).workload.phases
    assert phases is not None and [p.name for p in phases] == ["code", "chat"] and phases[1].conversations == 2
    assert Conversation(id="x", turns=["hi"]).phase is None
