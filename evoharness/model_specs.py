"""Model specs: one grammar, ``<scheme>:<rest>``, for the agent's model and the roles' model.

`MODELS` maps a scheme to its entry: the spec forms, and how to build the agent's chat model
(``agent(spec, seed)``) and the roles' langchain chat model (``role(spec, roles_config)``) from it.
A scheme that serves only one of the two says so in the error, and an error lists only the forms of the setting
it is about (``run.model``: the agent's; ``roles.model``: the roles'). Nothing here makes a request.

- ``standin:weak`` / ``standin:strong`` -- the offline stand-in that reads the harness (agent).
- ``scripted:weak`` / ``scripted:oracle`` -- seeded scripted agent models (agent); ``scripted:FILE.json``
  -- a JSON list of replies played in order (roles).
- ``openai:URL#model`` -- an OpenAI-compatible endpoint (agent and roles); for the roles also
  ``openai:MODEL`` with ``roles.base_url`` (or the OpenAI API). For the agent,
  ``openai:URL#model?temperature=T`` samples at ``T`` (default 0; ``with_temperature`` writes it from
  ``run.temperature`` / ``--temperature``): the spec is the model's identity in trajectories and the rollout
  cache, so rollouts at another temperature are never taken for these.
- ``gateway:SOCKET?rollout=TOKEN#model`` -- the model gateway over a Unix socket (agent, written by the
  executor for one rollout).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoharness.errors import InputError
from evoharness.registry import Registry


@dataclass(frozen=True)
class ModelScheme:
    summary: str
    agent_forms: str = ""  # the spec forms that build the agent's model ("": none), for help and errors
    role_forms: str = ""  # the spec forms that build the roles' model ("": none)
    agent: Callable[[str, int], Any] | None = None  # (spec, seed) -> agent ChatModel
    role: Callable[[str, Any], Any] | None = None  # (spec, RolesConfig) -> langchain chat model

    @property
    def grammar(self) -> str:
        """Every form, each with the side that takes it."""
        return ", ".join(f"{forms} ({side})" for forms, side in ((self.agent_forms, "agent"),
                                                                 (self.role_forms, "roles")) if forms)


def _forms(side: str) -> str:
    """The spec forms of every scheme that builds ``side``'s model ("agent" | "roles")."""
    return "; ".join(e.agent_forms if side == "agent" else e.role_forms for _, e in MODELS.items()
                     if (e.agent if side == "agent" else e.role))


MODELS: Registry[ModelScheme] = Registry("model scheme", "model")

# offline agent models: seeded, handed the task's reference solution (``bind_task``); with a sandbox they
# are served host-side behind the model gateway (sandbox/gateway_standin.py), never inside the sandbox
OFFLINE_PREFIXES = ("standin:", "scripted:")


def is_offline(spec: str) -> bool:
    return spec.startswith(OFFLINE_PREFIXES)


def scheme_of(spec: str, option: str, side: str) -> ModelScheme:
    """``spec``'s scheme; InputError naming ``side``'s forms (agent | roles) for a spec of no scheme."""
    scheme, sep, rest = spec.partition(":")
    if sep and rest and scheme in MODELS:
        return MODELS.get(scheme)
    raise InputError(option, f"unknown model spec {spec!r} (one of: {_forms(side)})")


TEMPERATURE = "?temperature="  # after an openai: agent spec's #model
MAX_TEMPERATURE = 2.0  # OpenAI's range is 0 to 2


def split_temperature(spec: str) -> tuple[str, float | None]:
    """(``spec`` without ``?temperature=T``, T or None when it names none). InputError for a T that is not a
    number from 0 to 2, or a temperature on a spec other than ``openai:URL#model``."""
    base, sep, raw = spec.partition(TEMPERATURE)
    if not sep:
        return spec, None
    if not base.startswith("openai:") or "#" not in base:
        raise InputError("model", f"{spec!r}: a temperature is for an openai:URL#model agent spec")
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_TEMPERATURE:
        raise InputError("model", f"{spec!r}: temperature must be a number from 0 to {MAX_TEMPERATURE:g}, "
                         f"not {raw!r}")
    return base, value


def with_temperature(spec: str, temperature: float | None, option: str = "--temperature") -> str:
    """``spec`` sampling at ``temperature`` (None: as ``spec`` says; 0 adds nothing, so the default spec and
    everything keyed by it stay as they were). InputError for a value outside 0..2, a spec that is not
    ``openai:URL#model`` (the offline models do not sample), or one already naming another temperature."""
    base, named = split_temperature(spec)
    if temperature is None:
        return spec
    if not 0 <= temperature <= MAX_TEMPERATURE:  # (NaN too)
        raise InputError(option, f"must be 0 to {MAX_TEMPERATURE:g}, not {temperature:g}")
    if named is not None and named != temperature:
        raise InputError(option, f"{temperature:g}, but the model spec {spec!r} says {named:g}")
    if temperature == 0:
        return base
    if not base.startswith("openai:") or "#" not in base:
        raise InputError(option, f"{temperature:g} is for an openai:URL#model agent model; {spec!r} does not "
                         "sample (give it 0, or no temperature)")
    return f"{base}{TEMPERATURE}{float(temperature)!r}"


def model_name(spec: str) -> str:
    """The model's name in ``spec``: what follows ``#`` (without ``?temperature=T``), else ``spec``."""
    base = spec.partition(TEMPERATURE)[0]
    return base.rpartition("#")[2] or base


def agent_scheme(spec: str, option: str = "model") -> ModelScheme:
    """``spec``'s scheme, one that builds an agent model (InputError for an unknown or roles-only spec); builds
    nothing."""
    entry = scheme_of(spec, option, "agent")
    if entry.agent is None:
        raise InputError(option, f"{spec!r} is a roles model ({entry.role_forms}); the agent takes {_forms('agent')}")
    return entry


def role_scheme(spec: str) -> ModelScheme:
    """``spec``'s scheme, one that builds the roles' model (InputError for an unknown or agent-only spec); builds
    nothing."""
    entry = scheme_of(spec, "roles.model", "roles")
    if entry.role is None:
        raise InputError("roles.model", f"{spec!r} is an agent model ({entry.agent_forms}); the roles take "
                         f"{_forms('roles')}")
    return entry


def agent_model(spec: str, seed: int) -> Any:
    """The agent's chat model for ``spec`` (InputError for an unknown or roles-only spec)."""
    return agent_scheme(spec).agent(spec, seed)


def role_model(spec: str, cfg: Any) -> Any:
    """The roles' langchain chat model for ``spec`` (InputError for an unknown or agent-only spec)."""
    return role_scheme(spec).role(spec, cfg)


# -- standin / scripted -----------------------------------------------------------------------
def _standin_agent(spec: str, seed: int) -> Any:
    from evoharness.agent.standin import StandInModel, strong_model

    builders = {"standin:weak": StandInModel, "standin:strong": strong_model}
    if spec not in builders:
        raise InputError("model", f"unknown stand-in model {spec!r} (one of: {', '.join(builders)})")
    return builders[spec](seed)



def _scripted_agent(spec: str, seed: int) -> Any:
    from evoharness.agent.scripted import WeakScriptedModel, oracle_model

    builders = {"scripted:weak": WeakScriptedModel, "scripted:oracle": oracle_model}
    if spec not in builders:
        raise InputError("model", f"unknown scripted agent model {spec!r} (one of: {', '.join(builders)})")
    return builders[spec](seed)


def _scripted_role(spec: str, cfg: Any) -> Any:
    from evoharness.roles.scripted import ScriptedChatModel

    path = Path(spec.removeprefix("scripted:"))
    try:
        replies = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(str(path), f"cannot read scripted replies: {e}") from None
    if not isinstance(replies, list):
        raise InputError(str(path), "scripted replies must be a JSON list")
    return ScriptedChatModel(replies=replies)


# -- openai ---------------------------------------------------------------------------------
def _openai_agent(spec: str, seed: int) -> Any:
    from evoharness.agent.models import openai_model

    return openai_model(spec, seed)


def _openai_role(spec: str, cfg: Any) -> Any:
    rest = spec.removeprefix("openai:")
    url, sep, model = rest.partition("#")
    base_url = (url if sep else None) or cfg.base_url
    model = model if sep else rest
    if not model:
        raise InputError("roles.model", f"{spec!r}: expected openai:URL#model or openai:MODEL")
    key = os.environ.get(cfg.api_key_env)
    if not key and not base_url:
        raise InputError("roles.model", f"{cfg.api_key_env} is not set (or use openai:URL#model, or set "
                         "roles.base_url, for a local OpenAI-compatible server)")
    from evoharness.roles.chat import OpenAIChat  # deadline-bounded, cancels instead of re-sending

    return OpenAIChat(model, base_url or "https://api.openai.com/v1", key or "", max_tokens=cfg.max_tokens,
                      deadline_s=cfg.deadline_s, temperature=cfg.temperature)


# -- gateway --------------------------------------------------------------------------------
def _gateway_agent(spec: str, seed: int) -> Any:
    from evoharness.agent.models import gateway_model

    return gateway_model(spec, seed)


MODELS.register("standin", ModelScheme(
    agent_forms="standin:weak | standin:strong",
    summary="the offline stand-in agent model that reads the harness (docs/agent.md)",
    agent=_standin_agent))
MODELS.register("scripted", ModelScheme(
    agent_forms="scripted:weak | scripted:oracle", role_forms="scripted:FILE.json",
    summary="seeded stand-in agent models; replies played in order for the roles",
    agent=_scripted_agent, role=_scripted_role))
MODELS.register("openai", ModelScheme(
    agent_forms="openai:URL#model", role_forms="openai:URL#model | openai:MODEL with roles.base_url",
    summary="an OpenAI-compatible endpoint",
    agent=_openai_agent, role=_openai_role))
MODELS.register("gateway", ModelScheme(
    agent_forms="gateway:SOCKET?rollout=TOKEN#model",
    summary="the model gateway over a Unix socket (the executor writes it for one rollout)",
    agent=_gateway_agent))
