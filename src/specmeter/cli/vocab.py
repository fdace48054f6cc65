"""`specmeter vocab`: what a pruned draft vocabulary (EAGLE-3's d2t/t2d, or the top N tokens of a corpus) costs on
a run's own baseline outputs. Thin: parse, validate, call one workflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from specmeter.cli.args import note, terminal
from specmeter.cli.settings import settings
from specmeter.config.pruning import Pruning
from specmeter.config.workload import WorkloadSpec


@settings(Pruning, "pruning", validate=True)
@settings(WorkloadSpec, "workload", only=("tokenizer",))
def vocab(
    workload: dict[str, Any],
    pruning: Pruning,
    run_dir: Annotated[Path, typer.Argument(help="A run directory with a speculation-off baseline whose records hold output token ids (vLLM at temperature 0).")],
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

    positions, vocab_json = pruning.positions, pruning.vocab_json
    if k is not None:
        note("specmeter vocab --k N", "specmeter vocab --positions N")
        positions = positions or k
    if out is not None:
        note("specmeter vocab --out FILE", "specmeter vocab --vocab-json FILE")
        vocab_json = vocab_json or out
    workflow.vocab(workflow.VocabRequest(run_dir=run_dir, draft_vocab=pruning.draft_vocab, top=pruning.top,
                                         corpus=pruning.corpus, tokenizer=workload.get("tokenizer"), k=positions,
                                         drafted=pruning.drafted, out=vocab_json), terminal())
