#!/usr/bin/env python3
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
import ast
import hashlib
import json
import math
import os
import random
import shutil
import sys
import sysconfig
import textwrap
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

SEED_DEFAULT = 1234
VOCAB_SIZE = 8192
BOS, EOS, PAD = "<s>", "</s>", "<pad>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = [BOS, EOS, PAD, *ROLE_TOKENS]

#: Jinja chat template. Every message is ``<|role|>{content}</s>``; the conversation starts with
#: ``<s>`` and a generation prompt is ``<|assistant|>``. The model ends its reply with ``</s>``
#: (the eos token), so servers stop on eos without extra stop tokens. There is deliberately no
#: newline after the markers: with ``<|assistant|>\n`` a weak model confuses the newline after a
#: role marker with the one after ``</s>`` and answers with more role markers.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ '<|system|>' + message['content'] + eos_token }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>' + message['content'] + eos_token }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>' + message['content'] + eos_token }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)

EXCLUDED_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


def log(msg: str) -> None:
    """Print a timestamped progress line and flush (the script is usually run under nohup)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def render_chat(messages: Sequence[dict[str, str]], add_generation_prompt: bool) -> str:
    """Render ``messages`` exactly like :data:`CHAT_TEMPLATE` does (checked in ``main``)."""
    parts = [BOS]
    for m in messages:
        parts.append(f"<|{m['role']}|>{m['content']}{EOS}")
    if add_generation_prompt:
        parts.append("<|assistant|>")
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceFile:
    """One standard-library source file."""

    relpath: str
    text: str


def stdlib_dir() -> Path:
    """Directory of the running interpreter's standard library sources."""
    return Path(sysconfig.get_paths()["stdlib"])


def is_heldout(relpath: str, heldout_mod: int) -> bool:
    """Deterministic held-out split: 1 in ``heldout_mod`` files by hash of the relative path."""
    digest = hashlib.sha256(relpath.encode()).digest()
    return int.from_bytes(digest[:4], "big") % heldout_mod == 0


def collect_corpus(heldout_mod: int = 20, max_file_bytes: int = 400_000) -> tuple[list[SourceFile], list[SourceFile]]:
    """Read the stdlib ``.py`` files (sorted, tests excluded) and split them into (train, held-out)."""
    root = stdlib_dir()
    train: list[SourceFile] = []
    heldout: list[SourceFile] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(part in EXCLUDED_DIRS for part in Path(rel).parts[:-1]):
            continue
        try:
            raw = path.read_bytes()
        except OSError:
            continue
        if not raw.strip() or len(raw) > max_file_bytes:
            continue
        text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n")
        (heldout if is_heldout(rel, heldout_mod) else train).append(SourceFile(rel, text))
    return train, heldout


@dataclass(frozen=True)
class DocItem:
    """A documented function or class found in a source file."""

    module: str
    name: str
    signature: str
    summary: str
    docstring: str
    source: str
    kind: str


def _module_name(relpath: str) -> str:
    name = relpath[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def extract_doc_items(files: Sequence[SourceFile], max_source_chars: int = 1500) -> list[DocItem]:
    """Documented top-level functions/classes and methods, with their source and docstring."""
    items: list[DocItem] = []
    for f in files:
        try:
            tree = ast.parse(f.text)
        except (SyntaxError, ValueError):
            continue
        module = _module_name(f.relpath)
        lines = f.text.split("\n")
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            if not doc or len(doc) < 40:
                continue
            src = _source_segment(lines, node)
            if not src or len(src) > max_source_chars:
                continue
            summary = " ".join(doc.strip().split("\n\n")[0].split())
            if not 20 <= len(summary) <= 300:
                continue
            if isinstance(node, ast.ClassDef):
                sig, kind = node.name, "class"
            else:
                try:
                    sig = f"{node.name}({ast.unparse(node.args)})"
                except Exception:  # noqa: BLE001 - unparse of exotic defaults
                    sig = f"{node.name}(...)"
                kind = "function"
            items.append(DocItem(module, node.name, sig, summary, doc.strip(), src, kind))
    return items


def _source_segment(lines: Sequence[str], node: ast.stmt) -> str | None:
    """Source text of ``node`` (dedented); a fast ``ast.get_source_segment`` for many nodes."""
    end, end_col = node.end_lineno, node.end_col_offset
    if end is None or end_col is None:
        return None
    first_b = lines[node.lineno - 1].encode()
    if end == node.lineno:
        seg = first_b[node.col_offset : end_col].decode(errors="replace")
    else:
        first = first_b[node.col_offset :].decode(errors="replace")
        last = lines[end - 1].encode()[:end_col].decode(errors="replace")
        seg = "\n".join([first, *lines[node.lineno : end - 1], last])
    return textwrap.dedent(" " * node.col_offset + seg)


def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:] if s[:1].isupper() and s[1:2].islower() else s


# Openings for the assistant's answers: one fixed opening taught a small target to answer every
# prompt the same way ("Here is an implementation:"), which made its output trivially predictable.
_CODE_LEADS = [
    "Here is an implementation:", "Sure. Here is one way to write it:", "You can do it like this:",
    "Certainly! This is how `{name}` can be written:", "The {kind} below does this: {summary_l}",
    "One possible version, from the `{module}` module:", "",
]
_CODE_TAILS = ["", "", "", "\n\nThe {kind} {summary_l}", "\n\nIn short: {summary_l}"]
_EXPLAIN_LEADS = [
    "", "", "`{name}` {summary_l}\n\n", "In the `{module}` module, `{name}` is a {kind}. ",
    "Good question. ", "Briefly: ",
]


def _fill(template: str, it: DocItem) -> str:
    return template.format(name=it.name, kind=it.kind, module=it.module, summary_l=_lower_first(it.summary))


def _doc_chat(it: DocItem, rng: random.Random, want_code: bool) -> list[dict[str, str]]:
    if it.kind == "function" and want_code:
        user = rng.choice(
            [
                f"Write a Python function `{it.signature}` that does the following: {it.summary}",
                f"Implement `{it.name}` for the `{it.module}` module. {it.summary}",
                f"Can you write a function called {it.name}? {it.summary}",
                f"Please show me Python code for this: {_lower_first(it.summary)}",
            ]
        )
        lead = _fill(rng.choice(_CODE_LEADS), it)
        body = f"```python\n{it.source}\n```"
        assistant = (f"{lead}\n\n{body}" if lead else body) + _fill(rng.choice(_CODE_TAILS), it)
    elif rng.random() < 0.75:
        user = rng.choice(
            [
                f"Explain what `{it.module}.{it.name}` does.",
                f"What is {it.name} in the {it.module} module?",
                f"Describe the {it.kind} `{it.name}`.",
                f"How do I use {it.name} from {it.module}?",
            ]
        )
        assistant = _fill(rng.choice(_EXPLAIN_LEADS), it) + it.docstring
    else:
        user = f"Summarize the following text in one sentence:\n\n{it.docstring}"
        assistant = it.summary
    return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


def doc_chat_examples(items: Sequence[DocItem], rng: random.Random) -> list[list[dict[str, str]]]:
    """Chat conversations (user + assistant) built from documented code, for the target.

    Code answers are a minority and every answer type has several openings, so the target's reply
    depends on the prompt (as a real chat model's does) rather than collapsing to one mode."""
    convs: list[list[dict[str, str]]] = []
    for it in items:
        variants = [rng.random() < 0.4]
        if rng.random() < 0.5:  # a second, different view of the same item
            variants.append(not variants[0])
        for want_code in variants:
            messages = _doc_chat(it, rng, want_code)
            if rng.random() < 0.2:
                messages.insert(0, {"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
            convs.append(messages)
    return convs


def module_chat_examples(files: Sequence[SourceFile], rng: random.Random) -> list[list[dict[str, str]]]:
    """Prose answers: questions about a module answered with its docstring (English paragraphs)."""
    convs: list[list[dict[str, str]]] = []
    for f in files:
        try:
            doc = ast.get_docstring(ast.parse(f.text))
        except (SyntaxError, ValueError):
            continue
        if not doc or len(doc) < 200:
            continue
        module = _module_name(f.relpath)
        user = rng.choice([f"What is the `{module}` module for?", f"Tell me about {module}.",
                           f"Give me an overview of the {module} module.", f"What does {module} provide?"])
        convs.append([{"role": "user", "content": user}, {"role": "assistant", "content": doc[:2500]}])
    return convs


# --------------------------------------------------------------------------------------------
# Instruction-style prompts (for the target's greedy continuations that the draft learns from).
# Written for this script; deliberately not taken from any benchmark workload.
# --------------------------------------------------------------------------------------------

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a concise assistant. Answer briefly.",
    "You are an expert Python programmer.",
    "You are a friendly tutor who explains things step by step.",
]

_TOPICS = [
    "recursion", "hash tables", "the French Revolution", "photosynthesis", "binary search",
    "climate change", "the Roman Empire", "prime numbers", "machine learning", "black holes",
    "the water cycle", "supply and demand", "sorting algorithms", "the printing press",
    "linked lists", "vaccines", "plate tectonics", "regular expressions", "the Renaissance",
    "compound interest", "unit testing", "the immune system", "quantum computing",
    "renewable energy", "democracy", "the theory of evolution", "databases", "inflation",
    "the human brain", "version control", "the Industrial Revolution", "encryption",
]
_CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "merges two sorted lists",
    "counts the words in a text file", "computes the Fibonacci sequence",
    "removes duplicates from a list while keeping order", "parses a CSV file into dictionaries",
    "finds the longest common prefix of a list of strings", "flattens a nested list",
    "validates an email address", "computes the factorial of a number",
    "reads a JSON file and prints its keys", "implements a stack class",
    "converts Celsius to Fahrenheit", "checks whether a string is a palindrome",
    "finds the maximum element in a list", "sorts a dictionary by value",
    "downloads nothing but simulates a retry loop with exponential backoff",
    "computes the greatest common divisor of two numbers", "implements binary search",
    "counts the frequency of each character in a string", "transposes a matrix",
]
_MATH = [
    "What is 17 times 23?", "Solve for x: 3x + 7 = 22.", "What is the derivative of x^3 + 2x?",
    "Compute the sum of the integers from 1 to 100.", "What is 15% of 240?",
    "If a train travels 120 km in 1.5 hours, what is its average speed?",
    "Simplify the fraction 84/126.", "What is the square root of 144 plus the cube of 3?",
    "A rectangle has a perimeter of 30 and a width of 5. What is its area?",
    "How many ways can 4 books be arranged on a shelf?", "Convert 0.375 to a fraction.",
    "What is the probability of rolling two sixes with two dice?",
]
_QA = [
    "What is the capital of Australia?", "Who wrote Pride and Prejudice?",
    "How many planets are in the solar system?", "What is the boiling point of water in Fahrenheit?",
    "What does HTTP stand for?", "Why is the sky blue?", "What is the largest ocean on Earth?",
    "When did the first person walk on the Moon?", "What is the chemical symbol for gold?",
    "What language is spoken in Brazil?", "How does a refrigerator work?",
    "What is the difference between a virus and a bacterium?",
]
_MULTI = [
    "Écris une fonction Python qui inverse une liste.", "Explique-moi ce qu'est la photosynthèse.",
    "¿Cuál es la diferencia entre una lista y una tupla en Python?",
    "Escribe un poema corto sobre el mar.", "Erkläre mir, wie ein Computer funktioniert.",
    "Was ist der Unterschied zwischen Wetter und Klima?", "Spiega cos'è la ricorsione in informatica.",
    "Qual é a capital do Canadá?", "请用简单的话解释什么是机器学习。", "写一个计算阶乘的Python函数。",
    "日本の首都はどこですか？", "Переведи на английский: я люблю программировать.",
    "Translate into French: the weather is nice today.", "Translate into Spanish: where is the library?",
    "Translate into German: I would like a cup of coffee.",
]
_REASONING = [
    "If all bloops are razzies and all razzies are lazzies, are all bloops lazzies? Explain.",
    "Alice is taller than Bob, and Bob is taller than Carol. Who is the shortest?",
    "I have 3 apples, eat one, and buy 5 more. How many apples do I have?",
    "A bat and a ball cost $1.10 in total. The bat costs $1 more than the ball. How much is the ball?",
    "Which is heavier, a kilogram of feathers or a kilogram of iron?",
    "If it takes 5 machines 5 minutes to make 5 widgets, how long do 100 machines take for 100 widgets?",
    "What comes next in the sequence 2, 4, 8, 16, ...?",
    "Tom is older than Jane but younger than Sam. Who is the oldest?",
]
_ROLES = [
    "a pirate captain", "a medieval knight", "a detective in 1920s London", "a friendly robot",
    "a wise old wizard", "a travel guide in Rome", "a grumpy chef", "a starship engineer",
]
_WRITING_KINDS = ["a short poem", "a haiku", "a short story", "a persuasive paragraph", "a blog post intro", "a limerick"]
_WRITING_SUBJ = ["autumn", "a lost cat", "the ocean", "a rainy city", "friendship", "a robot learning to paint", "the first day of school", "coffee"]


def instruction_prompts(items: Sequence[DocItem], rng: random.Random, n_doc: int) -> list[tuple[str, str]]:
    """(category, prompt) pairs: template-generated instructions plus docstring-based ones."""
    out: list[tuple[str, str]] = []
    for task in _CODE_TASKS:
        out.append(("coding", f"Write a Python function that {task}."))
        out.append(("coding", f"How would I write code that {task}? Please include an example."))
    for t in _TOPICS:
        out.append(("humanities" if t[0].isupper() or "the " in t else "stem", f"Explain {t} in simple terms."))
        out.append(("qa", f"What are the main ideas behind {t}?"))
        out.append(("writing", f"Write a short essay about {t}."))
        out.append(("stem", f"Give me three facts about {t}."))
    out += [("math", q) for q in _MATH]
    out += [("math", f"Calculate {a} + {b} * {c}.") for a, b, c in [(3, 4, 5), (12, 7, 2), (9, 9, 9), (100, 25, 4)]]
    out += [("qa", q) for q in _QA]
    out += [("multilingual", q) for q in _MULTI]
    out += [("reasoning", q) for q in _REASONING]
    for role in _ROLES:
        out.append(("roleplay", f"Pretend you are {role}. Introduce yourself."))
        out.append(("roleplay", f"You are {role}. Tell me about your day."))
    for kind in _WRITING_KINDS:
        for subj in _WRITING_SUBJ:
            out.append(("writing", f"Write {kind} about {subj}."))
    for it in rng.sample(list(items), min(n_doc, len(items))):
        r = rng.random()
        if r < 0.3:
            out.append(("coding", f"Write a Python function `{it.signature}`: {it.summary}"))
        elif r < 0.5:
            out.append(("summarization", f"Summarize the following text:\n\n{it.docstring[:1200]}"))
        elif r < 0.7:
            out.append(("rag", f"Use the context to answer the question.\n\nContext:\n{it.docstring[:1200]}\n\nQuestion: What does {it.name} do?"))
        elif r < 0.85:
            out.append(("qa", f"What does `{it.module}.{it.name}` do in Python?"))
        else:
            out.append(("coding", f"Explain this code:\n\n```python\n{it.source[:1000]}\n```"))
    return out


_PREFIXES = ["", "", "", "Please help me. ", "Quick question: ", "Hi! ", "I need some help. ", "Hello, "]
_SUFFIXES = ["", "", "", " Be concise.", " Explain your answer.", " Please answer in detail.",
             " Use simple words.", " Give an example.", " Keep it short.", " Think step by step."]


def vary_prompt(prompt: str, rng: random.Random) -> str:
    """Add a random polite prefix and/or instruction suffix, so repeated templates still differ."""
    return f"{rng.choice(_PREFIXES)}{prompt}{rng.choice(_SUFFIXES)}"


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> Any:
    """Train a byte-level BPE ``tokenizers.Tokenizer`` whose encoding adds ``<s>`` in front."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    return tok


def save_tokenizer(tok: Any, out_dir: Path, max_len: int) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json (HF format)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    added = {
        str(tok.token_to_id(t)): {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True,
        }
        for t in SPECIAL_TOKENS
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": None,
        "additional_special_tokens": list(ROLE_TOKENS),
        "add_bos_token": True,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_len,
        "padding_side": "left",
        "added_tokens_decoder": added,
        "chat_template": CHAT_TEMPLATE,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    special = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "additional_special_tokens": list(ROLE_TOKENS)}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


def make_config(layers: int, hidden: int, heads: int, intermediate: int, ids: dict[str, int], max_pos: int) -> Any:
    """A ``LlamaConfig`` for the shared vocabulary (head_dim 64, RoPE, SiLU MLP, tied embeddings)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_pos,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        hidden_act="silu",
        initializer_range=0.02,
        tie_word_embeddings=True,
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=ids["bos"],
        eos_token_id=ids["eos"],
        pad_token_id=ids["pad"],
        use_cache=True,
    )


def n_params(model: torch.nn.Module) -> int:
    """Number of distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())


def round_to_bf16_(model: torch.nn.Module) -> None:
    """Round the fp32 weights to bfloat16 precision in place, so that generation and evaluation
    see exactly the weights that are shipped (bf16 on disk, upcast to fp32 when served)."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(p.dtype))


def save_model(model: Any, tok_dir: Path, out_dir: Path, ids: dict[str, int]) -> None:
    """Save ``model`` as bfloat16 safetensors plus generation config and the shared tokenizer."""
    from transformers import GenerationConfig

    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.safetensors"):
        stale.unlink()
    model_bf16 = model.to(torch.bfloat16)
    model_bf16.generation_config = GenerationConfig(
        bos_token_id=ids["bos"], eos_token_id=ids["eos"], pad_token_id=ids["pad"]
    )
    model_bf16.save_pretrained(str(out_dir), safe_serialization=True)
    model.to(torch.float32)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(tok_dir / name, out_dir / name)
    cfg_path = out_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["torch_dtype"] = "bfloat16"  # older readers (and vLLM's config parsing) look for this key
    cfg["dtype"] = "bfloat16"
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


# --------------------------------------------------------------------------------------------
# Training helpers
# --------------------------------------------------------------------------------------------


def lr_at(progress: float, step: int, warmup: int, peak: float, floor_frac: float = 0.1) -> float:
    """Linear warmup over ``warmup`` steps, then cosine from ``peak`` to ``floor_frac*peak``
    as ``progress`` (fraction of the step or time budget used) goes from 0 to 1."""
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(max(progress, 0.0), 1.0)
    return peak * (floor_frac + (1 - floor_frac) * 0.5 * (1 + math.cos(math.pi * p)))


@dataclass
class Budget:
    """Stop after ``steps`` optimizer steps if given, else after ``seconds`` of wall time."""

    seconds: float
    steps: int | None
    start: float = field(default_factory=time.monotonic)

    def progress(self, step: int) -> float:
        if self.steps:
            return step / self.steps
        return (time.monotonic() - self.start) / self.seconds

    def done(self, step: int) -> bool:
        if self.steps is not None and step >= self.steps:
            return True
        return time.monotonic() - self.start >= self.seconds


def sample_windows(stream: torch.Tensor, batch: int, seq_len: int, gen: torch.Generator) -> torch.Tensor:
    """``batch`` random windows of ``seq_len + 1`` tokens from a flat token stream."""
    starts = torch.randint(0, stream.numel() - seq_len - 1, (batch,), generator=gen)
    return torch.stack([stream[s : s + seq_len + 1] for s in starts.tolist()])


@torch.no_grad()
def eval_loss(model: Any, windows: torch.Tensor, batch: int = 8) -> float:
    """Mean next-token cross-entropy (nats) over fixed evaluation windows."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, windows.size(0), batch):
        w = windows[i : i + batch]
        logits = model(input_ids=w[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), w[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        count += w[:, 1:].numel()
    model.train()
    return total / max(count, 1)


def train_lm(
    model: Any,
    stream: torch.Tensor,
    budget: Budget,
    batch: int,
    seq_len: int,
    peak_lr: float,
    warmup: int,
    gen: torch.Generator,
    tag: str,
    log_every: int = 10,
    bf16_autocast: bool = False,
) -> dict[str, Any]:
    """Plain causal-LM training on random windows of ``stream`` with AdamW + cosine LR.

    With ``bf16_autocast`` the forward/backward matmuls run in bfloat16 (CPU autocast, fast with
    AMX) while weights, gradients and optimizer state stay fp32 (mixed precision)."""
    opt = torch.optim.AdamW(model.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.1, eps=1e-8)
    model.train()
    step, ema = 0, None
    history: list[tuple[int, float]] = []
    while not budget.done(step):
        lr = lr_at(budget.progress(step), step, warmup, peak_lr)
        for g in opt.param_groups:
            g["lr"] = lr
        w = sample_windows(stream, batch, seq_len, gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16_autocast):
            logits = model(input_ids=w[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % log_every == 0 or step == 1:
            history.append((step, round(ema, 4)))
            el = time.monotonic() - budget.start
            log(f"{tag} step {step} loss {loss.item():.4f} ema {ema:.4f} lr {lr:.2e} "
                f"elapsed {el:.0f}s tok/s {step * batch * seq_len / max(el, 1e-9):.0f}")
    return {"steps": step, "final_train_loss_ema": round(ema or float("nan"), 4),
            "seconds": round(time.monotonic() - budget.start, 1), "tokens": step * batch * seq_len,
            "history": history}


# --------------------------------------------------------------------------------------------
# Distillation data
# --------------------------------------------------------------------------------------------


@dataclass
class DistillSample:
    """A prompt and the target's greedy continuation with its top-k log-probs."""

    prompt: list[int]
    cont: list[int]
    topk_ids: torch.Tensor  # (len(cont), k) int32
    topk_logp: torch.Tensor  # (len(cont), k) float16
    chat: bool


@torch.no_grad()
def generate_distill_data(
    target: Any,
    prompts: Sequence[tuple[list[int], int, bool]],
    pad_id: int,
    eos_id: int,
    batch: int,
    topk: int,
    budget: Budget,
) -> list[DistillSample]:
    """Greedy, batched (left-padded, KV cache) continuations of ``prompts`` by the target.

    ``prompts`` holds (prompt ids, max new tokens, is_chat). Batches are formed from prompts of
    similar length; generation stops when the budget is used up.
    """
    from transformers import GenerationConfig

    target.eval()
    gcfg_args = dict(do_sample=False, pad_token_id=pad_id, eos_token_id=eos_id, output_logits=True,
                     return_dict_in_generate=True)
    out: list[DistillSample] = []
    n_tokens = 0
    # group: chunks of `batch * 8` prompts in given (shuffled) order, sorted by length inside
    chunk = batch * 8
    order: list[list[int]] = []
    for c in range(0, len(prompts), chunk):
        idx = sorted(range(c, min(c + chunk, len(prompts))), key=lambda i: len(prompts[i][0]))
        order += [idx[j : j + batch] for j in range(0, len(idx), batch)]
    for bi, group in enumerate(order):
        if budget.done(bi):
            break
        plens = [len(prompts[i][0]) for i in group]
        L = max(plens)
        max_new = max(prompts[i][1] for i in group)
        ids = torch.full((len(group), L), pad_id, dtype=torch.long)
        mask = torch.zeros((len(group), L), dtype=torch.long)
        for r, i in enumerate(group):
            p = prompts[i][0]
            ids[r, L - len(p) :] = torch.tensor(p)
            mask[r, L - len(p) :] = 1
        gcfg = GenerationConfig(max_new_tokens=max_new, **gcfg_args)
        res = target.generate(input_ids=ids, attention_mask=mask, generation_config=gcfg)
        seqs = res.sequences[:, L:]
        logits = torch.stack(res.logits, dim=1).float()  # (B, T, V)
        logp = torch.log_softmax(logits, dim=-1)
        tl, ti = logp.topk(topk, dim=-1)
        for r, i in enumerate(group):
            toks = seqs[r].tolist()
            n = len(toks)
            if eos_id in toks:
                n = toks.index(eos_id) + 1
            n = min(n, prompts[i][1])
            if n == 0:
                continue
            out.append(DistillSample(prompts[i][0], toks[:n], ti[r, :n].to(torch.int32).clone(),
                                     tl[r, :n].to(torch.float16).clone(), prompts[i][2]))
            n_tokens += n
        if bi % 5 == 0:
            el = time.monotonic() - budget.start
            log(f"gen batch {bi + 1}/{len(order)} samples {len(out)} tokens {n_tokens} "
                f"elapsed {el:.0f}s tok/s {n_tokens / max(el, 1e-9):.0f}")
    return out


def distill_batches(
    samples: Sequence[DistillSample], batch: int, max_len: int, gen: torch.Generator, pad_id: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Endless shuffled batches: (input ids, attention mask, hard labels, top-k ids, top-k logp).

    Labels are only set on continuation positions (the target's own tokens); the prompt is
    context. Sequences are right-padded and truncated from the left to ``max_len``.
    """
    if not samples:
        raise ValueError("no distillation samples")
    batch = min(batch, len(samples))
    k = samples[0].topk_ids.size(1)
    while True:
        perm = torch.randperm(len(samples), generator=gen).tolist()
        for s in range(0, len(perm) - batch + 1, batch):
            group = [samples[i] for i in perm[s : s + batch]]
            seqs = []
            for smp in group:
                full = smp.prompt + smp.cont
                cut = max(0, len(full) - max_len)
                seqs.append((full[cut:], len(smp.prompt) - cut, smp))
            T = max(len(f) for f, _, _ in seqs)
            ids = torch.full((batch, T), pad_id, dtype=torch.long)
            mask = torch.zeros((batch, T), dtype=torch.long)
            labels = torch.full((batch, T), -100, dtype=torch.long)
            tk_ids = torch.zeros((batch, T, k), dtype=torch.long)
            tk_lp = torch.full((batch, T, k), -1e4, dtype=torch.float32)
            for r, (full, plen, smp) in enumerate(seqs):
                ids[r, : len(full)] = torch.tensor(full)
                mask[r, : len(full)] = 1
                # position t predicts token t+1; continuation token j sits at index plen + j
                ncont = len(full) - plen
                lo = max(plen, 1)
                skip = lo - plen  # continuation tokens whose predicting position was cut
                pos = torch.arange(lo - 1, plen + ncont - 1)
                labels[r, pos] = torch.tensor(full[lo:])
                tk_ids[r, pos] = smp.topk_ids[skip:].long()
                tk_lp[r, pos] = smp.topk_logp[skip:].float()
            yield ids, mask, labels, tk_ids, tk_lp


def train_draft(
    draft: Any,
    samples: Sequence[DistillSample],
    stream: torch.Tensor,
    budget: Budget,
    batch: int,
    corpus_batch: int,
    corpus_seq: int,
    corpus_every: int,
    max_len: int,
    peak_lr: float,
    soft_weight: float,
    gen: torch.Generator,
    pad_id: int,
) -> dict[str, Any]:
    """Train the draft on the target's continuations (hard CE + top-k soft CE) and some corpus."""
    opt = torch.optim.AdamW(draft.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.05)
    draft.train()
    batches = distill_batches(samples, batch, max_len, gen, pad_id)
    step, ema_h, ema_c = 0, None, None
    history: list[tuple[int, float | None, float | None]] = []
    while not budget.done(step):
        lr = lr_at(budget.progress(step), step, 30, peak_lr)
        for g in opt.param_groups:
            g["lr"] = lr
        if corpus_every and step % corpus_every == corpus_every - 1:
            w = sample_windows(stream, corpus_batch, corpus_seq, gen)
            logits = draft(input_ids=w[:, :-1]).logits
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), w[:, 1:].reshape(-1))
            ema_c = loss.item() if ema_c is None else 0.9 * ema_c + 0.1 * loss.item()
        else:
            ids, mask, labels, tk_ids, tk_lp = next(batches)
            logits = draft(input_ids=ids, attention_mask=mask).logits
            logp = torch.log_softmax(logits, dim=-1)
            valid = labels != -100
            hard = F.nll_loss(logp[valid], labels[valid])
            # soft CE against the target's renormalized top-k distribution
            q = torch.softmax(tk_lp[valid], dim=-1)
            soft = -(q * logp[valid].gather(-1, tk_ids[valid])).sum(-1).mean()
            loss = hard + soft_weight * soft
            ema_h = hard.item() if ema_h is None else 0.95 * ema_h + 0.05 * hard.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0 or step == 1:
            history.append((step, None if ema_h is None else round(ema_h, 4), None if ema_c is None else round(ema_c, 4)))
            log(f"draft step {step} distill-CE-ema {ema_h if ema_h is not None else float('nan'):.4f} "
                f"corpus-CE-ema {ema_c if ema_c is not None else float('nan'):.4f} lr {lr:.2e} "
                f"elapsed {time.monotonic() - budget.start:.0f}s")
    return {"steps": step, "distill_ce_ema": None if ema_h is None else round(ema_h, 4),
            "corpus_ce_ema": None if ema_c is None else round(ema_c, 4),
            "seconds": round(time.monotonic() - budget.start, 1), "history": history}


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def train_target(
    args: argparse.Namespace, ids: dict[str, int], stream: torch.Tensor, eval_windows: torch.Tensor,
    gen: torch.Generator, tok_dir: Path, tgt_dir: Path, init: Any = None,
) -> Any:
    """Train (from scratch, or on from ``init``), round to bf16, evaluate and save the target;
    its stats are in ``.stats``."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(args.seed)
    if init is None:
        tcfg = make_config(args.target_layers, args.target_hidden, args.target_heads, args.target_intermediate, ids, 2048)
        target = LlamaForCausalLM(tcfg).float()
    else:
        target = init.float().train()
        gen.manual_seed(args.seed + 7)  # other windows than the first phase
    log(f"target params {n_params(target) / 1e6:.2f}M")
    tbudget = Budget(args.target_minutes * 60, args.target_steps)
    tstats = train_lm(target, stream, tbudget, args.target_batch, args.target_seq, args.target_lr, 30 if init is None else 10,
                      gen, "target",
                      bf16_autocast=args.target_bf16_autocast)
    round_to_bf16_(target)
    target.eval()
    tstats["heldout_loss"] = round(eval_loss(target, eval_windows), 4)
    tstats["params"] = n_params(target)
    tstats["bf16_autocast"] = args.target_bf16_autocast
    tstats["peak_lr"] = args.target_lr  # per phase: --continue-target may use another
    log(f"target done: {tstats['steps']} steps, held-out loss {tstats['heldout_loss']}")
    save_model(target, tok_dir, tgt_dir, ids)
    target.stats = tstats
    return target


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("models"), help="output folder (demo-target/, demo-draft/, README.md)")
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
    p.add_argument("--target-steps", type=int, default=None, help="fixed number of steps (reproducible); budget still caps")
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
    p.add_argument("--draft-corpus-every", type=int, default=4, help="every N-th draft step is a corpus batch (0: never)")
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
    report: dict[str, Any] = {"seed": args.seed, "command": " ".join([Path(sys.argv[0]).as_posix(), *(argv or sys.argv[1:])]),
                              "python": sys.version.split()[0], "torch": torch.__version__}

    # 1. corpus ------------------------------------------------------------------------------
    train_files, heldout_files = collect_corpus(args.heldout_mod)
    n_chars = sum(len(f.text) for f in train_files)
    log(f"corpus: {len(train_files)} train files ({n_chars / 1e6:.1f}M chars), {len(heldout_files)} held-out files "
        f"from {stdlib_dir()}")
    report["corpus"] = {"stdlib": str(stdlib_dir()), "train_files": len(train_files), "heldout_files": len(heldout_files),
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
    probe = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Again"}]
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
                k: prev_t[k] for k in ("steps", "tokens", "seconds", "peak_lr", "final_train_loss_ema", "heldout_loss") if k in prev_t}]
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
    log(f"distillation data: {len(samples)} samples ({sum(s.chat for s in samples)} chat), {n_cont} continuation tokens")
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
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from measure_demo_models import acceptance_for_prompts

        erng = random.Random(args.seed + 3)
        held_chat = [q for _, q in instruction_prompts(heldout_items, erng, n_doc=args.eval_prompts)][-args.eval_prompts // 2 :]
        eval_sets: dict[str, list[list[int]]] = {
            "heldout-chat": encode_many([render_chat([{"role": "user", "content": q}], True) for q in held_chat]),
            "heldout-corpus": [],
        }
        for d in erng.sample([d for d in held_docs if len(d) > 100], min(args.eval_prompts // 2, len(held_docs))):
            s = erng.randint(0, len(d) - 65)
            eval_sets["heldout-corpus"].append([ids["bos"], *d[s + 1 : s + 64]])
        report["acceptance_k4"] = {}
        for name, plist in eval_sets.items():
            res = acceptance_for_prompts(target, draft, plist, k=4, max_new_tokens=args.eval_new_tokens, eos_id=ids["eos"])
            report["acceptance_k4"][name] = {"prompts": len(plist), "mean_acceptance_length": round(res.al, 3),
                                             "steps": res.steps}
            log(f"AL@K=4 {name}: {res.al:.3f} over {len(plist)} prompts")

    report["total_minutes"] = round((time.monotonic() - t_start) / 60, 1)
    report["sizes_bytes"] = {d.name: sum(f.stat().st_size for f in d.iterdir()) for d in (tgt_dir, dft_dir)}
    (out / "training_report.json").write_text(json.dumps(report, indent=2) + "\n")
    write_readme(out, report, args)
    log(f"all done in {report['total_minutes']} min; sizes {report['sizes_bytes']}")
    return 0


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
| demo-target | {args.target_layers} x {args.target_hidden} | {args.target_heads} | {args.target_intermediate} | {t['params'] / 1e6:.2f}M | {mb['demo-target']:.1f} MB |
| demo-draft | {args.draft_layers} x {args.draft_hidden} | {args.draft_heads} | {args.draft_intermediate} | {d['params'] / 1e6:.2f}M | {mb['demo-draft']:.1f} MB |

Both are `LlamaForCausalLM` (RoPE, SiLU, RMSNorm, head_dim 64, max_position_embeddings 2048),
stored as bfloat16 safetensors, and share one byte-level BPE tokenizer (vocab {VOCAB_SIZE}) with
special tokens `<s>`, `</s>`, `<pad>`, `<|system|>`, `<|user|>`, `<|assistant|>` and a chat
template: `<s>` then `<|role|>content</s>` per message, generation prompt `<|assistant|>`.

## How they were trained

Command (seed {r['seed']}, torch {r['torch']}, 2 CPU threads):

```
{cmds}
```

1. Corpus: {r['corpus']['train_files']} stdlib files for training ({r['corpus']['train_chars'] / 1e6:.1f}M characters,
   {r['tokenizer']['train_tokens'] / 1e6:.2f}M tokens), {r['corpus']['heldout_files']} held out (1 in {args.heldout_mod} by hash of the path).
2. Tokenizer: byte-level BPE ({r['tokenizer']['chars_per_token']} characters per token on the corpus).
3. Target: {phases}{t['steps']} AdamW steps of {args.target_batch} x {args.target_seq} tokens ({t['tokens'] / 1e6:.2f}M tokens,
   {t['seconds'] / 60:.1f} min, {precision}, peak LR {t.get('peak_lr', args.target_lr)}, cosine) on the corpus plus {r['tokenizer']['chat_examples']}
   chat-formatted examples derived from its docstrings (functions, classes, modules). Final train loss (EMA) {t['final_train_loss_ema']},
   held-out loss {t['heldout_loss']} nats/token.
4. Distillation data: the target's greedy continuations (batched, KV cache, {r['distill']['seconds'] / 60:.1f} min) of
   {r['distill']['samples']} prompts ({r['distill']['chat_samples']} instruction-style prompts through the chat template,
   the rest corpus excerpts): {r['distill']['continuation_tokens']} tokens, with the target's top-{r['distill']['topk']} log-probs.
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


if __name__ == "__main__":
    raise SystemExit(main())
