"""Lever routing and the ceiling verdict: does the harness still have work, or the weights?"""

from __future__ import annotations

from pydantic import BaseModel

from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.config import DiagnosisConfig


class Recommendation(BaseModel):
    lever: str  # harness | weights | none
    ceiling: bool
    harness_share: float
    weights_share: float
    message: str


def recommend(comp: Composition, cfg: DiagnosisConfig | None = None) -> Recommendation:
    cfg = cfg or DiagnosisConfig()
    h, w = comp.lever["harness"], comp.lever["weights"]
    if comp.n == 0:
        return Recommendation(lever="none", ceiling=False, harness_share=0, weights_share=0,
                              message="no trajectories")
    if h == 0 and w == 0:
        return Recommendation(lever="none", ceiling=False, harness_share=h, weights_share=w,
                              message="no failures: nothing to route")
    ceiling = h < cfg.ceiling_process_share
    if ceiling:
        msg = (f"ceiling: harness share {100 * h:.1f}% is below {100 * cfg.ceiling_process_share:.0f}%; "
               f"{100 * w:.1f}% are content failures: recommend weight training (export the queue)")
        lever = "weights" if w > 0 else "none"
    elif h >= w:
        msg = (f"harness: {100 * h:.1f}% of trajectories fail by process (F2/F3), which harness edits "
               f"repair; {100 * w:.1f}% content failures go to the training queue")
        lever = "harness"
    else:
        msg = (f"weights lead: {100 * w:.1f}% content failures (F1/F4) vs {100 * h:.1f}% process; "
               f"evolve the harness for the process share, train for the rest")
        lever = "weights"
    return Recommendation(lever=lever, ceiling=ceiling, harness_share=h, weights_share=w, message=msg)
