"""Settings section `[roles]`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evoharness.verification.config import MAX_RETRIES

StructuredMethod = Literal["json_schema", "json_object_schema", "function_calling", "json_text"]


class RolesConfig(BaseModel):
    """The analyst, critic and engineer roles. Each field carries a description."""

    model_config = ConfigDict(allow_inf_nan=False)  # inf, nan (TOML reads 1e999 as inf): refused

    kind: Literal["playbook", "llm"] = Field(
        "playbook", description="'playbook' (no LLM: known signals mapped to standard fixes) or 'llm'.")
    max_retries: int = Field(
        2, ge=0, le=MAX_RETRIES, description="LLM roles: retries after an invalid reply (bad JSON, wrong schema, "
        f"rejected edit) before the role gives up with a RoleError (at most {MAX_RETRIES}: each is a model call).")
    model: str = Field(
        "openai:gpt-4o-mini", description="LLM roles' chat model (the grammar of `evoharness.model_specs`): "
        "'openai:URL#model', 'openai:MODEL' (langchain-openai; "
        "base_url/api_key_env below) or 'scripted:FILE.json' (a JSON list of replies, for offline runs).")
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint for the roles' model.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature of the roles' model.")
    deadline_s: float = Field(
        120.0, gt=0,
        description="Per-call deadline (seconds, wall clock) of the roles' model. At the deadline the "
        "streamed request is closed, which stops a llama.cpp server's generation, and the call is not "
        "re-sent: the role fails for this round.")
    max_tokens: int = Field(
        1024, ge=16, description="Most tokens one reply may have (sent with every request). Without a cap a "
        "small model can generate until its context is full.")
    context_tokens: int = Field(
        8192, ge=512, description="The roles' model's context window. A prompt is trimmed (fewer and shorter "
        "trace excerpts, fewer harness files) until it fits in context_tokens - max_tokens, counting about "
        "3 characters per token; one that cannot fit fails the role with a clear error.")
    structured_methods: list[StructuredMethod] = Field(
        default_factory=lambda: ["json_schema", "json_object_schema", "function_calling", "json_text"],
        description="Structured-output methods tried in order: 'json_schema' (OpenAI response_format), "
        "'json_object_schema' (llama.cpp: response_format json_object with a schema, compiled to a grammar), "
        "'function_calling', 'json_text' (JSON parsed out of the reply text; always works). A method the "
        "server refuses (HTTP 400/404/422) is skipped without spending a retry.")
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
