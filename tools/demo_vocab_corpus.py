#!/usr/bin/env python3
"""Write the demo pair's training text as a corpus for `specmeter vocab --top N --corpus FILE`.

An EAGLE-3 drafter's pruned vocabulary is the N most frequent target tokens of its training data. The demo draft
has the full vocabulary, so to see what pruning would cost it, build the map the same way from the text the pair
was trained on: the standard library's .py files (tests excluded), train split, as tools/demo_models/corpus.py
selects them from this interpreter's standard library. One JSONL line per file: {"text": ...}.

Run: .venv/bin/python tools/demo_vocab_corpus.py /tmp/demo-corpus.jsonl
     specmeter vocab runs/<id>-demo --top 64,128,256,512 --corpus /tmp/demo-corpus.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from demo_models.corpus import collect_corpus, stdlib_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the JSONL file to write")
    args = parser.parse_args(argv)
    train, _heldout = collect_corpus()
    with args.out.open("w", encoding="utf-8") as fh:
        for source in train:
            fh.write(json.dumps({"text": source.text}) + "\n")
    chars = sum(len(s.text) for s in train)
    print(f"{args.out}: {len(train)} files of {stdlib_dir()}, {chars} characters", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
