"""The signal catalogue: detector id -> how to build that detector, with no default branch.

Each detector lives in its own module (`detectors.py` for the single-agent ones, `multiagent.py`
for multi-agent logs) and is one ``add(...)`` line here; its id (``F<n>.<name>``) is the registry
name. The labeller runs every entry (`default_catalogue`); edit ``targets`` names one of them
(`catalogue_ids`). Order does not matter: the labeller sorts signals by step, class and id.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from evoharness.diagnosis import environment as env
from evoharness.diagnosis import multiagent as ma
from evoharness.diagnosis.amounts import AmountClaimDetector
from evoharness.diagnosis.claimed_act import ClaimedActDetector
from evoharness.diagnosis.claims import ContradictedClaimDetector
from evoharness.diagnosis.coding import ForbiddenEditDetector, TruncatedFileDetector
from evoharness.diagnosis.detectors import (
    FRICTION_EVENTS,
    Detector,
    FirstWriteDetector,
    FrictionDetector,
    HarnessErrorDetector,
    NoDeliveryDetector,
    PolicyViolationDetector,
    PoorDeliveryDetector,
    RepeatedActionDetector,
    StepBudgetDetector,
    TerminationDetector,
    UnbackedClaimDetector,
)
from evoharness.diagnosis.elapsed import ElapsedClaimDetector
from evoharness.diagnosis.outcome import MisstatedOutcomeDetector
from evoharness.diagnosis.stalls import StalledDetector
from evoharness.diagnosis.unavailable import UnavailableOfferDetector
from evoharness.registry import Registry
from evoharness.traces.models import Termination

DETECTORS: Registry[Callable[[], Detector]] = Registry("detector", "targets")


def add(build: Callable[[], Detector]) -> None:
    """Register a zero-argument detector factory under the id of the detector it builds."""
    DETECTORS.register(build().id, build)


for _kind in FRICTION_EVENTS:
    add(partial(FrictionDetector, _kind))
add(HarnessErrorDetector)
add(RepeatedActionDetector)
add(StepBudgetDetector)
add(partial(TerminationDetector, "timeout", Termination.timeout, "timeout"))
add(partial(TerminationDetector, "context_overflow", Termination.context_overflow, "context_overflow"))
add(NoDeliveryDetector)
add(UnbackedClaimDetector)
add(PoorDeliveryDetector)
add(PolicyViolationDetector)
add(FirstWriteDetector)
add(TruncatedFileDetector)
add(ForbiddenEditDetector)
add(ma.UnsupportedFactDetector)
add(ma.UnseenReportDetector)
add(ClaimedActDetector)
add(ma.GuardrailDetector)
add(ma.NoProgressDetector)
add(ma.HandoffCodeDetector)
add(ma.LostTaskDetector)
add(ma.AnswerOriginDetector)
add(ma.AcceptedReportDetector)
add(ma.FirstCommitmentDetector)
add(ContradictedClaimDetector)
add(ElapsedClaimDetector)
add(AmountClaimDetector)
add(UnavailableOfferDetector)
add(MisstatedOutcomeDetector)
add(env.UserSimulatorErrorDetector)
add(env.InfraErrorDetector)
add(env.UserQuitDetector)
add(env.UserOffScriptDetector)
add(env.UnsatisfiableTaskDetector)
add(env.UserWithheldIdDetector)
add(StalledDetector)


def default_catalogue() -> list[Detector]:
    """One fresh detector per registered id."""
    return [build() for _, build in DETECTORS.items()]


def catalogue_ids() -> list[str]:
    return DETECTORS.names()
