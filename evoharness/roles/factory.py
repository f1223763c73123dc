"""`make_roles`: the (analyst, critic, engineer) triple the graph runs, playbook or LLM-backed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from evoharness.errors import InputError
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
    """The chat model ``cfg.model`` names: 'openai:MODEL' (ChatOpenAI) or 'scripted:FILE.json'."""
    scheme, _, rest = cfg.model.partition(":")
    if scheme == "scripted" and rest:
        from evoharness.roles.scripted import ScriptedChatModel

        path = Path(rest)
        try:
            replies = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise InputError(str(path), f"cannot read scripted replies: {e}") from None
        if not isinstance(replies, list):
            raise InputError(str(path), "scripted replies must be a JSON list")
        return ScriptedChatModel(replies=replies)
    if scheme == "openai" and rest:
        key = os.environ.get(cfg.api_key_env)
        if not key and not cfg.base_url:
            raise InputError("roles.model", f"{cfg.api_key_env} is not set (or set roles.base_url for a "
                             "local OpenAI-compatible server)")
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=rest, temperature=cfg.temperature, base_url=cfg.base_url,
                          api_key=key or "not-needed", timeout=cfg.timeout_s, max_retries=2)
    raise InputError("roles.model", f"unknown model spec {cfg.model!r}: use 'openai:MODEL' or "
                     "'scripted:FILE'")
