"""Settings section `[roles]`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

StructuredMethod = Literal["json_schema", "function_calling", "json_text"]


class RolesConfig(BaseModel):
    """The analyst, critic and engineer roles. Each field carries a description."""

    kind: Literal["playbook", "llm"] = Field(
        "playbook", description="'playbook' (no LLM: known signals mapped to standard fixes) or 'llm'.")
    max_candidates_per_round: int = Field(
        2, ge=1, description="Patterns the analyst returns per round (each may become one candidate).")
    max_retries: int = Field(
        2, ge=0, description="LLM roles: retries after an invalid reply (bad JSON, wrong schema, rejected "
        "edit) before the role gives up with a RoleError.")
    model: str = Field(
        "openai:gpt-4o-mini", description="LLM roles' chat model (the grammar of `evoharness.model_specs`): "
        "'openai:URL#model', 'openai:MODEL' (langchain-openai; "
        "base_url/api_key_env below) or 'scripted:FILE.json' (a JSON list of replies, for offline runs).")
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint for the roles' model.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature of the roles' model.")
    timeout_s: float = Field(120.0, gt=0, description="Per-request timeout of the roles' model.")
    structured_methods: list[StructuredMethod] = Field(
        default_factory=lambda: ["json_schema", "function_calling", "json_text"],
        description="Structured-output methods tried in order; a model that does not support one falls "
        "back to the next ('json_text' parses JSON out of the reply text and always works).")
    min_support: int = Field(
        2, ge=1, description="A pattern needs at least this many trajectories; the critic sends back or "
        "refuses thinner ones.")
    max_evidence: int = Field(6, ge=1, description="Evidence items kept per pattern.")
    max_quote_chars: int = Field(300, ge=40, description="Longest quote from a trace put in a prompt.")
    max_trajectories_in_prompt: int = Field(
        12, ge=1, description="LLM analyst: trajectories shown in its prompt (the most common "
        "signals first).")
    raise_max_steps: int = Field(
        4, ge=0, description="Playbook: how much a budget/no-delivery fix raises policies.max_steps "
        "(0 = never). Raising it alone is flagged as accommodation by the critic.")
    max_steps_cap: int = Field(30, ge=1, description="Playbook: never raise max_steps above this.")
