#!/usr/bin/env bash
# One command: set up, then run the embedded default on vLLM CPU with the tiny demo pair: a sweep of K
# against speculation off, the recommended K per batch size, and a run of that dynamic config.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/specmeter demo "$@"
