"""Task environments behind one small protocol (`evoharness.envs.base.Environment`).

``get_environment(spec)`` builds one from a spec string:

- ``"synthetic"`` -- the built-in deterministic environment (fast tests, no dependencies);
- ``"agentdojo:<suite>"`` or ``"agentdojo:<suite>@<version>"`` -- an AgentDojo suite
  (``workspace``, ``travel``, ``banking``, ``slack``; default version ``v1.2.2``), utility tasks only;
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

        domain, user = parse_tau2_spec(spec)
        return Tau2Env(domain, user)
    raise InputError("env", f"unknown environment {spec!r} (synthetic, agentdojo:<suite>, tau2:<domain>)")


def parse_tau2_spec(spec: str) -> tuple[str, str]:
    """``tau2:<domain>[?user=<user spec>]`` -> (domain, user spec; ``scripted`` by default).

    The user spec is everything after ``user=`` (it may hold ``?`` and ``#`` itself); it is not checked here.
    """
    from evoharness.errors import InputError

    domain, _, query = spec.removeprefix("tau2:").partition("?")
    user = "scripted"
    if query:
        key, eq, value = query.partition("=")
        if key != "user" or not eq or not value:
            raise InputError("env", f"{spec!r}: the only option is ?user=<scripted | openai:URL#model>")
        user = value
    if not domain:
        raise InputError("env", f"{spec!r}: name a domain, e.g. tau2:retail")
    return domain, user


def user_model_spec(env_spec: str) -> str | None:
    """The ``openai:URL#model`` spec of the model that plays the environment's simulated user (a tau2
    ``?user=openai:...`` customer), or None when the environment has no networked user.

    Raises ``InputError`` for a bad tau2 user spec, and for a ``gateway:`` user spec, which only the
    executor writes (it points at one rollout's account on a running gateway).
    """
    if not env_spec.startswith("tau2:"):
        return None
    from evoharness.envs.tau2_user import check_user_spec
    from evoharness.errors import InputError

    _, user = parse_tau2_spec(env_spec)
    check_user_spec(user)
    if user.startswith("gateway:"):
        raise InputError("env", f"{env_spec!r}: ?user=gateway:... is set by the executor for one rollout; "
                         "pass ?user=openai:URL#model")
    return user if user.startswith("openai:") else None


def with_user_model(env_spec: str, user: str) -> str:
    """``env_spec`` (a tau2 spec) with its simulated user played by ``user`` (e.g. a ``gateway:`` spec)."""
    domain, _ = parse_tau2_spec(env_spec)
    return f"tau2:{domain}?user={user}"


__all__ = ["get_environment", "parse_tau2_spec", "user_model_spec", "with_user_model"]
