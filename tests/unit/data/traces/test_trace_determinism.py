"""Replaying the same trace twice sends the same requests, byte for byte: the content matching is seeded by the
load's seed, so fresh readers, fresh datasets and a fresh tokenizer give identical request bodies, and another seed
matches other text to the same rows (the arrivals and lengths stay the trace's)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from specmeter.config.models import LoadSpec
from specmeter.config.trace import TraceSpec
from specmeter.data.workload import load_conversations
from specmeter.load.requests import build_request

TARGET = str(Path(__file__).parents[4] / "models" / "demo-target")


def mooncake(tmp_path: Path) -> Path:
    """30 Mooncake rows: lengths spread over a few blocks, every third row sharing the first 512-token block."""
    rng = random.Random(7)
    rows, t = [], 0
    for i in range(30):
        t += rng.randint(50, 400)
        length = rng.randint(40, 1200)
        blocks = -(-length // 512)
        hashes = [0 if i % 3 == 0 and b == 0 else 1000 + 10 * i + b for b in range(blocks)]
        rows.append({"timestamp": t, "input_length": length, "output_length": rng.randint(8, 40), "hash_ids": hashes})
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def bodies(path: Path, seed: int) -> list[bytes]:
    """Every request of the replay as the client serializes it (json.dumps of the body), built from scratch."""
    load = LoadSpec(trace_scale=[1], seed=seed, ignore_eos=True, temperature=0)
    convs, _ = load_conversations("sample", None, load, tokenizer=TARGET, trace=TraceSpec(path=str(path)))
    out = []
    for conv in convs:
        assert len(conv.turns) == 1  # a trace row is one request: no model reply enters a later one
        request = build_request(conv, 0, [], load, "demo-target")
        out.append(request.path.encode() + b" " + json.dumps(request.body).encode())
    return out


def test_the_same_trace_and_seed_give_the_same_requests_byte_for_byte(tmp_path: Path) -> None:
    path = mooncake(tmp_path)
    first, second = bodies(path, seed=0), bodies(path, seed=0)
    assert len(first) == 30
    assert first == second


def test_another_seed_matches_other_text_to_the_same_rows(tmp_path: Path) -> None:
    path = mooncake(tmp_path)
    a, b = bodies(path, seed=0), bodies(path, seed=1)
    assert a != b
    lengths = [[json.loads(x.split(b" ", 1)[1])["max_tokens"] for x in side] for side in (a, b)]
    assert lengths[0] == lengths[1]  # the rows' own output lengths, whatever the seed
