#!/usr/bin/env bash
# README command 1: set up on a fresh machine and run the main job on the embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/evoharness demo "$@"
