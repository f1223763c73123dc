#!/usr/bin/env bash
# Install everything evoharness needs on a fresh Debian machine: system packages
# (bubblewrap, git) and a virtual environment in .venv with the package and its test tools.
# Progress, one line per step (and a line every 30 s while a step runs), goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
STEP_PREFIX=setup

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
command -v git >/dev/null 2>&1 || need_apt+=(git)
if [ ${#need_apt[@]} -gt 0 ]; then
  step "apt-get install ${need_apt[*]}" \
    as_root sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${need_apt[*]}"
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || step "create .venv" "$PY" -m venv .venv
step "upgrade pip in .venv" .venv/bin/python -m pip install --upgrade pip
# -v: the log shows what is being collected and built, which the progress lines quote
step "install evoharness and its dev tools into .venv (pip -e \".[dev]\"; a few minutes the first time)" \
  .venv/bin/python -m pip install -v -e ".[dev]"
# BFCL's offline parts (data, API simulators, checker) without its declared dependencies (torch, every
# provider SDK); pinned: the bfcl:<category> environment reads its data files and checker (pyproject [bfcl])
step "install bfcl-eval 2026.3.23 (--no-deps) into .venv" \
  .venv/bin/python -m pip install --no-deps "bfcl-eval==2026.3.23"
# the chat templates trl and axolotl ship (tests/datasets/test_datasets_chat_templates.py renders exports with them):
# their wheels only, downloaded and never installed (either pulls torch), read as zip files; pinned
step "download the trl 1.16.0 and axolotl 0.19.0 wheels into .venv/chat-templates (not installed)" \
  .venv/bin/python -m pip download --no-deps -d .venv/chat-templates "trl==1.16.0" "axolotl==0.19.0"
echo "setup: done: .venv/bin/evoharness is the CLI (or run \`source .venv/bin/activate\` first to type \`evoharness\`)" >&2
