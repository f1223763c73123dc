"""Task environments behind one small protocol (`evoharness.envs.base.Environment`).

``get_environment(spec)`` builds one from a spec string:

- ``"synthetic"`` -- the built-in deterministic environment (fast tests, no dependencies);
- ``"agentdojo:<suite>"`` or ``"agentdojo:<suite>@<version>"`` -- an AgentDojo suite
  (``workspace``, ``travel``, ``banking``, ``slack``; default version ``v1.2.2``), utility tasks only;
- ``"tau2:<domain>"`` or ``"tau2:<domain>?user=<spec>"`` -- a tau2-bench domain (``retail``, ``airline``);
  the customer is the offline scripted user, or tau2's user simulator over ``<spec>`` (``openai:URL#model``).

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
    if kind == "tau2":
        from evoharness.envs.tau2_env import Tau2Env

        domain, _, query = rest.partition("?")
        user = "scripted"
        if query:
            key, eq, value = query.partition("=")
            if key != "user" or not eq or not value:
                raise InputError("env", f"{spec!r}: the only option is ?user=<scripted | openai:URL#model>")
            user = value
        if not domain:
            raise InputError("env", f"{spec!r}: name a domain, e.g. tau2:retail")
        return Tau2Env(domain, user)
    raise InputError("env", f"unknown environment {spec!r} (synthetic, agentdojo:<suite>, tau2:<domain>)")


__all__ = ["get_environment"]
