#!/usr/bin/env sh
# npm run test:openclaw: the real OpenClaw end to end (test/openclaw/), installing OpenClaw into
# DATA_DIR/openclaw first when it is missing or its install was interrupted. Not part of
# `npm test`; CI (.ci/run) runs it as its own pass with OPENCLAW_TEST_ROUNDS=0 (no start timing).
set -eu
HERE="$(cd "$(dirname "$0")/.." && pwd)"
DATA_DIR="${DATA_DIR:-$HERE/data}"
export DATA_DIR
if [ ! -e "$DATA_DIR/openclaw/node_modules/openclaw/openclaw.mjs" ] || [ ! -e "$DATA_DIR/openclaw/.installed" ]; then
  sh "$HERE/scripts/install-openclaw.sh"
fi
cd "$HERE"
# the repository's Node 24 (OpenClaw needs >= 24.16, and the platform under test runs it with its own Node)
if [ -x "$HERE/node_modules/.bin/node" ]; then PATH="$HERE/node_modules/.bin:$PATH"; export PATH; fi
OPENCLAW_TEST_DATA_DIR="$DATA_DIR" exec node_modules/.bin/vitest run --config test/openclaw/vitest.config.ts "$@"
