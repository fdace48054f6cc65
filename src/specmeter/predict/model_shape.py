"""A model's shape from its Hugging Face config.json, and the parameters the roofline reads and multiplies.

Counted from the shapes (Llama-style decoder): the input embedding (vocab x hidden); per layer the attention
projections (q and o: hidden x heads x head_dim; k and v: hidden x KV heads x head_dim), the MLP (gated:
gate, up and down, 3 x hidden x intermediate; ungated: 2x) and two norms; a final norm; the lm_head
(vocab x hidden) unless tied to the embedding. Mixture-of-experts layers (Mixtral's `num_local_experts`, Qwen's
`num_experts`) hold every expert in memory, but a token multiplies only `num_experts_per_tok` of them.

An EAGLE head's config describes its decoder layer(s); it shares the target's embedding (EAGLE-1 also its
lm_head) and adds the layer that fuses the target's hidden states (EAGLE-1: 2 x hidden in; EAGLE-3: 3 x
the target's hidden in, and its first layer's q, k, v read 2 x hidden). EAGLE-3's fc runs once per speculation
step, on the target's states before the first draft pass (vLLM's `combine_hidden_states`); later passes feed the
head its own output, so a pass after the first reads the layer and the lm_head alone (`fused_params`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specmeter.common.errors import InputError
from specmeter.predict.checkpoint import checkpoint_params
from specmeter.schemas.estimate import Method, ModelShape, Role

# Decoders whose MLP is two matrices (up, down) rather than Llama's gated three.
UNGATED = frozenset({"gpt2", "gpt_neox", "gptj", "opt", "phi", "falcon", "gpt_bigcode", "starcoder2", "bloom"})
QKV_BIAS = frozenset({"qwen2", "qwen2_moe"})  # q, k and v carry biases without saying so in the config
DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float8_e4m3fn": 1}
CHECK_TOLERANCE = 0.02


def config_file(path: Path) -> Path:
    """The config.json named, or the one inside a model directory."""
    if path.suffix.lower() == ".gguf":  # binary: its metadata is not a config.json's keys
        raise InputError(f"{path}: a .gguf file; the planner reads a Hugging Face config.json: give the model's "
                         "config.json or its Hugging Face directory")
    file = path / "config.json" if path.is_dir() else path
    if not file.is_file():
        raise InputError(f"{path}: no config.json there; give a model directory or its config.json")
    return file


def load_config(path: Path) -> tuple[Path, dict[str, Any]]:
    file = config_file(path)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{file}: cannot read it ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{file}: not valid JSON ({exc.msg} at line {exc.lineno}); give a Hugging Face "
                         "config.json") from None
    if not isinstance(raw, dict):
        raise InputError(f"{file}: expected a JSON object of config keys, got {type(raw).__name__}")
    text = raw.get("text_config")
    if "num_hidden_layers" not in raw and isinstance(text, dict):
        raw = {**raw, **text}  # a multimodal config: its language model's keys
    return file, raw


class _Keys:
    """Reads required and optional integers, each error one line naming the file, the key and the fix."""

    def __init__(self, file: Path, raw: dict[str, Any]) -> None:
        self.file, self.raw = file, raw

    def int(self, key: str, *aliases: str, default: int | None = None, minimum: int = 1) -> int:
        for name in (key, *aliases):
            value = self.raw.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise InputError(f"{self.file}: {name} is {value!r}; it must be an integer >= {minimum} "
                                 "(fix the config.json, or give the model's original one)")
            return value
        if default is None:
            raise InputError(f"{self.file}: no {key} key; add it to the config.json (the model's own "
                             "config has it), or this is not a decoder this estimate can read")
        return default


def _dtype(raw: dict[str, Any]) -> str | None:
    quant = raw.get("quantization_config")
    if isinstance(quant, dict) and str(quant.get("quant_method", "")).lower() == "fp8":
        return "fp8"
    value = raw.get("torch_dtype") or raw.get("dtype")
    return str(value) if value else None


def detect_method(path: Path) -> Method:
    """A drafter's method from its config's architectures: an EAGLE(-3) head names itself, else a draft model."""
    _file, raw = load_config(path)
    names = " ".join(str(a) for a in raw.get("architectures") or []).lower()
    if "eagle3" in names:
        return "eagle3"
    return "eagle" if "eagle" in names else "draft_model"


def _refuse_unmodelled(file: Path, raw: dict[str, Any]) -> None:
    if raw.get("kv_lora_rank"):
        raise InputError(f"{file}: multi-head latent attention (kv_lora_rank) is not modelled by this estimate; "
                         "its KV cache and weights differ from the heads x head_dim this counts")
    if raw.get("n_routed_experts"):
        raise InputError(f"{file}: n_routed_experts (DeepSeek-style MoE, with dense first layers and shared "
                         "experts) is not modelled; give a Mixtral- or Qwen-style MoE config")


class _Counts:
    """Parameter counts accumulated layer by layer."""

    def __init__(self) -> None:
        self.memory = 0  # held in GPU memory
        self.streamed = 0  # read by a step touching every weight (the input embedding table excluded)
        self.experts = 0  # the routed experts' part of `streamed`
        self.active = 0  # multiplied by one token

    def add(self, n: int, *, memory: bool = True, streamed: bool = True, active: bool = True,
            expert: bool = False) -> None:
        self.memory += n if memory else 0
        self.streamed += n if streamed else 0
        self.experts += n if expert else 0
        self.active += n if active else 0


def read_shape(path: Path, role: Role = "target", method: Method = "draft_model",
               target: ModelShape | None = None) -> ModelShape:
    """The shape of the model (target or draft model) or EAGLE head whose config.json `path` is (or holds)."""
    file, raw = load_config(path)
    _refuse_unmodelled(file, raw)
    keys = _Keys(file, raw)
    layers = keys.int("num_hidden_layers", "n_layer", "num_layers")
    hidden = keys.int("hidden_size", "n_embd", "d_model")
    heads = keys.int("num_attention_heads", "n_head")
    kv_heads = keys.int("num_key_value_heads", default=heads)
    if heads % kv_heads:
        raise InputError(f"{file}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    if raw.get("head_dim") is None and hidden % heads:
        raise InputError(f"{file}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}; add "
                         "head_dim to the config.json")
    head_dim = keys.int("head_dim", default=hidden // heads)
    vocab = keys.int("vocab_size")
    experts = keys.int("num_local_experts", "num_experts", default=0, minimum=0)
    per_token = keys.int("num_experts_per_tok", "experts_per_token", default=0, minimum=0) if experts else 0
    if experts and not per_token:
        raise InputError(f"{file}: {experts} experts but no num_experts_per_tok; add it (the router's top-k)")
    expert_inter = keys.int("moe_intermediate_size", "intermediate_size") if experts else 0
    dense_layers = _dense_layers(keys, layers) if experts else set(range(layers))
    need_dense = bool(dense_layers) or not experts
    inter = keys.int("intermediate_size", "n_inner", default=None if need_dense else 0, minimum=0)
    shared_inter = keys.int("shared_expert_intermediate_size", default=0, minimum=0) if experts else 0
    model_type = str(raw["model_type"]) if raw.get("model_type") else None
    gated = model_type not in UNGATED
    mlp_mats = 3 if gated else 2
    tied = bool(raw.get("tie_word_embeddings", False))
    head_role: Role = role
    if role != "target" and method in ("eagle", "eagle3"):
        head_role = "EAGLE-3 head" if method == "eagle3" else "EAGLE head"
    notes: list[str] = []
    if "tie_word_embeddings" not in raw and head_role == role:
        notes.append(f"{file}: tie_word_embeddings absent, taken as false (Llama's default)")

    c = _Counts()
    fused = 0
    is_head = head_role != role  # an EAGLE head holds no embedding: it uses the target's
    c.add(vocab * hidden, memory=not is_head, streamed=False, active=False)  # a step gathers rows: no full read
    attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    if raw.get("attention_bias"):
        attn += (heads + 2 * kv_heads) * head_dim + hidden
    elif model_type in QKV_BIAS:
        attn += (heads + 2 * kv_heads) * head_dim
    mlp_bias = (2 * inter + hidden if gated else inter + hidden) if raw.get("mlp_bias") else 0
    for layer in range(layers):
        c.add(attn + 2 * hidden)
        if layer in dense_layers:
            c.add(mlp_mats * hidden * inter + mlp_bias)
            continue
        c.add(hidden * experts)  # the router
        one_expert = mlp_mats * hidden * expert_inter
        c.add(experts * one_expert, active=False, expert=True)
        c.active += per_token * one_expert
        if shared_inter:
            c.add(mlp_mats * hidden * shared_inter + hidden)  # the shared expert and its gate
    c.add(hidden)  # the final norm
    if head_role == "EAGLE-3 head":
        target_hidden = keys.int("target_hidden_size", default=target.hidden if target else hidden)
        c.add(hidden * (heads + 2 * kv_heads) * head_dim + hidden)  # q, k, v read 2 x hidden; the extra norm
        fused = 3 * target_hidden * hidden  # fc: three target hidden states in
        c.add(fused)
        draft_vocab = keys.int("draft_vocab_size", default=vocab)
        c.add(draft_vocab * hidden)  # its own lm_head over the draft vocabulary
        notes.append(f"{head_role}: embedding shared with the target; lm_head over {draft_vocab} tokens; fc "
                     f"({3 * target_hidden} in) once per step, before the first draft pass")
    elif head_role == "EAGLE head":
        c.add(2 * hidden * hidden + hidden)  # fc: token embedding and target hidden state in
        target_vocab = target.vocab if target else vocab
        c.add(target_vocab * hidden, memory=False)  # the target's lm_head: read every pass, held by the target
        notes.append(f"{head_role}: embedding and lm_head shared with the target (not counted in its memory)")
    elif not tied:
        c.add(vocab * hidden)
    else:
        c.add(vocab * hidden, memory=False)  # the tied embedding read whole as the lm_head

    shape = ModelShape(source=str(file), role=head_role, model_type=model_type, layers=layers, hidden=hidden,
                       heads=heads, kv_heads=kv_heads, head_dim=head_dim, intermediate=inter or expert_inter,
                       vocab=vocab, tied_embeddings=tied, dtype=_dtype(raw), experts=experts,
                       experts_per_token=per_token, params=c.memory, streamed_params=c.streamed,
                       expert_params=c.experts, active_params=c.active,
                       fused_params=fused if head_role == "EAGLE-3 head" else 0, notes=notes)
    return _checked(shape, file.parent)


def _dense_layers(keys: _Keys, layers: int) -> set[int]:
    """Qwen-MoE layers that stay dense: `mlp_only_layers`, and all but every `decoder_sparse_step`-th."""
    step = keys.int("decoder_sparse_step", default=1)
    only = keys.raw.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(isinstance(i, int) for i in only):
        raise InputError(f"{keys.file}: mlp_only_layers is {only!r}; it must be a list of layer indices")
    return {i for i in range(layers) if i in only or (i + 1) % step}


def _checked(shape: ModelShape, model_dir: Path) -> ModelShape:
    """The count from the safetensors beside the config, and a note where it disagrees with the shapes'."""
    per_param = DTYPE_BYTES.get(shape.dtype or "") if shape.dtype != "fp8" else 1
    counted, how = checkpoint_params(model_dir, per_param)
    if counted is None:
        return shape
    notes = list(shape.notes)
    off = counted / shape.params - 1.0
    if abs(off) > CHECK_TOLERANCE:
        # A head's checkpoint may carry a copy of the target's embedding, which vLLM shares where identical.
        embedding = (" (the difference is the vocab x hidden embedding, held by the target)"
                     if shape.role != "target" and counted - shape.params == shape.vocab * shape.hidden else "")
        notes.append(f"{Path(shape.source).name}: the shapes give {shape.params:,} parameters, the checkpoint "
                     f"{counted:,} ({how}; {off:+.1%}){embedding}; the estimate uses the shapes' count")
    return shape.model_copy(update={"checkpoint_params": counted, "notes": notes})
