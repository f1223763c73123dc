"""`make_roles`: the (analyst, critic, engineer) triple the graph runs, playbook or LLM-backed."""

from __future__ import annotations

from typing import Any

from evoharness.errors import InputError
from evoharness.model_specs import role_model
from evoharness.roles.base import Analyst, Critic, Engineer
from evoharness.roles.config import RolesConfig


def roles_config(settings: Any = None) -> RolesConfig:
    """The `[roles]` section from a full `Settings`, a `RolesConfig`, a dict, or defaults (None)."""
    if settings is None:
        return RolesConfig()
    if isinstance(settings, RolesConfig):
        return settings
    if isinstance(settings, dict):
        return RolesConfig.model_validate(settings.get("roles", settings))
    return getattr(settings, "roles", None) or RolesConfig()


def make_roles(kind: str | None = None, settings: Any = None,
               model: Any = None) -> tuple[Analyst, Critic, Engineer]:
    """Build the three roles. ``kind`` is 'playbook' or 'llm' (None: ``settings.roles.kind``).

    For 'llm', ``model`` is any langchain-core chat model; None builds one from ``roles.model``
    (`build_chat_model`). Nothing touches the network here.
    """
    cfg = roles_config(settings)
    kind = kind or cfg.kind
    if kind == "playbook":
        from evoharness.roles.playbook import PlaybookAnalyst, PlaybookCritic, PlaybookEngineer

        return PlaybookAnalyst(cfg), PlaybookCritic(cfg), PlaybookEngineer(cfg)
    if kind == "llm":
        from evoharness.roles.llm import LLMAnalyst, LLMCritic, LLMEngineer

        model = model if model is not None else build_chat_model(cfg)
        return LLMAnalyst(model, cfg), LLMCritic(model, cfg), LLMEngineer(model, cfg)
    raise InputError("roles.kind", f"unknown role kind {kind!r}: use 'playbook' or 'llm'")


def build_chat_model(cfg: RolesConfig) -> Any:
    """The chat model ``cfg.model`` names (the grammar and schemes: `evoharness.model_specs`): e.g.
    'openai:URL#model', 'openai:MODEL' (with ``roles.base_url``) or 'scripted:FILE.json'."""
    return role_model(cfg.model, cfg)
