#!/usr/bin/env bash
# Debian's Chromium, for the test that renders the HTML report headless. Only the test command needs it;
# the demo never waits for it. Idempotent: nothing to do once /usr/bin/chromium exists.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "setup-browser: no apt-get here; install Chromium so that /usr/bin/chromium exists" >&2
  exit 2
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "setup-browser: installing Debian's chromium (about 30 s)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
