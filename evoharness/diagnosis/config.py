"""Thresholds of the signal catalogue and the routing policy. Each field is documented."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evoharness.diagnosis.routing import DEFAULT_CEILING, DEFAULT_ROUTING, check_routing


class DiagnosisConfig(BaseModel):

    model_config = ConfigDict(allow_inf_nan=False)  # inf, nan (TOML reads 1e999 as inf): refused
    healthy_threshold: float = Field(
        1.0, ge=0.0, le=1.0,
        description="A trajectory whose score reaches this is Healthy (its signals are still recorded).",
    )
    poor_delivery_threshold: float = Field(
        1.0, ge=0.0, le=1.0,
        description="A delivered trajectory scoring below this fires F4.poor_delivery.",
    )
    repeat_min: int = Field(
        3, ge=2, description="F3.repeated_action fires when one tool call (same name and canonical "
        "arguments) occurs at least this many times within `repeat_window` assistant turns.",
    )
    repeat_window: int = Field(6, ge=2, description="Window (assistant turns) for repeated_action.")
    friction_min: int = Field(
        2, ge=1, description="Friction (a rejection, a tool error) is consequential -- it fires -- at the "
        "first occurrence that starts this many consecutive assistant turns hitting friction, or that the "
        "run ended on, unless the agent later got past it (a later call of the same tool, for a shell tool of the "
        "same program, went through; after "
        "a format rejection, any accepted action). A rejection fixed on the next turn never fires (1: every "
        "occurrence the agent never got past fires).",
    )
    step_budget: int | None = Field(
        None, description="If set, a trajectory with at least this many assistant turns and no "
        "delivery fires F3.step_budget_exhausted even without a budget_exhausted event.",
    )
    unbacked_min_len: int = Field(
        4, ge=1, description="Shortest token (id, number, name) F1.unbacked_claim checks.",
    )
    unbacked_min: int = Field(
        1, ge=1, description="F1.unbacked_claim fires when at least this many tokens of the final "
        "answer appear in no tool result, not in the task and not in any user message.",
    )
    entity_claims: bool = Field(
        False, description="F1.contradicted_claim: read every reply of a failed run for an amount, date, id, "
        "count or tracking number about an entity that contradicts the latest tool result about it. Off by "
        "default: it costs about a plain JSON parse of the traces again (labelling would pass 3x a parse).",
    )
    outcome_claims: bool = Field(
        False, description="F1.misstated_outcome: read a failed run's final answer for what it says of the run's own "
        "last write -- that it failed, that it went through, an amount, a status -- against the write's result. Off by "
        "default: it costs about 30 M instructions per 200 tau-bench runs (+8% of labelling).",
    )
    routing: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_ROUTING),
        description="Lever per failure class (harness | weights | none); a partial table overrides the "
        "defaults (healthy: none, F1: weights, F2: harness, F3: harness, F4: weights, E: none -- environment "
        "faults go to neither lever) class by class.",
    )
    ceiling_process_share: float = Field(
        DEFAULT_CEILING, ge=0.0, le=1.0,
        description="The ceiling: when the harness-lever (process) share of all trajectories falls below "
        "this, `diagnose` recommends weight training and a run's anchor ends the run.",
    )

    @field_validator("routing")
    @classmethod
    def _routing(cls, v: dict[str, str]) -> dict[str, str]:
        return check_routing(v)
