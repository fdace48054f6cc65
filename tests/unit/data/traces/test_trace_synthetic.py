"""The made-up Mooncake trace, by what its docstring promises: seeded, read back by the Mooncake reader in arrival
order, one hash per 512-token block, lengths inside the context and the answer range, some rows sharing a whole
first block; and the committed example is what the generator writes."""

from __future__ import annotations

import math
from pathlib import Path

from specmeter.data.traces.formats import read_trace
from specmeter.data.traces.synthetic import TraceShape, mooncake_rows, write_mooncake

EXAMPLE = Path(__file__).parents[4] / "examples" / "trace-mooncake.jsonl"


def test_a_made_up_trace_reads_as_mooncake_with_its_shape(tmp_path: Path) -> None:
    shape = TraceShape(rows=300, rate=3.0)
    rows = mooncake_rows(shape, seed=5)
    assert rows == mooncake_rows(shape, seed=5) and rows != mooncake_rows(shape, seed=6)
    write_mooncake(tmp_path / "t.jsonl", rows)
    trace = read_trace(tmp_path / "t.jsonl")
    assert trace.format == "mooncake" and len(trace.rows) == 300
    for row in trace.rows:
        assert row.input_length is not None and row.hash_ids is not None
        assert len(row.hash_ids) == math.ceil(row.input_length / 512)
        assert 16 <= row.input_length and row.input_length + shape.output_range[1] + shape.template_room <= 2048
        assert shape.output_range[0] <= row.output_length <= shape.output_range[1]
    shared = [r for r in trace.rows if r.hash_ids and r.hash_ids[0] < shape.shared_prefixes]
    assert shared and all(r.input_length and r.input_length > 512 for r in shared)
    assert len({r.hash_ids[0] for r in shared if r.hash_ids}) > 1
    mean_rate = (len(trace.rows) - 1) / trace.span_s
    assert 2.0 < mean_rate < 4.5  # Poisson arrivals around the rate asked


def test_the_committed_example_is_the_generators_seed_0(tmp_path: Path) -> None:
    write_mooncake(tmp_path / "t.jsonl", mooncake_rows(TraceShape(), seed=0))
    assert (tmp_path / "t.jsonl").read_bytes() == EXAMPLE.read_bytes()
