"""A pruned draft vocabulary: the target token ids a drafter can propose at all.

EAGLE-3 style drafters predict over a reduced vocabulary (e.g. 32K of a target's 128K tokens): their checkpoint
stores `d2t` (draft index -> offset, target id = index + d2t[index]) and `t2d` (a boolean mask over the target's
vocabulary). A target token outside that set can never be drafted, so it caps acceptance whatever the drafter
learned. This module reads such a map from the files users have (safetensors without torch: the format is an
8-byte header length, a JSON header naming each tensor's dtype, shape and byte range, then the raw bytes), from a
list of ids (.npy, .json), or builds one from token counts: the N most frequent ids of a corpus, which is how
EAGLE-3 training picks its draft vocabulary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from specmeter.common.errors import InputError
from specmeter.common.safetensors import read_header

MapKind = Literal["d2t", "t2d", "ids", "top"]
MAP_FORMATS = ("a safetensors file (or a draft model directory) holding d2t or t2d, a .npy or .json list of "
               "target token ids, or --top N with --corpus")
_SAFETENSORS_DTYPES = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
                       "I32": np.int32, "U32": np.uint32, "I64": np.int64, "U64": np.uint64}


@dataclass(frozen=True)
class DraftVocab:
    """The target token ids in the draft vocabulary (sorted, unique), and where they came from."""

    ids: np.ndarray
    name: str
    kind: MapKind
    source: str
    notes: tuple[str, ...] = field(default=())
    corpus_tokens: int | None = None  # --top: tokens counted in the corpus it was built from
    in_sample: bool = False  # --top: the corpus holds the very outputs the map is then measured on

    @property
    def size(self) -> int:
        return int(self.ids.size)

    def mask(self, vocab_size: int) -> np.ndarray:
        """A boolean mask over target ids 0..vocab_size-1: True where the drafter can propose the token."""
        out = np.zeros(vocab_size, dtype=bool)
        out[self.ids[self.ids < vocab_size]] = True
        return out


def top_n(counts: np.ndarray, n: int, source: str) -> DraftVocab:
    """The n most frequent ids of `counts` (counts[id] = occurrences; ties to the lower id): a corpus-built map."""
    if n < 1:
        raise InputError(f"--top {n}: the draft vocabulary needs at least one token; give N >= 1")
    seen = int(np.count_nonzero(counts))
    order = np.lexsort((np.arange(counts.size), -counts))  # by count, descending, then by id
    chosen = np.sort(order[:min(n, seen)])
    notes = () if seen >= n else (f"the corpus holds only {seen} distinct tokens, so the top-{n} map has {seen}",)
    return DraftVocab(chosen.astype(np.int64), f"top {n}", "top", source, notes)


def read_vocab_map(path: Path, vocab_size: int | None) -> DraftVocab:
    """The draft vocabulary in `path` (a file or a draft model directory), checked against the target's
    vocabulary size where it is known."""
    if not path.exists():
        raise InputError(f"--draft-vocab {path}: no such file or directory; give {MAP_FORMATS}")
    if path.is_dir():
        return _from_directory(path, vocab_size)
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        found = _safetensors_maps(path)
        if not found:
            raise InputError(f"--draft-vocab {path}: holds no d2t or t2d tensor (not a pruned-vocabulary drafter?); "
                             f"give {MAP_FORMATS}")
        return _from_tensors(found, str(path), vocab_size)
    if suffix in (".bin", ".pt", ".pth"):
        return _from_tensors(_torch_maps(path), str(path), vocab_size)
    if suffix == ".npy":
        return _from_array(_load_npy(path), str(path), vocab_size)
    if suffix == ".json":
        return _from_json(path, vocab_size)
    raise InputError(f"--draft-vocab {path}: unknown format {suffix or '(no suffix)'!r}; give {MAP_FORMATS}")


def _from_directory(path: Path, vocab_size: int | None) -> DraftVocab:
    for file in sorted(path.glob("*.safetensors")):
        found = _safetensors_maps(file)
        if found:
            return _from_tensors(found, str(file), vocab_size)
    for pattern in ("*.bin", "*.pt", "*.pth"):
        for file in sorted(path.glob(pattern)):
            return _from_tensors(_torch_maps(file), str(file), vocab_size)
    raise InputError(f"--draft-vocab {path}: no file in that directory holds a d2t or t2d tensor; give {MAP_FORMATS}")


def _map_name(name: str) -> str | None:
    """'d2t' or 't2d' for a tensor named so (any module prefix, e.g. model.d2t), else None."""
    last = name.rsplit(".", 1)[-1]
    return last if last in ("d2t", "t2d") else None


def _safetensors_maps(path: Path) -> dict[str, np.ndarray]:
    """The d2t / t2d tensors of a safetensors file, reading only their bytes (a checkpoint can be gigabytes)."""
    try:
        read = read_header(path)
        if read is None:
            raise ValueError("no safetensors header")
        header, start = read
        with path.open("rb") as fh:
            out: dict[str, np.ndarray] = {}
            for name, info in header.items():
                which = _map_name(name)
                if which is None or not isinstance(info, dict):
                    continue
                dtype = _SAFETENSORS_DTYPES.get(str(info.get("dtype")))
                if dtype is None:
                    raise ValueError(f"tensor {name} has dtype {info.get('dtype')}, not an integer or bool")
                begin, end = info["data_offsets"]
                fh.seek(start + begin)
                data = np.frombuffer(fh.read(end - begin), dtype=np.dtype(dtype).newbyteorder("<"))
                out[which] = data.reshape(info.get("shape") or [-1])
            return out
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"--draft-vocab {path}: not a readable safetensors file ({exc}); give {MAP_FORMATS}") from None


def _torch_maps(path: Path) -> dict[str, np.ndarray]:
    """d2t / t2d from a PyTorch checkpoint (needs torch; safetensors files do not)."""
    try:
        import torch
    except ImportError:
        raise InputError(f"--draft-vocab {path}: reading a PyTorch checkpoint needs torch; install it, or give the "
                         "safetensors file or a .npy of the draft vocabulary's target ids") from None
    try:
        state: Any = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise InputError(f"--draft-vocab {path}: torch could not read it ({type(exc).__name__}); give "
                         f"{MAP_FORMATS}") from None
    found = {which: np.asarray(value.numpy()) for name, value in (state.items() if isinstance(state, dict) else [])
             if (which := _map_name(str(name))) is not None and hasattr(value, "numpy")}
    if not found:
        raise InputError(f"--draft-vocab {path}: holds no d2t or t2d tensor; give {MAP_FORMATS}")
    return found


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.asarray(np.load(path, allow_pickle=False))
    except (OSError, ValueError) as exc:
        raise InputError(f"--draft-vocab {path}: not a readable .npy array ({exc}); give {MAP_FORMATS}") from None


def _from_json(path: Path, vocab_size: int | None) -> DraftVocab:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"--draft-vocab {path}: not readable JSON ({exc.__class__.__name__}); give a list of "
                         "target token ids, or {\"d2t\": [...]} / {\"t2d\": [...]}") from None
    if isinstance(doc, dict):
        tensors = {k: np.asarray(v) for k, v in doc.items() if k in ("d2t", "t2d")}
        if "token_ids" in doc:
            return _from_array(np.asarray(doc["token_ids"]), str(path), vocab_size)
        if not tensors:
            raise InputError(f"--draft-vocab {path}: a JSON object needs a token_ids, d2t or t2d list")
        return _from_tensors(tensors, str(path), vocab_size)
    return _from_array(np.asarray(doc), str(path), vocab_size)


def _from_array(arr: np.ndarray, source: str, vocab_size: int | None) -> DraftVocab:
    """A .npy / .json array: a boolean mask over the target vocabulary (t2d), else a list of target ids."""
    if arr.dtype == np.bool_:
        return _from_tensors({"t2d": arr}, source, vocab_size)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise InputError(f"--draft-vocab {source}: expected a 1-D list of integer target token ids (or a boolean "
                         f"mask), got shape {arr.shape} of {arr.dtype}")
    ids = np.unique(arr.astype(np.int64))
    notes = () if ids.size == arr.size else (f"{arr.size - ids.size} repeated ids in the list counted once",)
    return _checked(DraftVocab(ids, "ids", "ids", source, notes), vocab_size)


def _from_tensors(found: dict[str, np.ndarray], source: str, vocab_size: int | None) -> DraftVocab:
    """d2t when present (it is the map the drafter's outputs go through), t2d otherwise; both must agree."""
    t2d_ids = None
    if "t2d" in found:
        mask = found["t2d"].reshape(-1)
        if vocab_size is not None and mask.size != vocab_size:
            raise InputError(f"--draft-vocab {source}: t2d covers {mask.size} target ids but the target's vocabulary "
                             f"has {vocab_size}: it belongs to another target")
        t2d_ids = np.flatnonzero(mask.astype(bool)).astype(np.int64)
    if "d2t" not in found:
        assert t2d_ids is not None
        return _checked(DraftVocab(t2d_ids, "t2d", "t2d", source), vocab_size)
    d2t = found["d2t"].reshape(-1).astype(np.int64)
    targets = np.arange(d2t.size, dtype=np.int64) + d2t
    ids = np.unique(targets)
    if ids.size != targets.size:
        raise InputError(f"--draft-vocab {source}: d2t maps {targets.size - ids.size} draft ids onto target ids "
                         "already taken; it is not a draft-to-target offset map (target id = draft id + d2t[id])")
    notes: tuple[str, ...] = ()
    if t2d_ids is not None and not np.array_equal(ids, t2d_ids):
        notes = (f"d2t ({ids.size} ids) and t2d ({t2d_ids.size} ids) disagree; d2t is used (the drafter's outputs "
                 "go through it)",)
    return _checked(DraftVocab(ids, "d2t", "d2t", source, notes), vocab_size)


def _checked(vocab: DraftVocab, vocab_size: int | None) -> DraftVocab:
    if vocab.size == 0:
        raise InputError(f"--draft-vocab {vocab.source}: the draft vocabulary is empty")
    low, high = int(vocab.ids[0]), int(vocab.ids[-1])
    if low < 0 or (vocab_size is not None and high >= vocab_size):
        bound = "" if vocab_size is None else f" (the target's vocabulary is 0..{vocab_size - 1})"
        raise InputError(f"--draft-vocab {vocab.source}: target id {low if low < 0 else high} is out of range{bound}: "
                         "the map belongs to another target")
    return vocab
