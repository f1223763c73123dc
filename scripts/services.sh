#!/usr/bin/env bash
# Start the services the test suite needs (none yet beyond what setup.sh installs).
set -euo pipefail
