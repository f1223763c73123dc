"""Task environments behind one small protocol (`evoharness.envs.base.Environment`).

``get_environment(spec)`` builds one from a spec string; the prefixes are the entries of
`evoharness.envs.registry.ENVIRONMENTS`:

- ``"synthetic"`` -- the built-in deterministic environment (fast tests, no dependencies);
- ``"agentdojo:<suite>"`` or ``"agentdojo:<suite>@<version>"`` -- an AgentDojo suite
  (``workspace``, ``travel``, ``banking``, ``slack``; default version ``v1.2.2``), utility tasks only;
- ``"bfcl:<category>"`` -- a BFCL v4 multi-turn category (``multi_turn_base``, ``multi_turn_miss_func``,
  ``multi_turn_miss_param``, ``multi_turn_long_context``), offline, BFCL's state checker as the score;
- ``"tau2:<domain>"`` or ``"tau2:<domain>?user=<spec>"`` -- a tau2-bench domain (``retail``, ``airline``);
  the customer is the offline scripted user, or tau2's user simulator over ``<spec>`` (``openai:URL#model``;
  inside a sandbox the executor rewrites it to the rollout's ``gateway:SOCKET?rollout=TOKEN#model``).

``user_model_spec(env_spec)`` names the model a networked simulated user needs (the executor routes
it through the model gateway); ``with_user_model`` rewrites a spec to another user model.

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
    from evoharness.envs.registry import entry_for

    return entry_for(spec).build(spec)


def user_model_spec(env_spec: str) -> str | None:
    """The ``openai:URL#model`` spec of the model that plays the environment's simulated user (a tau2
    ``?user=openai:...`` customer), or None when the environment has no networked user.

    Raises ``InputError`` for a bad user spec, and for a ``gateway:`` user spec, which only the
    executor writes (it points at one rollout's account on a running gateway).
    """
    from evoharness.envs.registry import ENVIRONMENTS

    kind = env_spec.partition(":")[0]
    # an unregistered kind has no simulated user here (building it is where an unknown env is an error)
    return ENVIRONMENTS.get(kind).user_model(env_spec) if kind in ENVIRONMENTS else None


def parse_tau2_spec(spec: str) -> tuple[str, str]:
    from evoharness.envs.tau2_env import parse_tau2_spec as parse

    return parse(spec)


def with_user_model(env_spec: str, user: str) -> str:
    """``env_spec`` (a tau2 spec) with its simulated user played by ``user`` (e.g. a ``gateway:`` spec)."""
    domain, _ = parse_tau2_spec(env_spec)
    return f"tau2:{domain}?user={user}"


__all__ = ["get_environment", "parse_tau2_spec", "user_model_spec", "with_user_model"]
