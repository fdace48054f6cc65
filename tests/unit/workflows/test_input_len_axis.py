"""Input length as a sweep axis: prompts shaped to exactly N tokens by the target's tokenizer (never a silent
truncation), the two forms of workload.input_len, and the length dimension through plans, the runner, resume,
analysis, the recommendation and the report, on fake engines."""

from __future__ import annotations

import json
from contextlib import nullcontext
from io import StringIO
from pathlib import Path

import pytest
from data_fixtures import throughput_rows, write_jsonl
from rich.console import Console

from fakeengine.drive import RecordingReporter
from fakeengine.server import FakeEngine
from specmeter.common.errors import InputError
from specmeter.config.criteria import Criteria
from specmeter.config.models import LoadSpec
from specmeter.data.shaping import check_lengths, shaped_conversations, speed_bench_config
from specmeter.data.workload import load_conversations
from specmeter.plans.sweep import SweepSpec
from specmeter.report.console import ConsoleOutput
from specmeter.report.html import page
from specmeter.report.plots_load import speedup
from specmeter.rundir.run_data import load_run
from specmeter.rundir.store import RunStore, load_summary
from specmeter.workflows.plan import PlanRequest, plan_run
from specmeter.workflows.recommend import recommend
from specmeter.workflows.resume import resume
from specmeter.workflows.sweep import SweepRequest, sweep, sweep_spec
from specmeter.workflows.terminal import Terminal

ROOT = Path(__file__).resolve().parents[3]
TARGET = str(ROOT / "models" / "demo-target")
VERSE = ["Shall I compare thee to a summer's day", "Thou art more lovely and more temperate",
         "Rough winds do shake the darling buds of May", "And summer's lease hath all too short a date",
         "Sometime too hot the eye of heaven shines", "And often is his gold complexion dimm'd"]


@pytest.fixture
def poem(tmp_path: Path) -> Path:
    path = tmp_path / "poem.txt"
    path.write_text("\n".join(VERSE) + "\n", encoding="utf-8")
    return path


def target_tokenizer():  # type: ignore[no-untyped-def]
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(TARGET)


@pytest.mark.parametrize("length", [64, 129, 512])
def test_sonnet_raw_prompts_are_exactly_n_tokens_as_the_server_encodes_them(poem: Path, length: int) -> None:
    tok = target_tokenizer()
    convs, info = load_conversations("sonnet", str(poem), LoadSpec(num_prompts=20), options={"num_prompts": 20},
                                     tokenizer=TARGET, shaped=length)
    assert info.shaped_len == length and len(convs) == 20
    for c in convs:
        assert c.raw_prompt and c.metadata["input_tokens"] == length
        assert len(tok(c.turns[0]).input_ids) == length  # BOS included: what /v1/completions encodes


def test_sonnet_chat_prompts_count_the_whole_templated_request(poem: Path) -> None:
    tok = target_tokenizer()
    convs, _ = load_conversations("sonnet", str(poem), LoadSpec(num_prompts=2),
                                  options={"num_prompts": 2, "chat": True}, tokenizer=TARGET, shaped=200)
    for c in convs:
        ids = tok.apply_chat_template([{"role": "user", "content": c.turns[0]}], tokenize=True,
                                      add_generation_prompt=True)
        assert not c.raw_prompt
        assert len(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids) == 200


def test_lengths_the_target_or_the_dataset_cannot_take_are_one_line_errors() -> None:
    with pytest.raises(InputError, match=r"workload.input_len: 2000 input \+ 96 output tokens .* context of 2048"):
        check_lengths([128, 2000], "sonnet", TARGET, max_tokens=96)
    with pytest.raises(InputError, match=r"workload.input_len: sample prompts cannot be shaped.*'LO:HI'"):
        check_lengths([128], "sample", TARGET, max_tokens=16)
    assert speed_bench_config(2048) == speed_bench_config(2000) == "throughput_2k"
    with pytest.raises(InputError, match="no throughput config of 3000 tokens"):
        speed_bench_config(3000)


def test_speed_bench_lengths_read_their_throughput_config(tmp_path: Path) -> None:
    prepared = throughput_rows()[:2]  # the placeholder row is what `data prepare` fills or drops
    write_jsonl(tmp_path / "speed_bench_throughput_2k.jsonl", prepared)
    write_jsonl(tmp_path / "speed_bench_throughput_1k.jsonl", prepared[:1])
    assert len(shaped_conversations("speed-bench", str(tmp_path), {}, 2048, None)) == 2
    assert len(shaped_conversations("speed-bench", str(tmp_path), {}, 1000, None)) == 1
    with pytest.raises(InputError, match=r"throughput_8k\.jsonl: not found"):
        shaped_conversations("speed-bench", str(tmp_path), {}, 8192, None)
    with pytest.raises(InputError, match=r"workload\.options\.config: workload\.input_len sets it"):
        shaped_conversations("speed-bench", str(tmp_path), {"config": "throughput_1k"}, 1024, None)


def spec(input_len: object, **load: object) -> SweepSpec:
    return SweepSpec.model_validate({
        "workload": {"dataset": "random", "input_len": input_len}, "engine": {"model": "m"},
        "candidates": [{"method": "ngram", "num_speculative_tokens": 2}],
        "load": {"concurrency": [1, 4], **load}})


def test_a_list_is_an_axis_and_a_string_or_mapping_is_a_range() -> None:
    axis = spec([128, 512])
    assert axis.workload.lengths == [128, 512] and axis.workload.length_range is None
    assert [p.id for p in axis.effective_load().points] == ["in128-c1", "in128-c4", "in512-c1", "in512-c4"]
    assert spec(256).workload.lengths == [256]
    for form in ("0:512", {"min": 0, "max": 512}):
        ranged = spec(form)
        assert ranged.workload.length_range == (0, 512) and not ranged.workload.lengths
        assert [p.id for p in ranged.effective_load().points] == ["c1", "c4"]  # 0.1.0 ids without an axis
    for bad in ("512", "9:3", [128, 128], [0]):
        with pytest.raises(ValueError, match="input_len"):
            spec(bad)
    with pytest.raises(ValueError, match="not supported; list the loads"):
        spec([128, 512], concurrency="auto")


def terminal() -> Terminal:
    return Terminal(out=Console(file=StringIO(), width=200), err=Console(file=StringIO()),
                    progress=lambda console: nullcontext(RecordingReporter()))


def _length_sweep(where: Path, base: FakeEngine, sd: FakeEngine, *, k: int, concurrency: list[int],
                  **load: object) -> Path:
    """A sweep file over random prompts of 16 and 48 tokens: the baseline and n-gram K on the two fakes."""
    file = where / "sweep.yaml"
    file.write_text(json.dumps({
        "workload": {"dataset": "random", "num_prompts": 4, "options": {"vocab_size": 100}, "input_len": [16, 48]},
        "engine": {"endpoint": sd.url}, "baseline_endpoint": base.url, "interleave": True,
        "candidates": [{"method": "ngram", "num_speculative_tokens": k, "endpoint": sd.url}],
        "load": {"concurrency": concurrency, "max_tokens": 16, "warmup": 0, "precision": "fixed", **load}}),
        encoding="utf-8")
    return file


def test_a_sweep_runs_every_length_at_every_load_and_decides_per_length(tmp_path: Path) -> None:
    base = FakeEngine(output_tokens=16, alpha=0.0, step_s=0.005, speculative=False)
    sd = FakeEngine(k=2, output_tokens=16, alpha=0.8, step_s=0.005)  # drafts the K the sweep gives it
    with base, sd:
        file = _length_sweep(tmp_path, base, sd, k=2, concurrency=[1, 2], stop_at_saturation=False)
        sweep(SweepRequest(sweep_spec(file), tmp_path, name="axis"), terminal())
        run_dir = tmp_path / "axis"
        summary = load_summary(run_dir)
        ids = ["in16-c1", "in16-c2", "in48-c1", "in48-c2"]
        assert summary.status == "complete" and [p.id for p in summary.plan.points] == ids
        assert [s.shaped_len for s in summary.plan.workload.lengths] == [16, 48]
        for config in summary.configs:
            assert [p.point_id for p in config.points] == ids
        records = RunStore(run_dir).read_records()
        for point in summary.plan.points:
            sent = {c.config_id: sorted((r.conversation_id, r.turn) for r in records
                                        if r.point_id == point.id and r.config_id == c.config_id)
                    for c in summary.configs}
            assert len(sent) == 2 and len({tuple(v) for v in sent.values()}) == 1  # the same requests for all
            assert all(sent.values())
        prompt = {n: {r.prompt_tokens or 0 for r in records if r.point_id.startswith(f"in{n}-")} for n in (16, 48)}
        assert max(prompt[16]) < min(prompt[48])  # each length's own prompts (exact counts: the vLLM test)
        crossings = summary.analysis.crossovers
        assert sorted(c.input_len for c in crossings if c.config_id != "baseline") == [16, 48]
        assert all(f"at {c.input_len} input tokens" in c.note for c in crossings)

        rec = recommend(run_dir, Criteria(), terminal())  # round 1, the run's answer
        assert [r.input_len for r in rec.per_input_len] == [16, 48] and rec.input_len == 16
        assert any("input length" in n for n in rec.notes)

        run = load_run(run_dir)
        fig = speedup(run)
        assert fig is not None
        labels = {label for ax in fig.axes for label in ax.get_legend_handles_labels()[1]}
        assert any("@ 16 in" in label for label in labels) and any("@ 48 in" in label for label in labels)
        out = StringIO()
        ConsoleOutput(console=Console(file=out, width=200)).write(run)
        assert "16 input tokens" in out.getvalue() and "48 input tokens" in out.getvalue()
        html = page(run)
        assert "<h3>16 input tokens: " in html and "<h3>48 input tokens: " in html  # each length's evidence

        # plan: the model fits every length; predictions, the mix and the table are one length's
        at = {n: plan_run(PlanRequest(run_dir=run_dir, input_len=n), terminal()) for n in (None, 48)}
        assert at[None].prompt_tokens < at[48].prompt_tokens
        assert any("predicted for 16 input tokens" in n for n in at[None].notes)
        with pytest.raises(InputError, match="measured input lengths 16, 48"):
            plan_run(PlanRequest(run_dir=run_dir, input_len=32), terminal())

        # resume: the longer length's points lost, only they run again, from the stored per-length selection
        summary.status = "incomplete"
        for config in summary.configs:
            config.points = [p for p in config.points if not p.point_id.startswith("in48-")]
        RunStore(run_dir).write_summary(summary)
        resume(run_dir, None, terminal())
        resumed = load_summary(run_dir)
        assert resumed.status == "complete"
        assert all([p.point_id for p in c.points] == ids for c in resumed.configs)


def test_the_load_ramp_climbs_each_input_length_on_its_own(tmp_path: Path) -> None:
    """Engines that run at most 4 requests at once saturate past 4 at every length: each length's ramp stops and
    skips only its own higher loads."""
    base = FakeEngine(output_tokens=16, alpha=0.0, step_s=0.01, max_num_seqs=4, speculative=False)
    sd = FakeEngine(output_tokens=16, alpha=0.7, step_s=0.01, max_num_seqs=4)
    with base, sd:
        file = _length_sweep(tmp_path, base, sd, k=4, concurrency=[1, 2, 4, 8, 16, 32])
        sweep(SweepRequest(sweep_spec(file), tmp_path, name="ramp"), terminal())
        summary = load_summary(tmp_path / "ramp")
        assert sorted(r.input_len or 0 for r in summary.ramp) == [16, 48]
        for ramp in summary.ramp:
            assert all(step.point_id.startswith(f"in{ramp.input_len}-") for step in ramp.steps)
            assert all(p.startswith(f"in{ramp.input_len}-") for p in ramp.skipped)
            assert ramp.saturated_at is not None and ramp.skipped  # past the engines' 4 slots
