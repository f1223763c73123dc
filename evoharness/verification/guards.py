"""Guard tasks: failures a merged edit fixed, pinned so later candidates must not break them."""

from __future__ import annotations

from pydantic import BaseModel, Field

from evoharness.verification.anchors import Anchor


def _healthy_share(anchor: Anchor) -> dict[str, float]:
    return {
        t: sum(o.healthy for o in obs) / len(obs)
        for t, obs in anchor.per_task().items()
        if obs and obs[0].split == "dev"
    }


class GuardBook(BaseModel):
    """Pinned regression tasks: task id -> the round whose merge fixed it."""

    pinned: dict[str, int] = Field(default_factory=dict)

    @property
    def tasks(self) -> list[str]:
        return sorted(self.pinned)

    def pin_fixed(self, before: Anchor, after: Anchor, round: int) -> list[str]:
        """Pin every dev task that was mostly failing in ``before`` and mostly healthy in ``after``."""
        old, new = _healthy_share(before), _healthy_share(after)
        fixed = sorted(t for t, share in new.items() if share >= 0.5 and old.get(t, 1.0) < 0.5)
        for t in fixed:
            self.pinned.setdefault(t, round)
        return fixed
