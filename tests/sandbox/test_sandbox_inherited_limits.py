"""The sandbox's rlimits under a parent that holds lower hard limits (a service started under `ulimit -v`, a
container's limits): prlimit cannot raise a hard limit for an unprivileged process, so the limits asked for are
capped at the parent's own, which are the stricter ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from evoharness.sandbox.base import prlimit_prefix
from evoharness.sandbox.models import Limits

pytestmark = pytest.mark.skipif(shutil.which("prlimit") is None, reason="prlimit (util-linux) not installed")

CHILD = r"""
import json, os, resource, subprocess, sys
from evoharness.sandbox.base import prlimit_prefix
from evoharness.sandbox.models import Limits
low = 2 << 30
resource.setrlimit(resource.RLIMIT_AS, (low, low))  # below Limits().memory_mb (3072 MiB)
if os.geteuid() == 0:  # as root prlimit may raise any limit: be the unprivileged user a service runs as
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
prefix = prlimit_prefix(Limits())
done = subprocess.run(prefix + ["/bin/sh", "-c", "ulimit -v"], capture_output=True, text=True)
print(json.dumps({"prefix": prefix, "rc": done.returncode, "out": done.stdout, "err": done.stderr}), flush=True)
print(json.dumps(prlimit_prefix(Limits(), inherit=False)))
"""


def test_a_sandbox_under_a_lower_hard_memory_limit_runs_its_command_within_it():
    """Before: 'prlimit: failed to set the AS resource limit: Operation not permitted', exit 1, for every command
    (every rollout recorded as failed); now the command runs under the parent's 2 GiB."""
    env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=60)
    seen = json.loads(done.stdout.splitlines()[0])
    assert seen["rc"] == 0, seen["err"]
    assert f"--as={2 << 30}:{2 << 30}" in seen["prefix"]
    assert int(seen["out"]) == (2 << 30) // 1024  # ulimit -v says KiB
    assert done.returncode == 0, done.stderr
    docker = json.loads(done.stdout.splitlines()[1])
    assert f"--as={3072 << 20}:{3072 << 20}" in docker  # a container's limits are the runtime's: as asked


def test_limits_below_the_parents_are_passed_as_asked():
    """The cap only lowers: limits under the parent's hard limits are passed as asked."""
    limits = Limits(memory_mb=64, cpu_seconds=5, pids=32, file_mb=8)
    expected = ["prlimit", f"--as={64 << 20}:{64 << 20}", "--cpu=5:7", "--nproc=32:32", f"--fsize={8 << 20}:{8 << 20}",
                "--core=0:0", "--"]
    assert prlimit_prefix(limits) == expected
    assert prlimit_prefix(limits, inherit=False) == expected
