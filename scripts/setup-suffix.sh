#!/usr/bin/env bash
# Snowflake's arctic-inference, which vLLM's suffix decoding drafter (`{"method": "suffix", ...}`) imports, into the
# project's venv. Only the test command (and whoever measures suffix decoding) needs it; the demo does not.
# Its sdist builds one small C++ extension (arctic_inference.suffix_decoding._C) for the CPU: a few minutes the
# first time (pip's isolated build environment fetches torch, nanobind, cmake and ninja), and pip keeps the built
# wheel in its cache, so a later setup, into this venv or a fresh one, installs it in seconds. The package requires
# nothing else at run time; its vLLM plugin does nothing unless ARCTIC_INFERENCE_ENABLED is set.
# Idempotent: does nothing where the venv's Python already imports it. SPECMETER_VENV installs into another venv
# (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.3.0
VENV=${SPECMETER_VENV:-.venv}
PY=$VENV/bin/python

if [ ! -x "$PY" ]; then
  echo "setup-suffix: $PY is missing; run scripts/setup.sh first (or set SPECMETER_VENV to a venv)" >&2
  exit 2
fi
if "$PY" -c 'import arctic_inference.suffix_decoding' >/dev/null 2>&1; then
  exit 0
fi
# CMake, which builds the extension, looks for CXX, then c++, g++ and clang++.
if [ -z "${CXX:-}" ] && ! command -v c++ >/dev/null && ! command -v g++ >/dev/null && ! command -v clang++ >/dev/null; then
  echo "setup-suffix: no C++ compiler to build arctic-inference $VERSION's extension; install one (Debian: apt-get install g++)" >&2
  exit 2
fi
echo "setup-suffix: installing arctic-inference $VERSION for vLLM's suffix decoding (first time: a few minutes to build)"
"$PY" -m pip install --quiet "arctic-inference==$VERSION" \
  || { echo "setup-suffix: pip could not install arctic-inference==$VERSION; see pip's output above" >&2; exit 2; }
"$PY" -c 'import arctic_inference.suffix_decoding' \
  || { echo "setup-suffix: arctic-inference $VERSION installed, but $PY cannot import arctic_inference.suffix_decoding" >&2; exit 2; }
echo "setup-suffix: done"
