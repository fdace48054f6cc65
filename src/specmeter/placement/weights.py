"""How much memory a model's weights take, read from its files on disk: what placement checks a shared GPU's
memory share against. A hub id (not downloaded here) is unknown, and its share goes unchecked."""

from __future__ import annotations

from pathlib import Path

# A directory may hold the same weights in two formats: the first format found is the one counted.
FORMATS = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def weights_bytes(model: str | None) -> int | None:
    """Bytes of the weights of a local model (a directory or one file); None: not a local path."""
    if not model:
        return None
    path = Path(model)
    if path.is_file():
        return path.stat().st_size
    if not path.is_dir():
        return None
    for suffix in FORMATS:
        files = [f for f in path.iterdir() if f.is_file() and f.suffix == suffix]
        if files:
            return sum(f.stat().st_size for f in files)
    return None
