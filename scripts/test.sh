#!/usr/bin/env bash
# One command: set up, then check the code (ruff on src, tests, tools and benchmarks; mypy --strict on src/: it
# ships py.typed) and run the whole test suite (unit, integration on the real vLLM CPU server, on llama.cpp's
# llama-server and on a one-node Slurm cluster, e2e; the HTML report in headless Chromium). Only this command
# builds llama-server (once) and installs arctic-inference (vLLM's suffix decoding), Chromium and Slurm.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/setup-llamacpp.sh
scripts/setup-suffix.sh
scripts/setup-browser.sh
scripts/setup-slurm.sh
.venv/bin/ruff check src tests tools benchmarks docs/hooks
.venv/bin/mypy
.venv/bin/lint-imports
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
exec .venv/bin/python -m pytest -q -ra "$@"
