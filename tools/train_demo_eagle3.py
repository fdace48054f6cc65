#!/usr/bin/env python3
"""Train the EAGLE-3 head for demo-target (models/demo-eagle3), distilled from the target on the stdlib corpus.

The head is what vLLM serves with ``{"method": "eagle3", "model": "models/demo-eagle3"}``: one decoder layer of the
target's width that reads the target's hidden states after layers 2, 4 and 5, and drafts over a pruned vocabulary.
The stages live in tools/demo_models/ (eagle3.py: the head and its vLLM-exact forward; eagle3_train.py: the loss,
the loop and the acceptance check):

1. The corpus and its held-out split, tokenized with demo-target's tokenizer (the pair's stage 1).
2. The target's greedy continuations of corpus excerpts (and, with ``--gen-chat-frac``, of chat prompts), the
   pair's distillation stage.
3. The draft vocabulary: the special tokens and the most frequent target ids in the corpus and those
   continuations; ``d2t``/``t2d`` from it.
4. Training: the target runs on each batch (frozen) to give the aux hidden states and its next-token distribution
   at every position; the head runs ``--unroll`` steps per anchor (training-time test: steps after the first take
   the head's own pre-norm output) and learns the target's distribution renormalized over the draft vocabulary.
5. Greedy acceptance simulated as vLLM drafts (held-out chat prompts, held-out corpus excerpts) against demo-draft
   on the same prompts, the head saved (bf16 safetensors), models/eagle3_training_report.json and the head's section
   of models/README.md.

Run from the repository root::

    .venv/bin/python tools/train_demo_eagle3.py --out models
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from demo_models.acceptance import compare_acceptance, heldout_sets
from demo_models.common import SEED_DEFAULT, VOCAB_SIZE, Budget, log, render_chat
from demo_models.corpus import collect_corpus, extract_doc_items, stdlib_dir
from demo_models.distill import generate_distill_data
from demo_models.eagle3 import AUX_LAYERS, Eagle3Head, HeadShape, draft_vocabulary, save_head
from demo_models.eagle3_train import precompute, simulate_eagle3, train_head
from demo_models.examples import (
    SYSTEM_PROMPTS,
    doc_chat_examples,
    instruction_prompts,
    module_chat_examples,
    vary_prompt,
)
from demo_models.model import round_to_bf16_
from demo_models.readme import write_eagle3_section


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("models"),
                   help="folder holding demo-target and demo-draft; demo-eagle3/ is written there")
    p.add_argument("--seed", type=int, default=SEED_DEFAULT)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--heldout-mod", type=int, default=20, help="hold out 1 in N stdlib files (as the pair)")
    p.add_argument("--draft-vocab", type=int, default=2048, help="target ids the head can draft")
    p.add_argument("--intermediate", type=int, default=1536, help="the head's MLP width")
    p.add_argument("--gen-minutes", type=float, default=8.0, help="wall-clock budget for the target's continuations")
    p.add_argument("--gen-prompts", type=int, default=None, help="fixed number of prompt batches (reproducible)")
    p.add_argument("--gen-batch", type=int, default=32)
    p.add_argument("--gen-cache", type=Path, default=None,
                   help="keep the continuations in this file, and read them from it when it exists (another run with "
                        "the same generation options then trains on the same data without generating again)")
    p.add_argument("--gen-corpus-tokens", type=int, default=96, help="max new tokens for corpus prompts")
    p.add_argument("--gen-chat-tokens", type=int, default=128, help="max new tokens for chat prompts")
    p.add_argument("--gen-chat-frac", type=float, default=0.0, help="fraction of chat prompts among the prompts")
    p.add_argument("--minutes", type=float, default=25.0, help="wall-clock budget for training the head")
    p.add_argument("--steps", type=int, default=None, help="fixed number of steps (reproducible); budget still caps")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--corpus-seq", type=int, default=256, help="tokens per corpus window")
    p.add_argument("--corpus-windows", type=int, default=256, help="corpus windows trained on beside the continuations")
    p.add_argument("--chat-examples", type=int, default=600,
                   help="chat conversations from the corpus's docstrings (as the target was trained on) trained on")
    p.add_argument("--max-len", type=int, default=256, help="longest prompt + continuation, cut from the left")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--unroll", type=int, default=3, help="unrolled draft steps per anchor in training")
    p.add_argument("--decay", type=float, default=0.8, help="loss weight of step s is decay ** (s - 1)")
    p.add_argument("--bf16-autocast", action=argparse.BooleanOptionalAction, default=True,
                   help="bf16 autocast matmuls for the target's and the head's forward (fp32 weights and optimizer)")
    p.add_argument("--eval-prompts", type=int, default=24, help="held-out prompts per set for the check (0: skip)")
    p.add_argument("--eval-new-tokens", type=int, default=96)
    p.add_argument("--eval-k", type=int, nargs="+", default=[2, 3, 4])
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.monotonic()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    from tokenizers import Tokenizer
    from transformers import LlamaForCausalLM

    out: Path = args.out
    tgt_dir, dft_dir, head_dir = out / "demo-target", out / "demo-draft", out / "demo-eagle3"
    command = " ".join([Path(sys.argv[0]).as_posix(), *(argv or sys.argv[1:])])
    report: dict[str, Any] = {"seed": args.seed, "command": command, "python": sys.version.split()[0],
                              "torch": torch.__version__, "aux_layers": list(AUX_LAYERS), "batch": args.batch,
                              "decay": args.decay}
    target_cfg = json.loads((tgt_dir / "config.json").read_text())
    target = LlamaForCausalLM.from_pretrained(str(tgt_dir), dtype=torch.float32).eval()
    for param in target.parameters():
        param.requires_grad_(False)
    raw_tok = Tokenizer.from_file(str(tgt_dir / "tokenizer.json"))
    ids = {"bos": target_cfg["bos_token_id"], "eos": target_cfg["eos_token_id"], "pad": target_cfg["pad_token_id"]}

    def encode_many(texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in raw_tok.encode_batch(list(texts), add_special_tokens=False)]

    # 1. corpus ------------------------------------------------------------------------------
    train_files, heldout_files = collect_corpus(args.heldout_mod)
    docs = [[ids["bos"], *e, ids["eos"]] for e in encode_many([f.text for f in train_files])]
    held_docs = [[ids["bos"], *e, ids["eos"]] for e in encode_many([f.text for f in heldout_files])]
    corpus_stream = torch.tensor([t for d in docs for t in d], dtype=torch.long)
    items = extract_doc_items(train_files)
    log(f"corpus: {len(train_files)} train files, {corpus_stream.numel()} tokens; {len(heldout_files)} held out")
    report["corpus"] = {"stdlib": str(stdlib_dir()), "train_files": len(train_files),
                        "heldout_files": len(heldout_files), "train_tokens": int(corpus_stream.numel())}

    # 2. the target's continuations --------------------------------------------------------------
    n_total = 6000
    n_chat = int(n_total * args.gen_chat_frac)
    all_chat = instruction_prompts(items, rng, n_doc=4000)
    prompts: list[tuple[list[int], int, bool]] = []
    chat_texts = []
    for i in range(n_chat):
        q = vary_prompt(all_chat[i % len(all_chat)][1], rng)
        msgs = [{"role": "user", "content": q}]
        if rng.random() < 0.25:
            msgs.insert(0, {"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
        chat_texts.append(render_chat(msgs, True))
    prompts += [(p[-192:], args.gen_chat_tokens, True) for p in encode_many(chat_texts)]
    long_docs = [d for d in docs if len(d) > 80]
    for _ in range(n_total - n_chat):
        d = rng.choice(long_docs)
        n = rng.randint(16, 128)
        s = rng.randint(0, max(0, len(d) - n - 1))
        prompts.append(([ids["bos"], *d[s + 1 : s + n]] if s > 0 else d[:n], args.gen_corpus_tokens, False))
    rng.shuffle(prompts)
    if args.gen_cache is not None and args.gen_cache.exists():
        cached = torch.load(args.gen_cache, weights_only=False)
        samples, report["distill"] = cached["samples"], cached["report"]
        log(f"continuations read from {args.gen_cache} (made by: {report['distill']['command']})")
    else:
        gbudget = Budget(args.gen_minutes * 60, args.gen_prompts)
        samples = generate_distill_data(target, prompts, ids["pad"], ids["eos"], args.gen_batch, 1, gbudget)
        report["distill"] = {"samples": len(samples), "chat_samples": sum(s.chat for s in samples),
                             "continuation_tokens": sum(len(s.cont) for s in samples),
                             "seconds": round(time.monotonic() - gbudget.start, 1), "command": command}
        if args.gen_cache is not None:
            torch.save({"samples": samples, "report": report["distill"]}, args.gen_cache)
    n_cont = report["distill"]["continuation_tokens"]
    log(f"continuations: {len(samples)} ({sum(s.chat for s in samples)} chat), {n_cont} tokens")

    # 3. draft vocabulary --------------------------------------------------------------------
    counts: Counter[int] = Counter(corpus_stream.tolist())
    for smp in samples:
        counts.update(smp.cont)
    special = [raw_tok.token_to_id(t) for t in ("<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>")]
    draft_ids = draft_vocabulary(counts, args.draft_vocab, VOCAB_SIZE, special)
    total = sum(counts.values())
    held_counts = Counter(t for d in held_docs for t in d)
    in_vocab = set(draft_ids.tolist())
    report["vocab"] = {
        "draft_vocab_size": args.draft_vocab, "target_vocab_size": VOCAB_SIZE,
        "train_token_coverage": round(sum(c for t, c in counts.items() if t in in_vocab) / total, 4),
        "heldout_corpus_coverage": round(sum(c for t, c in held_counts.items() if t in in_vocab)
                                         / sum(held_counts.values()), 4),
    }
    log(f"draft vocabulary {args.draft_vocab}: covers {report['vocab']['train_token_coverage']:.3f} of the training "
        f"tokens, {report['vocab']['heldout_corpus_coverage']:.3f} of the held-out corpus")

    # 4. training ----------------------------------------------------------------------------
    torch.manual_seed(args.seed + 11)
    rope = target_cfg.get("rope_parameters", {}).get("rope_theta", target_cfg.get("rope_theta", 10000.0))
    shape = HeadShape(hidden=target_cfg["hidden_size"], heads=target_cfg["num_attention_heads"],
                      head_dim=target_cfg["head_dim"], intermediate=args.intermediate, draft_vocab=args.draft_vocab,
                      target_vocab=VOCAB_SIZE, rope_theta=rope, eps=target_cfg["rms_norm_eps"],
                      max_pos=target_cfg["max_position_embeddings"])
    head = Eagle3Head(shape, draft_ids)
    head.warm_start(target)
    log(f"head params {head.n_params() / 1e6:.2f}M")
    gen = torch.Generator().manual_seed(args.seed + 12)
    seqs = [(smp.prompt + smp.cont)[-args.max_len :] for smp in samples]
    starts = torch.randint(0, corpus_stream.numel() - args.corpus_seq, (args.corpus_windows,), generator=gen)
    seqs += [corpus_stream[s : s + args.corpus_seq].tolist() for s in starts.tolist()]
    # Chat conversations of the kind the target learned to answer (from the training files' docstrings), read as
    # they are: they show the head the chat format and replies without the cost of generating them.
    convs = doc_chat_examples(rng.sample(items, min(args.chat_examples, len(items))), rng)
    convs += module_chat_examples(train_files, rng)
    chats = rng.sample(convs, min(args.chat_examples, len(convs)))
    seqs += [c[: args.max_len] for c in encode_many([render_chat(c, False) for c in chats])]
    t0 = time.monotonic()
    data = precompute(target, seqs, draft_ids, 16, ids["pad"], args.bf16_autocast)
    report["features"] = {"sequences": len(data), "continuations": len(samples), "corpus_windows": args.corpus_windows,
                          "chat_examples": len(chats),
                          "tokens": sum(x.ids.numel() for x in data), "seconds": round(time.monotonic() - t0, 1)}
    log(f"target features of {len(data)} sequences ({report['features']['tokens']} tokens) in "
        f"{report['features']['seconds']:.0f}s")
    budget = Budget(args.minutes * 60, args.steps)
    stats = train_head(head, target.get_input_embeddings(), data, budget, args.batch, args.lr, args.unroll,
                       args.decay, gen, ids["pad"], args.bf16_autocast)
    round_to_bf16_(head)
    head.eval()
    stats["params"] = head.n_params()
    report["head"] = stats
    save_head(head, target_cfg, head_dir)
    log(f"head done: {stats['steps']} steps in {stats['seconds'] / 60:.1f} min, saved to {head_dir}")

    # 5. acceptance check on held-out prompts --------------------------------------------------
    if args.eval_prompts > 0:
        report["acceptance"] = check_acceptance(args, head, target, dft_dir, heldout_files, held_docs, encode_many,
                                                ids["eos"])
    report["total_minutes"] = round((time.monotonic() - t_start) / 60, 1)
    report["size_bytes"] = sum(f.stat().st_size for f in head_dir.iterdir())
    (out / "eagle3_training_report.json").write_text(json.dumps(report, indent=2) + "\n")
    write_eagle3_section(out, report)
    log(f"all done in {report['total_minutes']} min; {report['size_bytes']} bytes on disk")
    return 0


def check_acceptance(args: argparse.Namespace, head: Eagle3Head, target: Any, dft_dir: Path, heldout_files: Any,
                     held_docs: list[list[int]], encode_many: Any, eos: int) -> dict[str, Any]:
    """Greedy AL of the head and of demo-draft at each K on the same held-out chat prompts and corpus excerpts."""
    from transformers import LlamaForCausalLM

    draft = LlamaForCausalLM.from_pretrained(str(dft_dir), dtype=torch.float32).eval()
    sets = heldout_sets(args.seed, args.eval_prompts, heldout_files, held_docs, encode_many)
    return compare_acceptance(sets, target, draft, args.eval_k, args.eval_new_tokens, eos, "eagle3",
                              lambda p, c, k: simulate_eagle3(head, target, p, c, k))


if __name__ == "__main__":
    raise SystemExit(main())
