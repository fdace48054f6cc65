"""Engine kind -> adapter. New engines (SGLang, TensorRT-LLM, llama.cpp) register here."""

from __future__ import annotations

from specmeter.engines.base import EngineAdapter
from specmeter.engines.vllm import VLLMAdapter
from specmeter.errors import InputError

_ADAPTERS: dict[str, type[EngineAdapter]] = {"vllm": VLLMAdapter}


def get_adapter(kind: str) -> EngineAdapter:
    try:
        return _ADAPTERS[kind]()
    except KeyError:
        raise InputError(f"unknown engine {kind!r}; choose one of: {', '.join(sorted(_ADAPTERS))}") from None
