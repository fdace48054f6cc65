"""A sweep over two input lengths on the real vLLM CPU server: sonnet prompts shaped to 128 and 512 tokens, the
baseline and draft_model K = 2 at two concurrencies. Every configuration runs every length at every load on the same
requests, the engine counts exactly the shaped length as each request's prompt, and the crossover is reported per
length (its value is not asserted: it is what the sweep measures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from vllm_helpers import ServerPool

from specmeter.config.models import SpecConfig, SpecMethod
from specmeter.rundir.store import RunStore, load_summary

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]
SPECMETER = [sys.executable, "-m", "specmeter.cli"]
LENGTHS = (128, 512)
# Shakespeare, Sonnet 18 and 116 (public domain): the poem the prompts are cut from.
POEM = """Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines,
And often is his gold complexion dimm'd;
And every fair from fair sometime declines,
By chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade,
Nor lose possession of that fair thou ow'st;
Nor shall death brag thou wander'st in his shade,
When in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see,
So long lives this, and this gives life to thee.
Let me not to the marriage of true minds
Admit impediments. Love is not love
Which alters when it alteration finds,
Or bends with the remover to remove.
O no! it is an ever-fixed mark
That looks on tempests and is never shaken;
It is the star to every wand'ring bark,
Whose worth's unknown, although his height be taken.
"""


def test_a_sweep_over_two_input_lengths_reports_the_crossover_per_length(
        pool: ServerPool, models: Path, tmp_path: Path) -> None:
    draft = SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=2, draft_model=str(models / "demo-draft"))
    poem = tmp_path / "poem.txt"
    poem.write_text(POEM, encoding="utf-8")
    entry = draft.model_dump(mode="json", exclude_none=True, exclude={"extra"})
    sweep = {
        "workload": {"dataset": "sonnet", "path": str(poem), "num_prompts": 4, "options": {"num_prompts": 4},
                     "input_len": list(LENGTHS)},
        "engine": {"model": str(models / "demo-target")},
        "baseline_endpoint": pool.get(SpecConfig()).base_url,
        "candidates": [{**entry, "endpoint": pool.get(draft).base_url}],
        "load": {"concurrency": [1, 4], "max_tokens": 24, "temperature": 0, "warmup": 1, "precision": "fixed"},
        "interleave": True,
    }
    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump(sweep), encoding="utf-8")
    res = subprocess.run([*SPECMETER, "sweep", str(file), "--out", str(tmp_path), "--name", "lengths", "-v"],
                         capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    run_dir = tmp_path / "lengths"
    summary = load_summary(run_dir)
    assert summary.status == "complete"
    points = {p.id: p for p in summary.plan.points}
    assert sorted(points) == sorted(f"in{n}-c{c}" for n in LENGTHS for c in (1, 4))
    records = RunStore(run_dir).read_records()
    measured = [r for r in records if r.ok and not r.warmup]
    for point_id, point in points.items():
        at = [r for r in measured if r.point_id == point_id]
        by_config = {cid: sorted((r.conversation_id, r.turn) for r in at if r.config_id == cid)
                     for cid in ("baseline", summary.plan.configs[1].id)}
        assert all(by_config.values()) and len({tuple(v) for v in by_config.values()}) == 1
        assert {r.prompt_tokens for r in at} == {point.input_len}  # the engine's own count: exactly the length
    crossings = [c for c in summary.analysis.crossovers if c.config_id != "baseline"]
    assert sorted(c.input_len for c in crossings) == list(LENGTHS)
    assert all(f"at {c.input_len} input tokens" in c.note for c in crossings)
    assert "Where speculation stops paying" in res.stdout
    rec = subprocess.run([*SPECMETER, "recommend", str(run_dir), "--json"], capture_output=True, text=True,
                         timeout=600)
    assert rec.returncode == 0, rec.stdout[-3000:] + rec.stderr[-3000:]
    answer = json.loads(rec.stdout)
    assert [r["input_len"] for r in answer["per_input_len"]] == list(LENGTHS)
    assert any("input length" in note for note in answer["notes"])
