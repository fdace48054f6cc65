#!/usr/bin/env python3
"""Train the two small demo models that ship with specmeter (a target and a draft).

The command; the stages live in tools/demo_models/ (pipeline.py runs them in order: corpus, tokenizer,
target training, distillation data, draft training, acceptance check and models/README.md). Run from the
repository root::

    .venv/bin/python tools/train_demo_models.py --out models
"""

from __future__ import annotations

from demo_models.pipeline import main

if __name__ == "__main__":
    raise SystemExit(main())
