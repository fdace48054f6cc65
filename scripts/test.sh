#!/usr/bin/env bash
# One command: set up, then check the code (ruff on src, tests, tools and benchmarks; mypy --strict on src/: it
# ships py.typed) and run the whole test suite (unit, integration on the real vLLM CPU server, on llama.cpp's
# llama-server and on a one-node Slurm cluster, e2e; the HTML report in headless Chromium). Only this command
# builds llama-server (once) and installs arctic-inference (vLLM's suffix decoding), Chromium and Slurm.
#
# Those installs (llama-server's build is most of them: about 8 minutes on 2 cores) run in the background at the
# lowest priority, beside the checks, the unit tests and the vLLM tests, which need none of them, on what CPU those
# leave; the tests that use them run last and wait for them (tests/conftest.py `installed`). Their output is
# printed when they are done. Arguments go to pytest, which then runs once, after every install.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test

install_log=$(mktemp)
install_status=$(mktemp -u)  # written, whole, when the installs end: the tests that need them wait for it
# The quick installs first: arctic-inference goes into the venv before any vLLM server starts from it.
engines_setup() {
  scripts/setup-suffix.sh && scripts/setup-browser.sh && scripts/setup-slurm.sh && scripts/setup-llamacpp.sh
}
# The installs' output, as they printed it, once they are done; their status is the command's if they failed.
wait_for_installs() {
  local status=0
  wait "$installs" || status=$?
  cat "$install_log"
  rm -f "$install_log" "$install_status"
  if [ "$status" -ne 0 ]; then
    echo "test: the engines' setup failed (exit $status); its output is above" >&2
    exit "$status"
  fi
}
# Its own process group (set -m), so a check that fails stops the installs with the command.
set -m
nice -n 19 bash -c "$(declare -f engines_setup); engines_setup; s=\$?
  echo \$s >$install_status.part && mv $install_status.part $install_status; exit \$s" >"$install_log" 2>&1 &
installs=$!
set +m
trap 'kill -- -"$installs" 2>/dev/null || true' EXIT

.venv/bin/ruff check src tests tools benchmarks docs/hooks
.venv/bin/mypy
.venv/bin/lint-imports
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
if [ "$#" -gt 0 ]; then
  wait_for_installs
  exec .venv/bin/python -m pytest -q -ra "$@"
fi
unit=0
.venv/bin/python -m pytest -q -ra -n auto tests/unit || unit=$?  # on every core: they are independent
engines=0
SPECMETER_TEST_INSTALLS_STATUS=$install_status SPECMETER_TEST_INSTALLS_PID=$installs \
  .venv/bin/python -m pytest -q -ra tests/e2e tests/integration \
  || engines=$?
wait_for_installs
if [ "$unit" -ne 0 ] || [ "$engines" -ne 0 ]; then
  echo "test: failed (unit tests: exit $unit; integration and e2e tests: exit $engines)" >&2
  exit 1
fi
