#!/usr/bin/env python3
"""Write a made-up, seeded trace in Mooncake's format (specmeter.data.traces.synthetic) for the demo pair: prompt
lengths lognormal around 320 tokens up to the 2048-token context less the longest answer, answers lognormal around
48 tokens in 16..128, Poisson arrivals, and 30% of the rows over one block opening with one of three shared
512-token system prompts. The same arguments write the same file.

Run: .venv/bin/python tools/make_mooncake_trace.py examples/trace-mooncake.jsonl            (200 rows, 2 a second)
     .venv/bin/python tools/make_mooncake_trace.py /tmp/t.jsonl --rows 1000 --rate 5 --seed 3
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specmeter.data.traces.synthetic import TraceShape, mooncake_rows, write_mooncake


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the JSONL file to write")
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--rate", type=float, default=2.0, help="mean arrivals a second")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = mooncake_rows(TraceShape(rows=args.rows, rate=args.rate), seed=args.seed)
    write_mooncake(args.out, rows)
    span = rows[-1]["timestamp"] / 1000
    print(f"{args.out}: {len(rows)} requests over {span:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
