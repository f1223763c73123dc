"""LangGraph state of a run. Every list field declares its reducer; every JSON field has a registered type.

Large data (trajectories) never lives in the state: the state holds ids and
summaries, the trajectories live in the run's JSONL store (idempotent by id).

The checkpointer stores plain JSON (so checkpoints of older versions load unchanged); `STATE_TYPES`
names the pydantic type of every JSON field, and nodes read the state through `Typed` -- the one
boundary where JSON becomes typed values. A stored value that does not fit its type is one
`EvoharnessError` naming the field (a checkpoint from an incompatible version), never a KeyError later.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict, TypeVar

from pydantic import BaseModel, ValidationError

from evoharness.errors import EvoharnessError
from evoharness.graph.records import CompositionEntry, Dropped, Entry, Merged, Rejected, RoundSummary, Splits
from evoharness.graph.source import RunLedger
from evoharness.harness_repo.models import Candidate, Verdict
from evoharness.roles.models import Pattern, Review
from evoharness.verification.anchors import Anchor
from evoharness.verification.guards import GuardBook

M = TypeVar("M", bound=BaseModel)


def replace(_old: Any, new: Any) -> Any:
    return new


class AnchorEntry(BaseModel):
    """The state's ``anchor`` (and each of ``anchors``): main's measurement, the bar of the next round."""

    commit: str
    round: int
    k: int
    tasks: list[str]
    trajectory_ids: list[str]
    mean: float
    sigma: float
    composition: dict[str, Any]
    anchor: dict[str, Any]  # the verifier's `Anchor`, serialised

    @classmethod
    def of(cls, state: dict[str, Any]) -> AnchorEntry:
        return Typed(state).anchor

    def measured(self) -> Anchor:
        return Anchor.model_validate(self.anchor)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


# field -> the type of its value (of each item, for list fields); scalar fields are typed in RunState
STATE_TYPES: dict[str, type[BaseModel]] = {
    "anchor": AnchorEntry, "anchors": AnchorEntry, "before": Splits, "after": Splits,
    "composition": CompositionEntry, "ledger": RunLedger, "patterns": Pattern, "reviews": Review,
    "candidates": Candidate, "verdicts": Verdict, "dropped": Dropped, "rounds": RoundSummary,
    "merged": Merged, "rejected": Rejected, "guards": GuardBook,
}


def dump(value: BaseModel) -> dict[str, Any]:
    """A typed value as the state stores it (an `Entry` with its own keys, another model whole)."""
    return value.dump() if isinstance(value, Entry) else value.model_dump(mode="json")


def dump_all(values: list[Any]) -> list[dict[str, Any]]:
    return [dump(v) for v in values]


class Typed:
    """The run's state read through `STATE_TYPES` (validated on each read: nodes read a field once)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.raw = state

    @staticmethod
    def of(state: dict[str, Any] | Typed) -> Typed:
        return state if isinstance(state, Typed) else Typed(state)

    def _check(self, field: str, model: type[M], value: Any) -> M:
        assert STATE_TYPES[field] is model, f"{field} is registered as {STATE_TYPES[field].__name__}"
        try:
            return model.model_validate(value)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise EvoharnessError(f"run state: {field!r} is not a {model.__name__} ({where}: {err['msg']}); "
                                  "a checkpoint written by an incompatible version? start a new run") from None

    def one(self, field: str, model: type[M]) -> M | None:
        value = self.raw.get(field)
        return None if value is None else self._check(field, model, value)

    def many(self, field: str, model: type[M]) -> list[M]:
        return [self._check(field, model, v) for v in self.raw.get(field) or []]

    @property
    def anchor(self) -> AnchorEntry:
        anchor = self.one("anchor", AnchorEntry)
        if anchor is None:
            raise EvoharnessError("run state has no anchor yet (the collect node measures it)")
        return anchor

    def get(self, field: str, default: Any = None) -> Any:  # scalar fields (round, run_id, ...)
        return self.raw.get(field, default)

    @property
    def patterns(self) -> list[Pattern]:
        return self.many("patterns", Pattern)

    @property
    def reviews(self) -> list[Review]:
        return self.many("reviews", Review)

    @property
    def candidates(self) -> list[Candidate]:
        return self.many("candidates", Candidate)

    @property
    def verdicts(self) -> list[Verdict]:
        return self.many("verdicts", Verdict)

    @property
    def dropped(self) -> list[Dropped]:
        return self.many("dropped", Dropped)

    @property
    def rounds(self) -> list[RoundSummary]:
        return self.many("rounds", RoundSummary)

    @property
    def merged(self) -> list[Merged]:
        return self.many("merged", Merged)

    @property
    def rejected(self) -> list[Rejected]:
        return self.many("rejected", Rejected)

    @property
    def guards(self) -> GuardBook:
        return self.one("guards", GuardBook) or GuardBook()

    @property
    def composition(self) -> CompositionEntry | None:
        return self.one("composition", CompositionEntry)


class RunInput(TypedDict, total=False):
    run_id: str


class RunState(TypedDict, total=False):
    """JSON fields hold the dump of their `STATE_TYPES` type (read them through `Typed`)."""

    run_id: str
    round: int
    status: str  # running | done
    stop_reason: str
    recommendation: str
    anchor: dict[str, Any]  # AnchorEntry of main's current head
    anchors: Annotated[list[dict[str, Any]], operator.add]  # every anchor measured, in order
    before: dict[str, Any]  # Splits of the seed harness (dev, heldout)
    after: dict[str, Any]  # Splits of the final harness
    composition: dict[str, Any]  # CompositionEntry of the current anchor's trajectories
    ledger: dict[str, Any]  # RunLedger
    # this round's work (replaced each round)
    patterns: Annotated[list[dict[str, Any]], replace]  # Pattern
    reviews: Annotated[list[dict[str, Any]], replace]  # Review
    candidates: Annotated[list[dict[str, Any]], replace]  # Candidate
    verdicts: Annotated[list[dict[str, Any]], replace]  # Verdict
    dropped: Annotated[list[dict[str, Any]], operator.add]  # Dropped
    decisions: dict[str, str]  # human review: branch -> approve | reject
    # history
    rounds: Annotated[list[dict[str, Any]], operator.add]  # RoundSummary
    merged: Annotated[list[dict[str, Any]], operator.add]  # Merged
    rejected: Annotated[list[dict[str, Any]], operator.add]  # Rejected
    queued: Annotated[list[str], operator.add]  # trajectory ids sent to the training queue
    no_accept_streak: int
    guards: dict[str, Any]  # GuardBook: pinned regression tasks
