#!/usr/bin/env python3
"""Train demo-mtp: demo-target as a MiMo model with one multi-token-prediction layer (models/demo-mtp).

vLLM serves it with ``--model models/demo-mtp --speculative-config '{"method": "mtp", "num_speculative_tokens": K}'``.
The folder links demo-target's weights and tokenizer and adds mtp.safetensors (the layer, and the zero q/k/v biases
MiMo's Qwen2 attention reads), so the target is demo-target, token for token. The stages live in tools/demo_models/
(mtp.py: the layer and its vLLM-exact forward; mtp_train.py: the loss, the loop and the acceptance check):

1. The corpus and its held-out split, tokenized with demo-target's tokenizer (the pair's stage 1).
2. The target's greedy replies to chat prompts made from the training files' docstrings (batch 1, KV cache), so the
   layer sees the target's states on its own text, as it does when served.
3. Training: the target's pre-norm last states and top-k next-token distribution on those replies, corpus windows
   and chat conversations, computed once; the layer runs ``--unroll`` steps per anchor (steps after the first take
   its own output, as vLLM re-runs the one layer for K > 1) and learns the target's distribution.
4. Greedy acceptance simulated as vLLM drafts (held-out chat prompts, held-out corpus excerpts) against demo-draft
   on the same prompts; the layer saved (bf16), models/mtp_training_report.json.

Run from the repository root::

    .venv/bin/python tools/train_demo_mtp.py --out models
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from demo_models.acceptance import compare_acceptance, heldout_sets, target_greedy
from demo_models.common import SEED_DEFAULT, Budget, log, render_chat
from demo_models.corpus import collect_corpus, extract_doc_items, stdlib_dir
from demo_models.examples import (
    SYSTEM_PROMPTS,
    doc_chat_examples,
    instruction_prompts,
    module_chat_examples,
    vary_prompt,
)
from demo_models.model import round_to_bf16_
from demo_models.mtp import LayerShape, MtpLayer, save_mtp
from demo_models.mtp_train import precompute, simulate_mtp, train_layer


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("models"),
                   help="folder holding demo-target and demo-draft; demo-mtp/ is written there")
    p.add_argument("--seed", type=int, default=SEED_DEFAULT)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--heldout-mod", type=int, default=20, help="hold out 1 in N stdlib files (as the pair)")
    p.add_argument("--replies", type=int, default=48, help="the target's greedy replies to chat prompts")
    p.add_argument("--reply-tokens", type=int, default=96, help="max new tokens per reply")
    p.add_argument("--corpus-seq", type=int, default=256, help="tokens per corpus window")
    p.add_argument("--corpus-windows", type=int, default=256, help="corpus windows trained on")
    p.add_argument("--chat-examples", type=int, default=800,
                   help="chat conversations from the corpus's docstrings (as the target was trained on)")
    p.add_argument("--max-len", type=int, default=256, help="longest sequence, cut from the left")
    p.add_argument("--topk", type=int, default=32, help="target log-probs kept per position as the soft label")
    p.add_argument("--minutes", type=float, default=25.0, help="wall-clock budget for training the layer")
    p.add_argument("--steps", type=int, default=None, help="fixed number of steps (reproducible); budget still caps")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--unroll", type=int, default=3, help="unrolled draft steps per anchor in training")
    p.add_argument("--decay", type=float, default=0.5, help="loss weight of step s is decay ** (s - 1)")
    p.add_argument("--bf16-autocast", action=argparse.BooleanOptionalAction, default=True,
                   help="bf16 autocast matmuls (fp32 weights and optimizer)")
    p.add_argument("--eval-prompts", type=int, default=24, help="held-out prompts per set for the check (0: skip)")
    p.add_argument("--eval-new-tokens", type=int, default=96)
    p.add_argument("--eval-k", type=int, nargs="+", default=[1, 2, 3, 4])
    return p.parse_args(argv)


def chat_prompt(question: str, rng: random.Random) -> str:
    """A first-turn chat prompt as the served workloads send it, a system prompt one time in four."""
    msgs = [{"role": "user", "content": vary_prompt(question, rng)}]
    if rng.random() < 0.25:
        msgs.insert(0, {"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    return render_chat(msgs, True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.monotonic()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    from tokenizers import Tokenizer
    from transformers import LlamaForCausalLM

    out: Path = args.out
    tgt_dir, dft_dir, mtp_dir = out / "demo-target", out / "demo-draft", out / "demo-mtp"
    command = " ".join([Path(sys.argv[0]).as_posix(), *(argv or sys.argv[1:])])
    report: dict[str, Any] = {"seed": args.seed, "command": command, "python": sys.version.split()[0],
                              "torch": torch.__version__, "batch": args.batch, "unroll": args.unroll,
                              "decay": args.decay, "topk": args.topk}
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

    # 2. the target's replies ----------------------------------------------------------------------
    t0 = time.monotonic()
    questions = instruction_prompts(items, rng, n_doc=max(args.replies, 1))
    prompts = encode_many([chat_prompt(q, rng) for _, q in questions[: args.replies]])
    seqs = []
    for i, prompt in enumerate(prompts):
        seqs.append((prompt + target_greedy(target, prompt, args.reply_tokens, ids["eos"]))[-args.max_len :])
        if i % 20 == 0:
            log(f"replies: {i + 1}/{len(prompts)}, {time.monotonic() - t0:.0f}s")
    report["replies"] = {"prompts": len(prompts), "tokens": sum(len(s) for s in seqs),
                         "seconds": round(time.monotonic() - t0, 1)}

    # 3. training ----------------------------------------------------------------------------
    gen = torch.Generator().manual_seed(args.seed + 12)
    starts = torch.randint(0, corpus_stream.numel() - args.corpus_seq, (args.corpus_windows,), generator=gen)
    seqs += [corpus_stream[s : s + args.corpus_seq].tolist() for s in starts.tolist()]
    convs = doc_chat_examples(rng.sample(items, min(args.chat_examples, len(items))), rng)
    convs += module_chat_examples(train_files, rng)
    chats = rng.sample(convs, min(args.chat_examples, len(convs)))
    seqs += [c[: args.max_len] for c in encode_many([render_chat(c, False) for c in chats])]
    t0 = time.monotonic()
    data = precompute(target, seqs, 16, ids["pad"], args.topk, args.bf16_autocast)
    report["features"] = {"sequences": len(data), "replies": len(prompts), "corpus_windows": args.corpus_windows,
                          "chat_examples": len(chats), "tokens": sum(x.ids.numel() for x in data),
                          "seconds": round(time.monotonic() - t0, 1)}
    log(f"target states of {len(data)} sequences ({report['features']['tokens']} tokens) in "
        f"{report['features']['seconds']:.0f}s")
    rope = target_cfg.get("rope_parameters", {}).get("rope_theta", target_cfg.get("rope_theta", 10000.0))
    shape = LayerShape(hidden=target_cfg["hidden_size"], heads=target_cfg["num_attention_heads"],
                       head_dim=target_cfg["head_dim"], intermediate=target_cfg["intermediate_size"],
                       vocab=target_cfg["vocab_size"], rope_theta=rope, eps=target_cfg["rms_norm_eps"],
                       layers=target_cfg["num_hidden_layers"])
    torch.manual_seed(args.seed + 11)
    layer = MtpLayer(shape)
    layer.init_weights(target, torch.Generator().manual_seed(args.seed + 13))
    log(f"mtp layer params {layer.n_params() / 1e6:.2f}M")
    budget = Budget(args.minutes * 60, args.steps)
    stats = train_layer(layer, target.get_input_embeddings(), data, budget, args.batch, args.lr, args.unroll,
                        args.decay, gen, ids["pad"], args.bf16_autocast)
    round_to_bf16_(layer)
    layer.eval()
    stats["params"] = layer.n_params()
    report["layer"] = stats
    save_mtp(layer, target_cfg, tgt_dir.resolve(), mtp_dir)
    log(f"layer done: {stats['steps']} steps in {stats['seconds'] / 60:.1f} min, saved to {mtp_dir}")

    # 4. acceptance check on held-out prompts --------------------------------------------------
    if args.eval_prompts > 0:
        report["acceptance"] = check_acceptance(args, layer, target, dft_dir, heldout_files, held_docs, encode_many,
                                                ids["eos"])
    report["total_minutes"] = round((time.monotonic() - t_start) / 60, 1)
    report["size_bytes"] = (mtp_dir / "mtp.safetensors").stat().st_size
    (out / "mtp_training_report.json").write_text(json.dumps(report, indent=2) + "\n")
    log(f"all done in {report['total_minutes']} min; mtp.safetensors {report['size_bytes']} bytes")
    return 0


def check_acceptance(args: argparse.Namespace, layer: MtpLayer, target: Any, dft_dir: Path, heldout_files: Any,
                     held_docs: list[list[int]], encode_many: Any, eos: int) -> dict[str, Any]:
    """Greedy AL of the layer and of demo-draft at each K on the same held-out chat prompts and corpus excerpts."""
    from transformers import LlamaForCausalLM

    draft = LlamaForCausalLM.from_pretrained(str(dft_dir), dtype=torch.float32).eval()
    sets = heldout_sets(args.seed, args.eval_prompts, heldout_files, held_docs, encode_many)
    return compare_acceptance(sets, target, draft, args.eval_k, args.eval_new_tokens, eos, "mtp",
                              lambda p, c, k: simulate_mtp(layer, target, p, c, k))


if __name__ == "__main__":
    raise SystemExit(main())
