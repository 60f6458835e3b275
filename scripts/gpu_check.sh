#!/usr/bin/env bash
# A first GPU check in one command: nvidia-smi, the GRPO update in fp32/TF32/bf16 (full and
# LoRA), generation and scoring at batch 1-256, WebShop rollouts, one `skillrl train` cycle, the
# GPU-marked tests and the vLLM import, each step under `timeout`; a failing step is logged and
# the next one runs. Needs no network: without the embedded weights it measures a
# SmolLM2-135M-shaped model with random weights, and says so.
#   bash scripts/gpu_check.sh                                   # on one NVIDIA GPU, < 5 minutes
#   bash scripts/gpu_check.sh --small                           # tiny sizes, also on a CPU
#   bash scripts/gpu_check.sh --out docs/results/gpu_check.json # keep the figures, then
#   python benchmarks/render_results.py                         # renders them into results.md
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
exec "${PYTHON:-python3}" benchmarks/bench_gpu_check.py "$@"
