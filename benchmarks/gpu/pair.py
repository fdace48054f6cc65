"""A random-weight Llama target and draft model over the demo tokenizer, made with PyTorch and written as Hugging
Face files (config.json, safetensors, the tokenizer), for the GPU check to convert and serve.

Random weights produce nonsense, and that is all the check asks of them: what speculative decoding costs depends on
the models' shapes, not on their values, and acceptance comes from llama-server's synthetic acceptance at set rates.
Nothing is downloaded: the vocabulary is the demo pair's (models/demo-target's tokenizer), and a pair is made in
seconds from a seed. A pair already made with the same shapes, dtype and seed is kept.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "models" / "demo-target"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")
HEAD_DIM = 64
INIT_STD = 0.02
BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


@dataclass(frozen=True)
class Shape:
    """A Llama decoder: layers, widths and grouped-query attention (head_dim 64, tied embeddings)."""

    layers: int
    hidden: int
    kv_heads: int
    intermediate: int

    @property
    def heads(self) -> int:
        return self.hidden // HEAD_DIM

    def params(self, vocab: int) -> int:
        """Distinct parameters (the embedding serves as the output layer too)."""
        attention = 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_heads * HEAD_DIM
        layer = attention + 3 * self.hidden * self.intermediate + 2 * self.hidden
        return vocab * self.hidden + self.layers * layer + self.hidden

    def kv_bytes_per_token(self, dtype: str) -> int:
        """KV cache bytes one token takes (keys and values of every layer, in the model's dtype)."""
        return 2 * self.layers * self.kv_heads * HEAD_DIM * BYTES[dtype]


def vocab_size() -> int:
    return int(json.loads((TOKENIZER / "config.json").read_text(encoding="utf-8"))["vocab_size"])


def config_json(shape: Shape, dtype: str) -> dict[str, object]:
    """The model's config.json, in the demo models' keys (which the GGUF converter reads)."""
    demo = json.loads((TOKENIZER / "config.json").read_text(encoding="utf-8"))
    return {**demo, "hidden_size": shape.hidden, "intermediate_size": shape.intermediate,
            "num_hidden_layers": shape.layers, "num_attention_heads": shape.heads,
            "num_key_value_heads": shape.kv_heads, "head_dim": HEAD_DIM, "dtype": dtype, "torch_dtype": dtype,
            "tie_word_embeddings": True}


def _tensors(shape: Shape, vocab: int, dtype: str, seed: int) -> dict[str, Any]:
    """Every weight of the model: matrices N(0, 0.02) drawn on the GPU where there is one, norms 1."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device=device).manual_seed(seed)
    torch_dtype = getattr(torch, dtype)

    def matrix(rows: int, cols: int) -> torch.Tensor:
        w = torch.empty(rows, cols, device=device, dtype=torch.float32).normal_(0.0, INIT_STD, generator=gen)
        return w.to(torch_dtype).cpu()

    def ones() -> torch.Tensor:
        return torch.ones(shape.hidden, dtype=torch_dtype)

    kv = shape.kv_heads * HEAD_DIM
    out: dict[str, Any] = {"model.embed_tokens.weight": matrix(vocab, shape.hidden), "model.norm.weight": ones()}
    for i in range(shape.layers):
        p = f"model.layers.{i}."
        out |= {p + "self_attn.q_proj.weight": matrix(shape.hidden, shape.hidden),
                p + "self_attn.k_proj.weight": matrix(kv, shape.hidden),
                p + "self_attn.v_proj.weight": matrix(kv, shape.hidden),
                p + "self_attn.o_proj.weight": matrix(shape.hidden, shape.hidden),
                p + "mlp.gate_proj.weight": matrix(shape.intermediate, shape.hidden),
                p + "mlp.up_proj.weight": matrix(shape.intermediate, shape.hidden),
                p + "mlp.down_proj.weight": matrix(shape.hidden, shape.intermediate),
                p + "input_layernorm.weight": ones(), p + "post_attention_layernorm.weight": ones()}
    return out


def make_model(out: Path, shape: Shape, dtype: str, seed: int) -> Path:
    """Write one model into `out` (kept as it is when its stamp says it was made the same way)."""
    stamp = {"shape": asdict(shape), "dtype": dtype, "seed": seed, "tokenizer": str(TOKENIZER.relative_to(ROOT))}
    stamp_path = out / "made.json"
    if stamp_path.is_file() and json.loads(stamp_path.read_text(encoding="utf-8")) == stamp:
        return out
    from safetensors.torch import save_file

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    vocab = vocab_size()
    save_file(_tensors(shape, vocab, dtype, seed), str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config_json(shape, dtype), indent=2) + "\n", encoding="utf-8")
    for name in TOKENIZER_FILES:
        shutil.copyfile(TOKENIZER / name, out / name)
    stamp_path.write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    return out


def make_pair(out: Path, target: Shape, draft: Shape, dtype: str, seed: int) -> tuple[Path, Path]:
    """The target and the draft model under `out` (seeds differ: two models, not one)."""
    return (make_model(out / "target", target, dtype, seed), make_model(out / "draft", draft, dtype, seed + 1))
