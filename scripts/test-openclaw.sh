#!/usr/bin/env sh
# npm run test:openclaw: the real OpenClaw end to end (test/openclaw/), installing OpenClaw into
# DATA_DIR/openclaw first when it is missing. Not part of `npm test`.
set -eu
HERE="$(cd "$(dirname "$0")/.." && pwd)"
DATA_DIR="${DATA_DIR:-$HERE/data}"
export DATA_DIR
if [ ! -e "$DATA_DIR/openclaw/node_modules/openclaw/openclaw.mjs" ]; then sh "$HERE/scripts/install-openclaw.sh"; fi
cd "$HERE"
OPENCLAW_TEST_DATA_DIR="$DATA_DIR" exec node_modules/.bin/vitest run --config test/openclaw/vitest.config.ts "$@"
