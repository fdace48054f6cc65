"""Train the two small demo models that ship with specmeter (a target and a draft).

The pair exists so that speculative decoding can be measured on a CPU-only machine with no
network: the target (a ~30M-parameter Llama) is heavy enough that its forward pass, not framework
overhead, dominates a decode step, and the draft (a ~2.5M-parameter, 2-layer Llama) costs well
under a tenth of the target per token while agreeing with the target's greedy choices often
enough (greedy acceptance length around 2-3.5 at K=4).

Everything is built from text that every Python installation has offline: the ``.py`` sources of
the Python standard library (``sysconfig.get_paths()["stdlib"]``, test packages excluded), which
carry plenty of English prose in docstrings and comments. A deterministic slice of the files
(chosen by a hash of their relative path) is held out for evaluation.

Pipeline:

1. Collect the corpus and split it into train / held-out files.
2. Train a byte-level BPE tokenizer (``tokenizers``, vocab 8192) with ``<s>``, ``</s>``, ``<pad>``
   and the chat role markers ``<|system|>``, ``<|user|>``, ``<|assistant|>`` as special tokens,
   and a Jinja chat template, saved in Hugging Face format.
3. Train the target (``LlamaForCausalLM``, 8 x 576, bf16 autocast) for a wall-clock budget on the corpus
   plus chat-formatted examples derived from it (docstring -> function source, name -> docstring,
   module -> module docstring), with varied answer openings so replies depend on the prompt.
4. Let the target generate greedy continuations (batched, KV cache, time budget) for corpus
   prompts and for chat-template-formatted instruction prompts; keep its top-k log-probs.
5. Train the draft (``LlamaForCausalLM``, 1 x 128, tied embeddings) mostly on those continuations
   (hard labels + top-k soft labels) plus some corpus text, for a wall-clock budget.
6. Save both in bfloat16 safetensors with the shared tokenizer, evaluate (held-out loss, greedy
   acceptance length at K=4 on held-out prompts) and write ``models/README.md``.

Run from the repository root::

    .venv/bin/python tools/train_demo_models.py --out models

The wall-clock budgets make the number of optimizer steps depend on the machine's speed; for a
bit-for-bit reproducible run on the same machine pass ``--target-steps``, ``--draft-steps`` and
``--gen-prompts`` instead (the budgets then only act as upper bounds).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from demo_models.acceptance import acceptance_for_prompts
from demo_models.common import SEED_DEFAULT, VOCAB_SIZE, Budget, log, render_chat
from demo_models.corpus import collect_corpus, extract_doc_items, stdlib_dir
from demo_models.distill import generate_distill_data
from demo_models.examples import (
    SYSTEM_PROMPTS,
    doc_chat_examples,
    instruction_prompts,
    module_chat_examples,
    vary_prompt,
)
from demo_models.model import make_config, n_params, round_to_bf16_, save_model
from demo_models.readme import write_readme
from demo_models.tokenizer import save_tokenizer, train_tokenizer
from demo_models.train import eval_loss, sample_windows, train_draft, train_target


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("models"),
                   help="output folder (demo-target/, demo-draft/, README.md)")
    p.add_argument("--seed", type=int, default=SEED_DEFAULT)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--heldout-mod", type=int, default=20, help="hold out 1 in N stdlib files")
    p.add_argument("--tokenizer-chars", type=int, default=12_000_000, help="max corpus characters to train the BPE on")
    # target
    p.add_argument("--target-layers", type=int, default=8)
    p.add_argument("--target-hidden", type=int, default=576)
    p.add_argument("--target-heads", type=int, default=9)
    p.add_argument("--target-intermediate", type=int, default=1536)
    p.add_argument("--target-minutes", type=float, default=22.0, help="wall-clock budget for target training")
    p.add_argument("--target-steps", type=int, default=None,
                   help="fixed number of steps (reproducible); budget still caps")
    p.add_argument("--target-batch", type=int, default=4)
    p.add_argument("--target-seq", type=int, default=512)
    p.add_argument("--target-lr", type=float, default=1.5e-3)
    p.add_argument("--target-bf16-autocast", action=argparse.BooleanOptionalAction, default=True,
                   help="mixed precision for the target (bf16 autocast matmuls, fp32 weights/optimizer); "
                        "about 2x faster on CPUs with AMX/AVX512-BF16")
    p.add_argument("--reuse-target", action="store_true",
                   help="keep OUT/demo-target (and its tokenizer) and redo only the distillation and the draft")
    p.add_argument("--continue-target", action="store_true",
                   help="train OUT/demo-target further (new warmup + cosine, AdamW state restarted), then distill")
    p.add_argument("--chat-examples", type=int, default=6000, help="chat-formatted examples mixed into target training")
    # generation
    p.add_argument("--gen-minutes", type=float, default=5.0, help="wall-clock budget for the target's continuations")
    p.add_argument("--gen-prompts", type=int, default=None, help="fixed number of prompt batches (reproducible)")
    p.add_argument("--gen-batch", type=int, default=32)
    p.add_argument("--gen-chat-tokens", type=int, default=160, help="max new tokens for chat prompts")
    p.add_argument("--gen-corpus-tokens", type=int, default=96, help="max new tokens for corpus prompts")
    p.add_argument("--gen-chat-frac", type=float, default=0.0,
                   help="fraction of chat prompts (the target's chat replies are so regular that a draft "
                        "distilled on them accepts too much: AL > 3.5 at K=4)")
    p.add_argument("--gen-template-frac", type=float, default=0.4,
                   help="fraction of chat prompts from the hand-written templates (rest: docstring-based)")
    p.add_argument("--topk", type=int, default=8, help="target log-probs kept per generated token")
    # draft
    p.add_argument("--draft-layers", type=int, default=1)  # 1 layer: the per-token cost stays under 1/10 of the target
    p.add_argument("--draft-hidden", type=int, default=128)
    p.add_argument("--draft-heads", type=int, default=2)
    p.add_argument("--draft-intermediate", type=int, default=384)
    p.add_argument("--draft-minutes", type=float, default=9.0)
    p.add_argument("--draft-steps", type=int, default=None)
    p.add_argument("--draft-batch", type=int, default=16)
    p.add_argument("--draft-lr", type=float, default=3e-3)
    p.add_argument("--draft-soft-weight", type=float, default=0.5)
    p.add_argument("--draft-corpus-every", type=int, default=4,
                   help="every N-th draft step is a corpus batch (0: never)")
    # evaluation
    p.add_argument("--eval-prompts", type=int, default=24, help="held-out prompts for the acceptance check (0: skip)")
    p.add_argument("--eval-new-tokens", type=int, default=96)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.monotonic()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    rng = random.Random(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    from transformers import AutoTokenizer, LlamaForCausalLM

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    tgt_dir, dft_dir = out / "demo-target", out / "demo-draft"
    command = " ".join([Path(sys.argv[0]).as_posix(), *(argv or sys.argv[1:])])
    report: dict[str, Any] = {"seed": args.seed, "command": command,
                              "python": sys.version.split()[0], "torch": torch.__version__}

    # 1. corpus ------------------------------------------------------------------------------
    train_files, heldout_files = collect_corpus(args.heldout_mod)
    n_chars = sum(len(f.text) for f in train_files)
    log(f"corpus: {len(train_files)} train files ({n_chars / 1e6:.1f}M chars), {len(heldout_files)} held-out files "
        f"from {stdlib_dir()}")
    report["corpus"] = {"stdlib": str(stdlib_dir()), "train_files": len(train_files),
                        "heldout_files": len(heldout_files),
                        "train_chars": n_chars, "heldout_chars": sum(len(f.text) for f in heldout_files)}
    items = extract_doc_items(train_files)
    heldout_items = extract_doc_items(heldout_files)
    log(f"documented items: {len(items)} train, {len(heldout_items)} held-out")

    # 2. tokenizer ---------------------------------------------------------------------------
    tok_texts, budget_chars = [], args.tokenizer_chars
    for f in train_files:
        if budget_chars <= 0:
            break
        tok_texts.append(f.text)
        budget_chars -= len(f.text)
    tok_texts += [q for _, q in instruction_prompts([], random.Random(0), 0)]
    t0 = time.monotonic()
    tok_dir = out / ".tokenizer"
    previous: dict[str, Any] = {}
    if args.reuse_target or args.continue_target:
        from tokenizers import Tokenizer

        raw_tok = Tokenizer.from_file(str(tgt_dir / "tokenizer.json"))
        tok_dir.mkdir(parents=True, exist_ok=True)
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            shutil.copyfile(tgt_dir / name, tok_dir / name)
        previous = json.loads((out / "training_report.json").read_text())
    else:
        raw_tok = train_tokenizer(tok_texts, VOCAB_SIZE)
        save_tokenizer(raw_tok, tok_dir, max_len=2048)
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    ids = {"bos": tokenizer.bos_token_id, "eos": tokenizer.eos_token_id, "pad": tokenizer.pad_token_id}
    assert raw_tok.get_vocab_size() == VOCAB_SIZE, raw_tok.get_vocab_size()
    probe = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi there"},
             {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Again"}]
    rendered = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
    assert rendered == render_chat(probe, True), (rendered, render_chat(probe, True))
    log(f"tokenizer trained in {time.monotonic() - t0:.0f}s, ids {ids}; chat template check ok")

    def encode_many(texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in raw_tok.encode_batch(list(texts), add_special_tokens=False)]

    # token streams: documents as <s> text </s>, chat examples as rendered conversations
    t0 = time.monotonic()
    docs = [[ids["bos"], *e, ids["eos"]] for e in encode_many([f.text for f in train_files])]
    convs = doc_chat_examples(rng.sample(items, min(args.chat_examples, len(items))), rng)
    convs += module_chat_examples(train_files, rng)
    chat_docs = encode_many([render_chat(c, False) for c in convs])
    corpus_stream = torch.tensor([t for d in docs for t in d], dtype=torch.long)
    mixed = docs + chat_docs
    rng.shuffle(mixed)
    target_stream = torch.tensor([t for d in mixed for t in d], dtype=torch.long)
    held_docs = [[ids["bos"], *e, ids["eos"]] for e in encode_many([f.text for f in heldout_files])]
    held_stream = torch.tensor([t for d in held_docs for t in d], dtype=torch.long)
    eval_windows = sample_windows(held_stream, 32, args.target_seq, torch.Generator().manual_seed(args.seed + 1))
    n_chat_tok = sum(len(c) for c in chat_docs)
    log(f"encoded in {time.monotonic() - t0:.0f}s: corpus {corpus_stream.numel()} tokens "
        f"({n_chars / corpus_stream.numel():.2f} chars/token), chat examples {len(chat_docs)} ({n_chat_tok} tokens), "
        f"held-out {held_stream.numel()} tokens")
    report["tokenizer"] = {"vocab_size": VOCAB_SIZE, "train_tokens": int(corpus_stream.numel()),
                           "chars_per_token": round(n_chars / corpus_stream.numel(), 3),
                           "chat_examples": len(chat_docs), "chat_example_tokens": n_chat_tok,
                           "heldout_tokens": int(held_stream.numel())}

    # 3. target ------------------------------------------------------------------------------
    if args.reuse_target:
        target = LlamaForCausalLM.from_pretrained(str(tgt_dir), dtype=torch.float32).eval()
        report["target"] = previous["target"]
        report["command_target"] = previous.get("command_target", previous["command"])
        log(f"reusing the target in {tgt_dir} ({n_params(target) / 1e6:.2f}M params)")
    else:
        init = LlamaForCausalLM.from_pretrained(str(tgt_dir), dtype=torch.float32) if args.continue_target else None
        target = train_target(args, ids, target_stream, eval_windows, gen, tok_dir, tgt_dir, init)
        report["target"] = target.stats  # type: ignore[attr-defined]
        report["command_target"] = report["command"]
        if args.continue_target:
            prev_t = previous["target"]
            report["target"]["previous_phases"] = [*prev_t.get("previous_phases", []), {
                k: prev_t[k] for k in ("steps", "tokens", "seconds", "peak_lr", "final_train_loss_ema", "heldout_loss")
                if k in prev_t}]
            report["command_target"] = f"{previous.get('command_target', previous['command'])}\n{report['command']}"
        (out / "training_report.json").write_text(json.dumps({**report, "partial": True}, indent=2) + "\n")

    # 4. distillation data -------------------------------------------------------------------
    # 4. distillation data -------------------------------------------------------------------
    gen = torch.Generator().manual_seed(args.seed + 5)  # same draft phase whether or not the target was reused
    all_chat = instruction_prompts(items, rng, n_doc=4000)
    n_tmpl = len(instruction_prompts([], random.Random(0), 0))
    templated, doc_based = all_chat[:n_tmpl], all_chat[n_tmpl:]
    prompts: list[tuple[list[int], int, bool]] = []
    corpus_docs_for_prompts = [d for d in docs if len(d) > 80]
    n_total = 6000
    n_chat = int(n_total * args.gen_chat_frac)
    chat_texts = []
    for i in range(n_chat):
        if rng.random() < args.gen_template_frac:
            q = vary_prompt(rng.choice(templated)[1], rng)
        else:
            q = doc_based[i % len(doc_based)][1]
        msgs = [{"role": "user", "content": q}]
        if rng.random() < 0.25:
            msgs.insert(0, {"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
        chat_texts.append(render_chat(msgs, True))
    chat_ids = encode_many(chat_texts)
    for p in chat_ids:
        prompts.append((p[-384:], args.gen_chat_tokens, True))
    for _ in range(n_total - n_chat):
        d = rng.choice(corpus_docs_for_prompts)
        n = rng.randint(16, 128)
        s = rng.randint(0, max(0, len(d) - n - 1))
        prompts.append(([ids["bos"], *d[s + 1 : s + n]] if s > 0 else d[:n], args.gen_corpus_tokens, False))
    rng.shuffle(prompts)
    gbudget = Budget(args.gen_minutes * 60, args.gen_prompts)
    samples = generate_distill_data(target, prompts, ids["pad"], ids["eos"], args.gen_batch, args.topk, gbudget)
    n_cont = sum(len(s.cont) for s in samples)
    log(f"distillation data: {len(samples)} samples ({sum(s.chat for s in samples)} chat), "
        f"{n_cont} continuation tokens")
    report["distill"] = {"samples": len(samples), "chat_samples": sum(s.chat for s in samples),
                         "continuation_tokens": n_cont, "seconds": round(time.monotonic() - gbudget.start, 1),
                         "topk": args.topk}

    # 5. draft -------------------------------------------------------------------------------
    torch.manual_seed(args.seed + 2)
    dcfg = make_config(args.draft_layers, args.draft_hidden, args.draft_heads, args.draft_intermediate, ids, 2048)
    draft = LlamaForCausalLM(dcfg).float()
    log(f"draft params {n_params(draft) / 1e6:.2f}M")
    dbudget = Budget(args.draft_minutes * 60, args.draft_steps)
    dstats = train_draft(draft, samples, corpus_stream, dbudget, args.draft_batch, 8, 256, args.draft_corpus_every,
                         512, args.draft_lr, args.draft_soft_weight, gen, ids["pad"])
    round_to_bf16_(draft)
    draft.eval()
    dstats["heldout_loss"] = round(eval_loss(draft, eval_windows), 4)
    dstats["params"] = n_params(draft)
    log(f"draft done: {dstats['steps']} steps, held-out corpus loss {dstats['heldout_loss']}")
    report["draft"] = dstats
    save_model(draft, tok_dir, dft_dir, ids)
    shutil.rmtree(tok_dir, ignore_errors=True)

    # 6. quick acceptance check on held-out prompts --------------------------------------------
    if args.eval_prompts > 0:
        erng = random.Random(args.seed + 3)
        held_prompts = instruction_prompts(heldout_items, erng, n_doc=args.eval_prompts)
        held_chat = [q for _, q in held_prompts][-args.eval_prompts // 2 :]
        eval_sets: dict[str, list[list[int]]] = {
            "heldout-chat": encode_many([render_chat([{"role": "user", "content": q}], True) for q in held_chat]),
            "heldout-corpus": [],
        }
        for d in erng.sample([d for d in held_docs if len(d) > 100], min(args.eval_prompts // 2, len(held_docs))):
            s = erng.randint(0, len(d) - 65)
            eval_sets["heldout-corpus"].append([ids["bos"], *d[s + 1 : s + 64]])
        report["acceptance_k4"] = {}
        for name, plist in eval_sets.items():
            res = acceptance_for_prompts(target, draft, plist, k=4, max_new_tokens=args.eval_new_tokens,
                                         eos_id=ids["eos"])
            report["acceptance_k4"][name] = {"prompts": len(plist), "mean_acceptance_length": round(res.al, 3),
                                             "steps": res.steps}
            log(f"AL@K=4 {name}: {res.al:.3f} over {len(plist)} prompts")

    report["total_minutes"] = round((time.monotonic() - t_start) / 60, 1)
    report["sizes_bytes"] = {d.name: sum(f.stat().st_size for f in d.iterdir()) for d in (tgt_dir, dft_dir)}
    (out / "training_report.json").write_text(json.dumps(report, indent=2) + "\n")
    write_readme(out, report, args)
    log(f"all done in {report['total_minutes']} min; sizes {report['sizes_bytes']}")
    return 0
