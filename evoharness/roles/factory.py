"""`make_roles`: the (analyst, critic, engineer) triple the graph runs, playbook or LLM-backed."""

from __future__ import annotations

from typing import Any

from evoharness.errors import InputError
from evoharness.model_specs import role_model
from evoharness.roles.base import Analyst, Critic, Engineer
from evoharness.roles.config import RolesConfig
from evoharness.roles.playbook import PlaybookAnalyst, PlaybookCritic, PlaybookEngineer


def make_roles(kind: str | None = None, cfg: RolesConfig | None = None,
               model: Any = None) -> tuple[Analyst, Critic, Engineer]:
    """Build the three roles from the `[roles]` section ``cfg`` (None: defaults). ``kind`` is 'playbook' or
    'llm' (None: ``cfg.kind``).

    For 'llm', ``model`` is any langchain-core chat model; None builds one from ``roles.model``
    (`build_chat_model`). Nothing touches the network here.
    """
    cfg = cfg or RolesConfig()
    kind = kind or cfg.kind
    if kind == "playbook":
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
