"""llama.cpp's files on this machine: its server binary, and Hugging Face models turned into GGUF by its own
converter (convert_hf_to_gguf.py from the source scripts/setup-llamacpp.sh builds), once per model content.

An EAGLE-3 head is converted against its target (`--target-model-dir`): its GGUF (architecture `eagle3`) takes
the target's tokenizer, records the target layers it reads and their hidden size, and stores d2t as absolute
target token ids; the target's embedding table stays out of it (llama-server lends the head the target's).

The converter refuses a byte-level BPE tokenizer whose token hash it has not catalogued (the project's own
tokenizer is one): for a tokenizer.json that declares exactly GPT-2's pre-tokenization (ByteLevel with its
regex, no normalizer), `gguf_convert` tells it "gpt-2", which is what that declaration means.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from specmeter.common.errors import InputError

SETUP_HINT = "run scripts/setup-llamacpp.sh (builds it into .venv/llama.cpp, about 10 minutes once)"
_DTYPES = {None: "f32", "float32": "f32", "float": "f32", "bfloat16": "bf16", "float16": "f16", "half": "f16"}


def llamacpp_home() -> Path:
    """Where setup-llamacpp.sh put llama.cpp (SPECMETER_LLAMACPP_HOME overrides)."""
    return Path(os.environ.get("SPECMETER_LLAMACPP_HOME") or Path(sys.prefix) / "llama.cpp")


def server_binary() -> Path | None:
    """llama-server: $SPECMETER_LLAMA_SERVER, then the one setup built, then PATH."""
    for candidate in (os.environ.get("SPECMETER_LLAMA_SERVER"), llamacpp_home() / "bin" / "llama-server",
                      shutil.which("llama-server")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def gpt2_pretokenizer(model_dir: Path) -> bool:
    """Whether tokenizer.json declares GPT-2's byte-level BPE pre-tokenization and nothing else."""
    try:
        tok = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    pre = tok.get("pre_tokenizer") or {}
    return (tok.get("model", {}).get("type") == "BPE" and tok.get("normalizer") is None
            and pre.get("type") == "ByteLevel" and pre.get("use_regex", True) is True)


def _content_key(model_dir: Path, outtype: str, target_dir: Path | None) -> str:
    h = hashlib.sha256(outtype.encode())
    files = [p for p in model_dir.iterdir() if p.is_file() and p.suffix in {".json", ".safetensors"}]
    if target_dir is not None:  # a head's GGUF takes the target's config and tokenizer, not its weights
        files += [p for p in target_dir.iterdir() if p.is_file() and p.suffix == ".json"]
    for f in sorted(files, key=lambda p: (p.parent != model_dir, p.name)):
        h.update(f.name.encode())
        h.update(str(f.stat().st_size).encode())
        with f.open("rb") as fh:  # weights of the models this converts here are small; hash all of it
            while block := fh.read(1 << 20):
                h.update(block)
    return h.hexdigest()[:16]


def _is_gguf(path: Path) -> bool:
    return path.suffix.lower() == ".gguf"


def check_head_conversion(head: str, target: str | None) -> None:
    """An EAGLE-3 head given as a Hugging Face directory converts only against its target's directory, and only
    as llama.cpp's converter recognizes a head (draft_vocab_size and one layer): otherwise it would convert as a
    plain llama model that llama-server refuses as a draft only once the target has loaded."""
    path = Path(head).expanduser()
    if _is_gguf(path) or not (path / "config.json").is_file():
        return
    if target is None or not (Path(target).expanduser() / "config.json").is_file():
        raise InputError(f"llamacpp: the EAGLE-3 head {head} converts to GGUF only against its target's Hugging "
                         f"Face directory (its tokenizer and config), not {target}; give the target's "
                         "directory, or the head already converted to .gguf")
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"llamacpp: cannot read {path / 'config.json'} ({exc})") from None
    cfg = {**cfg, **(cfg.get("transformer_layer_config") or {})}  # a speculators-style head nests its layer
    if "draft_vocab_size" not in cfg or cfg.get("num_hidden_layers") != 1:
        raise InputError(f"llamacpp: {head} is no EAGLE-3 head llama.cpp's converter recognizes (it needs "
                         "draft_vocab_size and num_hidden_layers 1 in config.json)")


def to_gguf(model: str, dtype: str | None = None, target: str | None = None) -> str:
    """A GGUF file for `model`: itself if it is one, else its conversion (cached by content and dtype).
    `target`: for an EAGLE-3 head, the target model directory it is converted against."""
    path = Path(model).expanduser()
    if path.is_file() and _is_gguf(path):
        return str(path)
    if not (path / "config.json").is_file():
        raise InputError(f"llamacpp: {model} is neither a .gguf file nor a Hugging Face model directory; "
                         "pass one of them with --model")
    target_dir = None
    if target is not None:
        check_head_conversion(model, target)
        target_dir = Path(target).expanduser()
    outtype = _DTYPES.get(dtype)
    if outtype is None:
        raise InputError(f"llamacpp: dtype {dtype!r} has no GGUF type; use float32, bfloat16 or float16")
    home = llamacpp_home()
    converter = home / "src" / "convert_hf_to_gguf.py"
    if not converter.is_file():
        raise InputError(f"llamacpp: llama.cpp's converter is missing ({converter}); {SETUP_HINT}")
    out = home / "gguf" / f"{path.resolve().name}-{outtype}-{_content_key(path, outtype, target_dir)}.gguf"
    if out.is_file():
        return str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_suffix(".part")
    cmd = [sys.executable, "-m", "specmeter.engines.gguf_convert", str(converter.parent), str(path),
           "--outfile", str(part), "--outtype", outtype]
    if target_dir is not None:
        cmd += ["--target-model-dir", str(target_dir)]
    if gpt2_pretokenizer(target_dir or path):  # a head's vocabulary is its target's
        cmd.append("--gpt2-pretokenizer")
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = " / ".join(line for line in done.stderr.strip().splitlines()[-3:])
        raise InputError(f"llamacpp: converting {path} to GGUF failed: {tail}")
    part.replace(out)
    return str(out)
