#!/usr/bin/env bash
# The GPU check in one command: build llama-server (with CUDA for the GPU found, once), make a random-weight pair,
# sweep it with every server interleaved on the one GPU, and write what the run shows (benchmarks/gpu/check.py).
# Without a GPU it runs the identical steps on the CPU build with a tiny pair; the test command runs it so.
#
#   benchmarks/gpu/check.sh --out DIR          everything (on a GPU box the build takes most of it, once)
#   benchmarks/gpu/check.sh --build-only       the build alone, for where one command may not hold both
#   benchmarks/gpu/check.sh --cpu --out DIR    the tiny pair, whatever the machine
#   ... --ks 1,2,3,4,6 --no-ceiling           more Ks at the realistic profile, none at the ceiling (check.py)
#
# Given a DIR an earlier call left, it goes on from there: an interrupted sweep (a time limit per command) is
# resumed where it stopped, a finished one gets its results written again.
#
# Nothing is downloaded. Python is the project's .venv where it is set up, else python3 (a PyTorch image), which
# gets the wheels benchmarks/gpu/bundle.sh gathered (pydantic and its needs) where it lacks pydantic; llama.cpp's
# source comes from that bundle too where there is one. The pair and the build stay in benchmarks/gpu/work/
# (SPECMETER_GPU_WORK), so a second run reuses them.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
WORK=${SPECMETER_GPU_WORK:-$ROOT/benchmarks/gpu/work}
BUNDLE=$ROOT/benchmarks/gpu/bundle
out="" profile=() design=() build_only=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=${2:?--out takes a directory}; shift 2 ;;
    --cpu) profile=(--profile cpu); shift ;;
    --build-only) build_only=1; shift ;;
    --ks) design+=(--ks "${2:?--ks takes Ks, e.g. 1,2,3,4,6}"); shift 2 ;;
    --no-ceiling) design+=(--no-ceiling); shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "check: unknown argument $1; see --help" >&2; exit 2 ;;
  esac
done
if [ -z "$build_only" ] && [ -z "$out" ]; then
  echo "check: give --out DIR (or --build-only)" >&2
  exit 2
fi
mkdir -p "$WORK"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

if [ -x .venv/bin/python ]; then
  PY=.venv/bin/python
else
  PY=python3
  export SPECMETER_LLAMACPP_HOME=${SPECMETER_LLAMACPP_HOME:-$WORK/llama.cpp}
fi
site=""
if ! "$PY" -c 'import pydantic' 2>/dev/null; then
  wheels=("$BUNDLE"/wheels/*.whl)
  if [ ! -f "${wheels[0]}" ]; then
    echo "check: $PY has no pydantic and $BUNDLE/wheels holds no wheels; run benchmarks/gpu/bundle.sh where pip reaches an index" >&2
    exit 2
  fi
  "$PY" -m pip install --quiet --no-index --no-deps --no-compile --upgrade --target "$WORK/site" "${wheels[@]}"
  site="$WORK/site:"
fi
export PYTHONPATH="$site$ROOT/src:$ROOT/benchmarks"
# A llama-server built on another machine (SPECMETER_LLAMACPP_CUDA_ARCHS=90 where there is no GPU) finds this box's
# cuBLAS and CUDA runtime where the Python environment's NVIDIA wheels keep them; one built here has that directory in
# its run path already.
purelib=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null) || purelib=""
for lib in "$purelib"/nvidia/*/lib; do
  [ -d "$lib" ] && export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done

sources=("$BUNDLE"/llama.cpp-src-*.tar.gz)
if [ -z "${SPECMETER_LLAMACPP_SOURCE:-}" ] && [ -f "${sources[0]}" ]; then
  export SPECMETER_LLAMACPP_SOURCE=${sources[0]}
fi
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=$PATH:/usr/local/cuda/bin
fi
home=${SPECMETER_LLAMACPP_HOME:-.venv/llama.cpp}
started=$(date +%s)
scripts/setup-llamacpp.sh
# The build's seconds, where this call built (the stamp is newer than the call): the summary reports them.
stamp=$(ls "$home"/.built-* 2>/dev/null | head -1)
if [ -n "$stamp" ] && [ "$(stat -c %Y "$stamp")" -ge "$started" ]; then
  echo "{\"seconds\": $(($(date +%s) - started))}" >"$home/build-seconds.json"
fi
[ -z "$build_only" ] || exit 0
exec "$PY" benchmarks/gpu/check.py --out "$out" --work "$WORK" "${profile[@]}" "${design[@]}"
