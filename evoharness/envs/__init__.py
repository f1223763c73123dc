"""Task environments behind one small protocol (`evoharness.envs.base.Environment`).

``get_environment(spec)`` builds one from a spec string:

- ``"synthetic"`` -- the built-in deterministic environment (fast tests, no dependencies);
- ``"agentdojo:<suite>"`` or ``"agentdojo:<suite>@<version>"`` -- an AgentDojo suite
  (``workspace``, ``travel``, ``banking``, ``slack``; default version ``v1.2.2``), utility tasks only.

Imports are lazy: importing this package does no work.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evoharness.envs.base import Environment


@lru_cache(maxsize=8)
def get_environment(spec: str) -> Environment:
    """The environment for ``spec`` (cached per process; per-rollout state comes from ``reset``)."""
    from evoharness.errors import InputError

    kind, _, rest = spec.partition(":")
    if kind == "synthetic":
        from evoharness.envs.synthetic import SyntheticEnv

        return SyntheticEnv()
    if kind == "agentdojo":
        from evoharness.envs.agentdojo_env import AgentDojoEnv

        suite, _, version = rest.partition("@")
        if not suite:
            raise InputError("env", f"{spec!r}: name a suite, e.g. agentdojo:workspace")
        return AgentDojoEnv(suite, version or None)
    raise InputError("env", f"unknown environment {spec!r} (synthetic, agentdojo:<suite>)")


__all__ = ["get_environment"]
