"""Checks that need no server: run before anything launches, so bad input fails in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specmeter.common.errors import InputError
from specmeter.common.hashing import file_sha256
from specmeter.common.safetensors import INDEX, read_header
from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod


def _looks_local(ref: str) -> bool:
    return ref.startswith(("/", "./", "../", "~")) or Path(ref).exists()


def _gguf(path: Path) -> bool:
    return path.suffix.lower() == ".gguf"


def _check_exists(role: str, path: Path) -> None:
    """A local model is a Hugging Face model directory or a single .gguf file (llama.cpp's format)."""
    if _gguf(path):
        if not path.is_file():
            raise InputError(f"{role} {path} does not exist; check the path to the .gguf file")
    elif not path.is_dir():
        what = "is a file, not a model directory or a .gguf file" if path.exists() else "does not exist"
        raise InputError(f"{role} {path} {what}; check the path (or pass a hub id)")


def _read_config(model_dir: Path) -> dict[str, Any]:
    path = model_dir / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{model_dir}: no config.json; point at a Hugging Face model directory") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}); "
                         "fix or re-download the model") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def _tokenizer_fingerprint(model_dir: Path) -> str | None:
    tok = model_dir / "tokenizer.json"
    return file_sha256(tok) if tok.exists() else None


def check_local_models(engine: EngineSpec, spec: SpecConfig) -> None:
    """The engine can run the drafter and is installed; local model paths exist; a draft model shares the
    target's vocabulary (same tokenizer)."""
    from specmeter.engines.registry import get_engine

    get_engine(engine.kind or "vllm").launcher.preflight(engine, spec)
    if spec.target_model is not None:
        _check_same_target(engine, spec.target_model)
    engine = engine.serving(spec)
    target = Path(engine.model).expanduser() if engine.model and _looks_local(engine.model) else None
    draft = Path(spec.draft_model).expanduser() if spec.draft_model and _looks_local(spec.draft_model) else None
    for role, path in (("target model", target), ("draft model", draft)):
        if path is not None:
            _check_exists(role, path)
    if spec.method is SpecMethod.mtp and target is not None and draft is None and not _gguf(target):
        _check_mtp_layers(target)
    # A GGUF file carries its vocabulary inside; llama-server compares the pair's itself when it loads them.
    if target is None or draft is None or _gguf(target) or _gguf(draft):
        return
    if spec.method is SpecMethod.eagle3:
        _check_eagle3_head(target, draft)
    if spec.method is not SpecMethod.draft_model:
        return
    what = _vocabulary_differs(target, draft)
    if what is not None:
        raise InputError(
            f"draft model {draft} uses a different tokenizer than target {target} ({what}); "
            "draft_model speculation needs a draft trained on the target's tokenizer"
        )


def _vocabulary_differs(target: Path, other: Path) -> str | None:
    """How `other`'s vocabulary differs from `target`'s (None: the same vocab_size and, where both have one, the
    same tokenizer.json)."""
    t_vocab, o_vocab = _read_config(target).get("vocab_size"), _read_config(other).get("vocab_size")
    if t_vocab != o_vocab:
        return f"vocab_size {o_vocab} vs {t_vocab}"
    t_tok, o_tok = _tokenizer_fingerprint(target), _tokenizer_fingerprint(other)
    return "tokenizer.json differs" if t_tok and o_tok and t_tok != o_tok else None


# Where an MTP layer's weights are in the checkpoints vLLM serves: mtp.* or model.mtp_layers.* (Qwen3-Next,
# Qwen3.5, MiMo, ERNIE, Nemotron-H, ...), an extra decoder layer with eh_proj beside enorm and hnorm (DeepSeek,
# GLM-4.5, Step-3.5, ...), nextn (the GGUF names llama.cpp converts them to).
MTP_MARKS = ("mtp", "eh_proj", "nextn")


def _tensor_names(model_dir: Path) -> set[str] | None:
    """The tensor names of a local checkpoint, from its shard index or its safetensors headers (None: no
    safetensors to read them from, or one not readable)."""
    try:
        weight_map = json.loads((model_dir / INDEX).read_text(encoding="utf-8")).get("weight_map")
        if isinstance(weight_map, dict):
            return set(weight_map)
    except (OSError, ValueError, AttributeError):
        pass
    files = sorted(model_dir.glob("*.safetensors"))
    headers = [read_header(f) for f in files]
    if not files or any(h is None for h in headers):
        return None
    return {name for h in headers if h is not None for name in h[0] if name != "__metadata__"}


def _check_same_target(engine: EngineSpec, target_model: str) -> None:
    """A configuration's own target checkpoint must be the engine's model (the baseline serves that one): the same
    vocabulary and tokenizer, where both are local."""
    paths = [Path(m).expanduser() for m in (engine.model, target_model) if m and _looks_local(m)]
    if len(paths) < 2 or any(_gguf(p) for p in paths):
        return
    ours, theirs = paths
    _check_exists("target_model", theirs)
    what = _vocabulary_differs(ours, theirs)
    if what is not None:
        raise InputError(f"target_model {theirs} is not {ours} saved again ({what}): "
                         "it serves one configuration's target, and the baseline serves engine.model, so the two "
                         "must be one model; give the MTP checkpoint of the same model, or make it engine.model")


def _check_mtp_layers(target: Path) -> None:
    """An MTP drafter is the target's own MTP layers: a checkpoint quantized or converted without them loads, on
    the engines that do not check it, with a random head that accepts almost nothing, and says nothing."""
    names = _tensor_names(target)
    if names is None or any(mark in name for name in names for mark in MTP_MARKS):
        return
    raise InputError(f"target model {target}: method mtp drafts with the target's own MTP layers, but none of its "
                     f"{len(names)} tensors is one (no name with {', '.join(MTP_MARKS)}; see {INDEX}'s "
                     "weight_map or the safetensors headers): a checkpoint quantized or converted without them drafts "
                     "with a random head and accepts almost nothing; use one that keeps its MTP layers, or another "
                     "drafter")


def launch_notes(engine: EngineSpec, spec: SpecConfig) -> list[str]:
    """What the engine's launcher says of how `spec` is measured (printed before the run starts)."""
    from specmeter.engines.registry import get_engine

    return get_engine(engine.kind or "vllm").launcher.notes(spec)


def _check_eagle3_head(target: Path, head: Path) -> None:
    """An EAGLE-3 head reads the target's hidden states and embeddings and maps its drafts into the target's
    vocabulary: a head trained for another target loads, then fails on a shape mismatch mid-start (or drafts
    wrong ids), so its config is checked against the target's first."""
    t_cfg, h_cfg = _read_config(target), _read_config(head)
    problems = []
    t_vocab, h_vocab = t_cfg.get("vocab_size"), h_cfg.get("vocab_size")
    if t_vocab is not None and h_vocab is not None and t_vocab != h_vocab:
        problems.append(f"vocab_size {h_vocab} vs the target's {t_vocab}")
    t_hidden = t_cfg.get("hidden_size")
    h_hidden = h_cfg.get("target_hidden_size") or h_cfg.get("hidden_size")
    if t_hidden is not None and h_hidden is not None and t_hidden != h_hidden:
        problems.append(f"it reads hidden states of size {h_hidden}, the target's are {t_hidden}")
    draft_vocab = h_cfg.get("draft_vocab_size")
    if isinstance(draft_vocab, int) and isinstance(h_vocab, int) and not 0 < draft_vocab <= h_vocab:
        problems.append(f"draft_vocab_size {draft_vocab} is not within its vocab_size {h_vocab}")
    if problems:
        raise InputError(f"EAGLE-3 head {head} does not fit target {target} ({'; '.join(problems)}); "
                         "an EAGLE-3 head is trained for one target: give that target, or its head")
