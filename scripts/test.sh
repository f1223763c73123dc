#!/usr/bin/env bash
# README command 2: set up on a fresh machine and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the real-endpoint tests' llama.cpp server and small model (a source build of a few minutes, cached)
bash scripts/install-endpoint.sh
export EVOHARNESS_TEST_ENDPOINT=1
# services.sh starts Docker and PostgreSQL and prints where they are as `export` lines
eval "$(bash scripts/services.sh)"
.venv/bin/ruff check evoharness tests benchmarks
# Bytecode for the project's own modules, once: with PYTHONDONTWRITEBYTECODE=1 in the environment (as on this
# project's machines) every process a test starts -- CLI subprocesses, sandbox fork servers, which see the tree
# read-only -- compiled evoharness from source again (~0.15 CPU-s of ~0.34 to import evoharness.cli, graph and
# diagnosis). A .pyc is checked against its source's mtime and size, so an edited file is compiled afresh.
.venv/bin/python -m compileall -q -j 2 evoharness benchmarks scripts > /dev/null
# EVOHARNESS_TEST_WORKERS=N (default 2; 1: one process): N pytest-xdist processes, whole files to each
# (--dist loadfile keeps a file's module fixtures in one process), slowest files first (tests/conftest.py);
# docs/testing.md says what it measured
workers=${EVOHARNESS_TEST_WORKERS:-2}
case "$workers" in ''|*[!0-9]*|0) echo "error: EVOHARNESS_TEST_WORKERS must be a positive integer, got '$workers'" >&2; exit 2;; esac
parallel=()
if [ "$workers" -gt 1 ]; then parallel=(-n "$workers" --dist loadfile); fi
# A base temporary directory of this run's own: by default every pytest session on the machine shares
# /tmp/pytest-of-$USER, and each new session prunes the older numbered directories there, a long run's own
# included (a parallel run on the shared machine lost its tmp_path that way mid-way). Removed at the end,
# without crossing into a mount a test may have left behind.
basetemp=$(mktemp -d "${TMPDIR:-/tmp}/evoharness-pytest-XXXXXX")
trap 'rm -rf --one-file-system "$basetemp"' EXIT
# the 15 slowest tests are listed at the end (where the time goes on a slow machine)
.venv/bin/python -m pytest --durations=15 --basetemp="$basetemp/t" ${parallel[@]+"${parallel[@]}"} "$@"
