#!/usr/bin/env bash
# One command: set up, then run the embedded default (vLLM CPU + the tiny demo pair, SD vs off).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/specmeter demo "$@"
