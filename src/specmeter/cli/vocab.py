"""`specmeter vocab`: what a pruned draft vocabulary (EAGLE-3's d2t/t2d, or the top N tokens of a corpus) costs on
a run's own baseline outputs. Thin: parse, validate, call one workflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from specmeter.cli.args import note, terminal
from specmeter.cli.settings import settings
from specmeter.config import flag_text as parse
from specmeter.config.workload import WorkloadSpec


@settings(WorkloadSpec, "workload", only=("tokenizer",))
def vocab(
    workload: dict[str, Any],
    run_dir: Annotated[Path, typer.Argument(help="A run directory with a speculation-off baseline whose records hold output token ids (vLLM at temperature 0).")],
    draft_vocab: Annotated[Path | None, typer.Option(help="The draft vocabulary: a safetensors file or draft model directory holding d2t or t2d (EAGLE-3), or a .npy / .json list of target token ids.")] = None,
    top: Annotated[str | None, typer.Option(help="Build the map from the N most frequent tokens of --corpus (several: 64,128,256).")] = None,
    corpus: Annotated[list[Path] | None, typer.Option(help="With --top: text, JSONL (text, prompt, turns, messages or token_ids per line) or a directory of them (repeatable). A run's requests.jsonl of the same workload makes the map in-sample (circular): the output says so.")] = None,
    positions: Annotated[int | None, typer.Option(min=1, help="Drafted positions to give ceilings for (at least the largest K of the drafted configurations; without any, default 4).")] = None,
    drafted: Annotated[str | None, typer.Option(help="A drafted run to explain, RUN or RUN:CONFIG_ID (default: this run's own speculative configurations).")] = None,
    vocab_json: Annotated[Path | None, typer.Option(help="Where to write vocab.json (default: into RUN_DIR).")] = None,
    k: Annotated[int | None, typer.Option("--k", min=1, hidden=True)] = None,
    out: Annotated[Path | None, typer.Option(hidden=True)] = None,
) -> None:
    """What does a pruned draft vocabulary cost in acceptance?

    From the baseline's own output token ids, the share of the target's tokens the draft vocabulary covers,
    overall and per category (with intervals), and the acceptance ceiling it implies per drafted position and in
    AL: what a perfect drafter restricted to it reaches, step by step (a step accepts the target's next tokens up
    to the first outside the vocabulary). Beside a drafted run: its measured rate per position against that
    ceiling, and the part of its rejections the vocabulary forces."""
    from specmeter.workflows import vocab as workflow

    if k is not None:
        note("specmeter vocab --k N", "specmeter vocab --positions N")
        positions = positions or k
    if out is not None:
        note("specmeter vocab --out FILE", "specmeter vocab --vocab-json FILE")
        vocab_json = vocab_json or out
    tops = sorted(set(parse.sizes(top, "--top", "32000 or 64,128,256"))) if top else []
    workflow.vocab(workflow.VocabRequest(run_dir=run_dir, draft_vocab=draft_vocab, top=tops, corpus=corpus or [],
                                         tokenizer=workload.get("tokenizer"), k=positions, drafted=drafted, out=vocab_json),
                   terminal())
