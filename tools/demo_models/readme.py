"""Stage 6, the report: ``models/README.md`` from the training report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from demo_models.common import VOCAB_SIZE


def write_readme(out: Path, r: dict[str, Any], args: argparse.Namespace) -> None:
    """Write ``models/README.md`` describing how the pair was made."""
    t, d = r["target"], r["draft"]
    acc = r.get("acceptance_k4", {})
    acc_section = ("| prompts | n | mean acceptance length |\n| --- | --- | --- |\n"
                   + "\n".join(f"| {k} | {v['prompts']} | {v['mean_acceptance_length']} |" for k, v in acc.items())
                   if acc else "Not checked in this run (`--eval-prompts 0`).")
    mb = {k: v / 1e6 for k, v in r["sizes_bytes"].items()}
    cmds = r["command_target"] if r.get("command_target", r["command"]).endswith(r["command"]) else (
        f"{r['command_target']}\n# then, keeping that target, the distillation data and the draft:\n{r['command']}")
    phases = "".join(f"phase {i} of {ph['steps']} steps ({ph['seconds'] / 60:.1f} min"
                     + (f", peak LR {ph['peak_lr']}" if "peak_lr" in ph else "")
                     + f", held-out loss {ph['heldout_loss']}), then "
                     for i, ph in enumerate(t.get("previous_phases", []), 1))
    precision = ("mixed precision: bf16 autocast matmuls, fp32 weights, gradients and AdamW state"
                 if t.get("bf16_autocast") else "fp32")
    rows = {name: f"| {name} | {a.layers} x {a.hidden} | {a.heads} | {a.intermediate} | {s['params'] / 1e6:.2f}M "
                  f"| {mb[name]:.1f} MB |"
            for name, a, s in (("demo-target", _shape(args, "target"), t), ("demo-draft", _shape(args, "draft"), d))}
    corpus, tokens, distill = r["corpus"], r["tokenizer"], r["distill"]
    peak_lr = t.get("peak_lr", args.target_lr)
    text = f"""# Demo models: `demo-target` and `demo-draft`

A tiny target/draft pair for measuring speculative decoding with vLLM on a CPU-only machine,
made by this project with `tools/train_demo_models.py`. They produce Python-flavoured text and
are not useful for anything but benchmarking: the target is heavy enough that its forward pass
dominates a decode step on a 2-core CPU, the draft costs under a tenth of the target per token,
and the draft was distilled from the target so that greedy acceptance is in a realistic range.

## License

Trained by the specmeter project, from scratch, only on the Python standard library sources
(CPython {r['python']}, `{r['corpus']['stdlib']}`, `.py` files, test packages excluded), which are
distributed under the Python Software Foundation License. The weights and tokenizer are released
under the same terms as this repository; the training text remains under the PSF License.

## Models

| | layers x hidden | heads | MLP | parameters (tied embeddings) | size on disk |
| --- | --- | --- | --- | --- | --- |
{rows['demo-target']}
{rows['demo-draft']}

Both are `LlamaForCausalLM` (RoPE, SiLU, RMSNorm, head_dim 64, max_position_embeddings 2048),
stored as bfloat16 safetensors, and share one byte-level BPE tokenizer (vocab {VOCAB_SIZE}) with
special tokens `<s>`, `</s>`, `<pad>`, `<|system|>`, `<|user|>`, `<|assistant|>` and a chat
template: `<s>` then `<|role|>content</s>` per message, generation prompt `<|assistant|>`.

## How they were trained

Command (seed {r['seed']}, torch {r['torch']}, 2 CPU threads):

```
{cmds}
```

1. Corpus: {corpus['train_files']} stdlib files for training ({corpus['train_chars'] / 1e6:.1f}M characters,
   {tokens['train_tokens'] / 1e6:.2f}M tokens), {corpus['heldout_files']} held out \
(1 in {args.heldout_mod} by hash of the path).
2. Tokenizer: byte-level BPE ({tokens['chars_per_token']} characters per token on the corpus).
3. Target: {phases}{t['steps']} AdamW steps of {args.target_batch} x {args.target_seq} tokens \
({t['tokens'] / 1e6:.2f}M tokens,
   {t['seconds'] / 60:.1f} min, {precision}, peak LR {peak_lr}, cosine) on the corpus plus {tokens['chat_examples']}
   chat-formatted examples derived from its docstrings (functions, classes, modules). \
Final train loss (EMA) {t['final_train_loss_ema']},
   held-out loss {t['heldout_loss']} nats/token.
4. Distillation data: the target's greedy continuations (batched, KV cache, {distill['seconds'] / 60:.1f} min) of
   {distill['samples']} prompts ({distill['chat_samples']} instruction-style prompts through the chat template,
   the rest corpus excerpts): {distill['continuation_tokens']} tokens, with the target's \
top-{distill['topk']} log-probs.
5. Draft: {d['steps']} AdamW steps ({d['seconds'] / 60:.1f} min, fp32, peak LR {args.draft_lr}) on those continuations
   (cross-entropy on the target's tokens + {args.draft_soft_weight} x soft cross-entropy on its top-k distribution),
   every {args.draft_corpus_every}th step a corpus batch. Final distillation CE (EMA) {d['distill_ce_ema']},
   corpus CE (EMA) {d['corpus_ce_ema']}, held-out corpus loss {d['heldout_loss']}.

Total wall time: {r['total_minutes']} min. The budgets are wall-clock, so step counts depend on the
machine; `--target-steps`, `--draft-steps` and `--gen-prompts` give a fixed-step run.

## Greedy acceptance (K=4) right after training

{acc_section}

Measure per-token costs and acceptance with `tools/measure_demo_models.py`.
"""
    (out / "README.md").write_text(text)


def _shape(args: argparse.Namespace, model: str) -> argparse.Namespace:
    """The layers, hidden size, heads and MLP width given for the target or the draft."""
    return argparse.Namespace(**{key: getattr(args, f"{model}_{key}")
                                 for key in ("layers", "hidden", "heads", "intermediate")})
