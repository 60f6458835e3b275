#!/usr/bin/env bash
# Install skillrl with its test tools, start the servers the store tests use (PostgreSQL and a
# Chroma server, on loopback), and run the tests. Exits non-zero if any test fails or if no
# test ran.
#   bash scripts/test.sh               # every test (what CI runs)
#   bash scripts/test.sh fast          # the fast tier: every test not marked slow
#   bash scripts/test.sh [fast] ARGS   # extra pytest arguments, e.g. tests/envs -x
set -euo pipefail
cd "$(dirname "$0")/.."
tier=()
if [ "${1:-}" = "fast" ]; then
  shift
  tier=(-m "not slow")
fi
SKILLRL_INSTALL_QUIET=1 bash scripts/install.sh dev  # CI logs: no pip progress
# shellcheck source=scripts/services.sh
source scripts/services.sh
start_test_services
trap stop_test_services EXIT
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
python3 -m pytest "${tier[@]}" "$@"
