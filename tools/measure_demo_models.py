#!/usr/bin/env python3
"""Measure the demo target/draft pair in eager PyTorch (transformers), on the CPU.

Reports:

(a) the target's cost of a 1-token decode step and of verifying K+1 tokens in one forward pass
    (both with a KV cache over a fixed context), per step and per token;
(b) the draft's cost of a 1-token decode step, and the ratio draft / target (1-token steps),
    which should be <= 0.1;
(c) the greedy acceptance length AL at K (default 4): speculative decoding is simulated
    greedily -- each step the draft proposes K tokens greedily, the longest prefix equal to the
    target's own greedy tokens is accepted, plus the target's bonus token. AL = 1 + mean accepted
    per step. Prompts come from a JSONL workload (``{"turns": [...], "category": ...}``; the first
    turn is sent through the chat template, with ``system`` if present) or, with ``--corpus N``,
    from held-out standard-library excerpts (the split of ``train_demo_models.py``).

Prints a table and a JSON document (also written with ``--json-out``). Example::

    .venv/bin/python tools/measure_demo_models.py \\
        --prompts src/specmeter/data/sample_workload.jsonl --k 4 --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from demo_models.acceptance import AcceptanceResult, crop_cache, new_cache, simulate_greedy_spec, target_greedy
from demo_models.corpus import collect_corpus


@torch.inference_mode()
def time_steps(
    models: dict[str, tuple[Any, int]], context_len: int, blocks: int, per_block: int, warmup: int = 5
) -> dict[str, float]:
    """Median seconds of one forward of ``n`` tokens on a cached context of ``context_len``.

    ``models`` maps a label to (model, n). The measurements run in alternating blocks of
    ``per_block`` timed forwards (a fresh prefilled cache per block, cropped back after every
    forward); the result is the median of the block medians, which keeps the ratio between
    models fair when other processes share the CPU.
    """
    gen = torch.Generator().manual_seed(0)
    per_label: dict[str, list[float]] = {label: [] for label in models}
    for _ in range(blocks):
        for label, (model, n_tokens) in models.items():
            vocab = model.config.vocab_size
            ctx = torch.randint(10, vocab, (1, context_len), generator=gen)
            step = torch.randint(10, vocab, (1, n_tokens), generator=gen)
            cache = new_cache(model)
            model(input_ids=ctx, past_key_values=cache, use_cache=True)
            times = []
            for i in range(warmup + per_block):
                t0 = time.perf_counter()
                model(input_ids=step, past_key_values=cache, use_cache=True)
                dt = time.perf_counter() - t0
                crop_cache(cache, context_len)
                if i >= warmup:
                    times.append(dt)
            per_label[label].append(statistics.median(times))
    return {label: statistics.median(v) for label, v in per_label.items()}


def load_model(path: Path) -> Any:
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    except TypeError:
        model = AutoModelForCausalLM.from_pretrained(str(path), torch_dtype=torch.float32)
    return model.eval()


def load_prompts(path: Path, tokenizer: Any, limit: int | None) -> list[tuple[str, str, list[int]]]:
    """(id, category, prompt ids) for each JSONL line: first turn through the chat template."""
    out = []
    for i, line in enumerate(path.read_text().splitlines()):
        if not line.strip():
            continue
        rec = json.loads(line)
        msgs = []
        if rec.get("system"):
            msgs.append({"role": "system", "content": rec["system"]})
        msgs.append({"role": "user", "content": rec["turns"][0]})
        text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        out.append((str(rec.get("id", i)), str(rec.get("category", "default")), ids))
        if limit and len(out) >= limit:
            break
    return out


def corpus_prompts(tokenizer: Any, n: int, seed: int, prompt_tokens: int = 64) -> list[tuple[str, str, list[int]]]:
    """``n`` excerpts of held-out standard-library files (same split as the training script)."""
    import random

    _, heldout = collect_corpus()
    rng = random.Random(seed)
    out = []
    for f in rng.sample(heldout, min(n, len(heldout))):
        ids = tokenizer(f.text, add_special_tokens=False)["input_ids"]
        if len(ids) < prompt_tokens + 2:
            continue
        s = rng.randint(0, len(ids) - prompt_tokens - 1)
        out.append((f.relpath, "corpus", [tokenizer.bos_token_id, *ids[s : s + prompt_tokens]]))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--target", type=Path, default=Path("models/demo-target"))
    p.add_argument("--draft", type=Path, default=Path("models/demo-draft"))
    p.add_argument("--prompts", type=Path, default=None, help="JSONL with {'turns': [...], 'category': ...}")
    p.add_argument("--limit", type=int, default=None, help="use at most N prompts from --prompts")
    p.add_argument("--corpus", type=int, default=0, help="also use N held-out stdlib excerpts as prompts")
    p.add_argument("--k", type=int, default=4, help="draft tokens per step")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--ignore-eos", action="store_true", help="do not stop the target at eos")
    p.add_argument("--context", type=int, default=128, help="cached context length for the timings")
    p.add_argument("--iters", type=int, default=30, help="timed forwards per block")
    p.add_argument("--blocks", type=int, default=6, help="alternating timing blocks per model")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json-out", type=Path, default=None)
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(args.target))
    target, draft = load_model(args.target), load_model(args.draft)
    nparams = {name: sum(q.numel() for q in m.parameters()) for name, m in (("target", target), ("draft", draft))}

    # (a), (b) costs
    timed = time_steps(
        {"t1": (target, 1), "tv": (target, args.k + 1), "d1": (draft, 1)},
        args.context, blocks=args.blocks, per_block=args.iters,
    )
    t1, tv, d1 = timed["t1"], timed["tv"], timed["d1"]
    costs = {
        "context_tokens": args.context,
        "target_decode_ms": round(t1 * 1e3, 3),
        f"target_verify{args.k + 1}_ms": round(tv * 1e3, 3),
        f"target_verify{args.k + 1}_ms_per_token": round(tv * 1e3 / (args.k + 1), 3),
        "target_verify_over_decode": round(tv / t1, 3),
        "draft_decode_ms": round(d1 * 1e3, 3),
        "draft_over_target": round(d1 / t1, 4),
    }

    # (c) acceptance
    prompts: list[tuple[str, str, list[int]]] = []
    if args.prompts:
        prompts += load_prompts(args.prompts, tokenizer, args.limit)
    if args.corpus:
        prompts += corpus_prompts(tokenizer, args.corpus, args.seed)
    eos = None if args.ignore_eos else tokenizer.eos_token_id
    per_cat: dict[str, AcceptanceResult] = defaultdict(AcceptanceResult)
    overall = AcceptanceResult()
    t0 = time.monotonic()
    for _pid, cat, ids in prompts:
        toks = target_greedy(target, ids, args.max_new_tokens, eos)
        r = simulate_greedy_spec(draft, ids, toks, args.k)
        per_cat[cat].extend(r)
        overall.extend(r)
    acc_seconds = time.monotonic() - t0

    # expected speedup of a spec step vs plain decoding, from the eager costs above
    step_cost = tv + args.k * d1
    speedup = overall.al * t1 / step_cost if overall.steps else None
    result: dict[str, Any] = {
        "params": nparams,
        "costs": costs,
        "k": args.k,
        "max_new_tokens": args.max_new_tokens,
        "acceptance": {
            "prompts": len(prompts),
            "steps": overall.steps,
            "generated_tokens": overall.generated_tokens,
            "mean_acceptance_length": round(overall.al, 3) if overall.steps else None,
            "per_category": {c: {"steps": r.steps, "tokens": r.generated_tokens,
                                 "mean_acceptance_length": round(r.al, 3)}
                             for c, r in sorted(per_cat.items())},
            "seconds": round(acc_seconds, 1),
        },
        "eager_speedup_estimate": round(speedup, 3) if speedup else None,
    }

    print(f"params: target {nparams['target'] / 1e6:.2f}M, draft {nparams['draft'] / 1e6:.2f}M")
    print(f"{'measure (context ' + str(args.context) + ')':<34}{'ms':>10}")
    for key, val in costs.items():
        if key != "context_tokens":
            print(f"{key:<34}{val:>10}")
    if overall.steps:
        print(f"\n{'category':<16}{'tokens':>8}{'steps':>8}{'AL@K=' + str(args.k):>10}")
        for c, r in sorted(per_cat.items()):
            print(f"{c:<16}{r.generated_tokens:>8}{r.steps:>8}{r.al:>10.3f}")
        print(f"{'ALL':<16}{overall.generated_tokens:>8}{overall.steps:>8}{overall.al:>10.3f}")
        print(f"eager speedup estimate (AL * decode / (verify + K * draft)): {speedup:.2f}")
    print(json.dumps(result, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
