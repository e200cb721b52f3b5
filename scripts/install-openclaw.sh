#!/usr/bin/env sh
# Installs the OpenClaw agent runtime into DATA_DIR/openclaw, where the local hosting driver looks
# for it when AGENT_RUNTIME=openclaw (it runs `openclaw gateway run` per agent, configured through
# OPENCLAW_CONFIG_PATH and OPENCLAW_GATEWAY_TOKEN: docs/agents.md "OpenClaw").
#
# OpenClaw needs Node >= 24.16: run this through npm (`npm exec -- sh scripts/install-openclaw.sh`
# or an npm script) so the repository's Node 24 from node_modules/.bin comes first on PATH.
# About 650 MB and 330 packages. OPENCLAW_VERSION picks the version (default: 2026.9.6, the one the
# platform's OpenClaw configuration is checked against by npm run test:openclaw; OpenClaw's
# configuration schema is strict, so a newer one may refuse a key: try it with test:openclaw).
#
#   DATA_DIR=./data sh scripts/install-openclaw.sh      (npm run runtime:openclaw)
#
# Exit 3: the registry did not answer (said in one line); a complete install leaves
# DATA_DIR/openclaw/.installed (OpenClaw's version), which an interrupted one does not.
set -eu

DATA_DIR="${DATA_DIR:-./data}"
VERSION="${OPENCLAW_VERSION:-2026.9.6}"
TARGET="$DATA_DIR/openclaw"

# prefer the repository's Node 24 when it is installed
HERE="$(cd "$(dirname "$0")/.." && pwd)"
if [ -x "$HERE/node_modules/.bin/node" ]; then PATH="$HERE/node_modules/.bin:$PATH"; export PATH; fi

if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 24 || (a === 24 && b >= 16) ? 0 : 1)'; then
  echo "install-openclaw: OpenClaw needs Node >= 24.16 (found $(node --version))" >&2
  exit 1
fi

# an unreachable registry is said in one line, at once, rather than after npm's minutes of retries
# (exit 3: .ci/run then skips its OpenClaw pass)
if command -v timeout >/dev/null 2>&1 && ! timeout 30 npm view "openclaw@$VERSION" version >/dev/null 2>&1; then
  echo "install-openclaw: the npm registry ($(npm config get registry)) did not answer for openclaw@$VERSION within 30 s (or has no such version)" >&2
  exit 3
fi

mkdir -p "$TARGET"
rm -f "$TARGET/.installed"
[ -f "$TARGET/package.json" ] || printf '{ "name": "openclaw-runtime", "private": true }\n' > "$TARGET/package.json"
npm install --prefix "$TARGET" --no-audit --no-fund "openclaw@$VERSION"

BIN="$TARGET/node_modules/.bin/openclaw"
if [ ! -e "$BIN" ]; then echo "install-openclaw: $BIN missing after install" >&2; exit 1; fi
INSTALLED="$(node "$BIN" --version)" || { echo "install-openclaw: $BIN --version failed" >&2; exit 1; }
# a complete install (an interrupted one has no such file: .ci/run installs again)
echo "$INSTALLED" > "$TARGET/.installed"
echo "$INSTALLED installed in $TARGET"
echo "Run agents with it: AGENT_RUNTIME=openclaw DATA_DIR=$DATA_DIR npm start"
