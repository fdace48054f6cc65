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
    path = out / "README.md"
    old = path.read_text() if path.exists() else ""
    head = old.find(EAGLE3_HEADING)
    if head >= 0:  # the EAGLE-3 head's section (tools/train_demo_eagle3.py) stays, after the pair's
        text += "\n" + old[head:]
    path.write_text(text)


def _shape(args: argparse.Namespace, model: str) -> argparse.Namespace:
    """The layers, hidden size, heads and MLP width given for the target or the draft."""
    return argparse.Namespace(**{key: getattr(args, f"{model}_{key}")
                                 for key in ("layers", "hidden", "heads", "intermediate")})


EAGLE3_HEADING = "## EAGLE-3 head: `demo-eagle3`"


def write_eagle3_section(out: Path, r: dict[str, Any]) -> None:
    """Put the EAGLE-3 head's section (from its training report) at the end of ``models/README.md``, replacing the
    one an earlier run wrote but keeping what was written by hand from its ``### Served`` subsection on."""
    h, v, dist, f = r["head"], r["vocab"], r["distill"], r["features"]
    acc = r.get("acceptance", {})
    ks = sorted({key for row in acc.values() for key in row if key.startswith("k")})
    acc_rows = "\n".join(
        f"| {name} ({row['prompts']} prompts) | " + " | ".join(
            f"{row[k]['eagle3']} / {row[k]['demo_draft']}" for k in ks) + " |" for name, row in acc.items())
    acc_table = (f"| prompts | {' | '.join(f'K={k[1:]}' for k in ks)} |\n| --- |{' --- |' * len(ks)}\n{acc_rows}"
                 if acc else "Not checked in this run (`--eval-prompts 0`).")
    section = f"""{EAGLE3_HEADING}

An EAGLE-3 head for demo-target, made with `tools/train_demo_eagle3.py`, served by vLLM with
`{{"method": "eagle3", "model": "models/demo-eagle3", "num_speculative_tokens": K}}`. Architecture
`LlamaForCausalLMEagle3`: `fc` over the target's residual stream after layers {', '.join(map(str, r['aux_layers']))}
(3 x 576 in), one decoder layer (`midlayer`) whose attention reads the token embedding and the hidden state
concatenated (2 x 576 in), its own `norm` and `lm_head` over a draft vocabulary of {v['draft_vocab_size']} of
the target's {v['target_vocab_size']} tokens (`d2t` offsets, `t2d` mask); the embedding table is the target's
(not in the file). {h['params'] / 1e6:.2f}M parameters, {r['size_bytes'] / 1e6:.1f} MB on disk (bfloat16, one
safetensors file). Same license as the pair: trained by the project on the same stdlib text (PSF License).

Command (seed {r['seed']}, torch {r['torch']}, 2 CPU threads; the target is read, never changed):

```
{r['command']}
```

1. Distillation data: the target's greedy continuations (batched, KV cache, {dist['seconds'] / 60:.1f} min) of
   {dist['samples']} prompts ({dist['chat_samples']} of them chat prompts, the rest corpus excerpts):
   {dist['continuation_tokens']} tokens.
2. Draft vocabulary: the special tokens and the most frequent target ids in the training corpus and those
   continuations; they cover {v['train_token_coverage']:.1%} of the training tokens and
   {v['heldout_corpus_coverage']:.1%} of the held-out corpus.
3. Target features: the frozen target ran once over those continuations, {f['corpus_windows']} corpus windows and
   {f['chat_examples']} chat conversations made from the corpus's docstrings (as the target was trained on)
   ({f['tokens']} tokens, {f['seconds'] / 60:.1f} min): its hidden states after layers
   {', '.join(map(str, r['aux_layers']))} and its next-token distribution at every position, kept in memory.
4. Training: {h['steps']} AdamW steps of {r['batch']} sequences ({h['seconds'] / 60:.1f} min, the target's embedding
   frozen, `lm_head` and `norm` started from the target's). The head is unrolled for {len(h['final_loss_ema'])} steps
   per position as vLLM runs it (steps after the first read the head's own pre-norm output and attend to the first
   step's entries and their own) and learns the target's distribution renormalized over the draft vocabulary
   (soft cross-entropy, step s weighted {r['decay']}^(s - 1)). Final loss per step (EMA)
   {', '.join(map(str, h['final_loss_ema']))}; top-1 agreement with the target per step
   {', '.join(map(str, h['final_top1_ema']))}.

Total wall time: {r['total_minutes']} min. Report: `models/eagle3_training_report.json`.

### Greedy acceptance right after training (eager PyTorch, head / demo-draft)

{acc_table}
"""
    path = out / "README.md"
    text = path.read_text() if path.exists() else ""
    start = text.find(EAGLE3_HEADING)
    if start >= 0:
        served = text.find("### Served", start)
        tail = text[served:] if served >= 0 else ""
        text = text[:start].rstrip() + "\n\n" + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip() + "\n\n" + section
    path.write_text(text)
