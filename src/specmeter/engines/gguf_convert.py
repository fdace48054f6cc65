"""Run llama.cpp's own convert_hf_to_gguf.py from its source tree (a separate process: it imports torch and
its own gguf package). Usage: python -m specmeter.engines.gguf_convert SRC_DIR MODEL_DIR [converter args]
[--gpt2-pretokenizer].

--gpt2-pretokenizer: the caller checked that tokenizer.json declares GPT-2's byte-level pre-tokenization;
where the converter does not recognize the tokenizer's hash, it is told "gpt-2" instead of giving up.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any


def main(argv: list[str]) -> None:
    src, model, *rest = argv
    gpt2 = "--gpt2-pretokenizer" in rest
    rest = [a for a in rest if a != "--gpt2-pretokenizer"]
    sys.path.insert(0, src)
    converter = importlib.import_module("convert_hf_to_gguf")
    if gpt2:
        text_model = importlib.import_module("conversion").TextModel
        recognize = text_model.get_vocab_base_pre

        def pre_or_gpt2(self: Any, tokenizer: Any) -> str:
            try:
                return str(recognize(self, tokenizer))
            except NotImplementedError:
                return "gpt-2"

        text_model.get_vocab_base_pre = pre_or_gpt2
    sys.argv = ["convert_hf_to_gguf.py", model, *rest]
    converter.main()


if __name__ == "__main__":
    main(sys.argv[1:])
