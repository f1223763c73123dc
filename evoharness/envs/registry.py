"""The environments: spec prefix -> `EnvEntry` (how to build one from its spec string).

A spec is ``<name>`` or ``<name>:<rest>``; the entry's ``build`` gets the whole spec. Each entry
builds from its own module, which imports its optional dependency (AgentDojo, tau2-bench) only when
an environment is built, so registering costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evoharness.envs import agentdojo_env, bfcl_env, synthetic, tau2_env
from evoharness.envs.base import Environment
from evoharness.registry import Registry


@dataclass(frozen=True)
class EnvEntry:
    grammar: str  # the spec forms, for help and errors
    summary: str
    example: str  # a spec that builds (used by the registry's test)
    build: Callable[[str], Environment]
    user_model: Callable[[str], str | None] = lambda spec: None  # the networked simulated user's model spec


ENVIRONMENTS: Registry[EnvEntry] = Registry("environment", "env")

ENVIRONMENTS.register("synthetic", EnvEntry(
    grammar="synthetic", summary="built-in deterministic environment (fast tests, no dependencies)",
    example="synthetic", build=synthetic.from_spec))
ENVIRONMENTS.register("agentdojo", EnvEntry(
    grammar="agentdojo:<suite>[@<version>]",
    summary="an AgentDojo suite (workspace, travel, banking, slack), utility tasks only",
    example="agentdojo:workspace", build=agentdojo_env.from_spec))
ENVIRONMENTS.register("tau2", EnvEntry(
    grammar="tau2:<domain>[?user=<scripted | openai:URL#model>]",
    summary="a tau2-bench domain (retail, airline) with a scripted or simulated customer",
    example="tau2:retail", build=tau2_env.from_spec, user_model=tau2_env.user_model_of))
ENVIRONMENTS.register("bfcl", EnvEntry(
    grammar="bfcl:<multi_turn_base | multi_turn_miss_func | multi_turn_miss_param | multi_turn_long_context>",
    summary="a BFCL v4 multi-turn category, offline: BFCL's simulators, pre-scripted turns, state checker",
    example="bfcl:multi_turn_base", build=bfcl_env.from_spec))


def entry_for(spec: str) -> EnvEntry:
    """The entry of ``spec``'s prefix (an `InputError` listing the environments when unknown)."""
    return ENVIRONMENTS.get(spec.partition(":")[0])
