"""The Router: one table (class -> lever) and one threshold (the ceiling) answer every routing question."""

from __future__ import annotations

import pytest

from evoharness.config import REMOVED_KEYS, load_settings
from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import FailureClass, Lever
from evoharness.diagnosis.routing import DEFAULT_ROUTING, Router
from evoharness.errors import InputError
from evoharness.traces.builder import TraceBuilder


def test_every_failure_class_has_a_lever_in_the_default_table():
    assert set(DEFAULT_ROUTING) == {c.value for c in FailureClass}
    router = Router()
    assert router.process_classes == {FailureClass.F2, FailureClass.F3}
    assert router.content_classes == {FailureClass.F1, FailureClass.F4}
    assert router.lever("healthy") == Lever.none


def test_a_table_entry_moves_a_class_everywhere_the_router_is_asked():
    router = Router({"F4": "harness"}, ceiling=0.05)  # a partial table overrides the defaults class by class
    assert FailureClass.F4 in router.process_classes and router.lever("F2") == Lever.harness
    shares = {"healthy": 0.9, "F1": 0.06, "F2": 0.0, "F3": 0.0, "F4": 0.04}
    assert router.share(shares, "harness") == pytest.approx(0.04)
    assert router.ceiling_reached(shares)  # 4% process < 5%
    assert not Router({"F1": "harness", "F4": "harness"}, ceiling=0.05).ceiling_reached(shares)
    lab = Labeller(DiagnosisConfig(routing={"F4": "harness"})).label(
        TraceBuilder().user("x").deliver("a").build(score=0.0))
    assert lab.failure_class == FailureClass.F4 and lab.lever == Lever.harness


def test_bad_table_is_a_config_error():
    with pytest.raises(InputError, match="unknown lever 'train'"):
        load_settings(overrides=['diagnosis.routing={F1="train"}'], environ={})
    with pytest.raises(InputError, match="unknown failure class 'F9'"):
        load_settings(overrides=['diagnosis.routing={F9="harness"}'], environ={})


def test_one_ceiling_for_diagnose_and_runs():
    router = Router.from_config(DiagnosisConfig(ceiling_process_share=0.2))
    low = {"healthy": 0.5, "F1": 0.0, "F2": 0.1, "F3": 0.05, "F4": 0.35}
    reason, advice = router.stop_reason(low)
    assert "15.0% is below 20%" in reason and "35% content failures (F1/F4)" in advice
    assert router.stop_reason({**low, "F3": 0.15, "F4": 0.25}) is None
    assert router.stop_reason({}) is None  # no anchor composition yet: never a ceiling
    comp = Composition(n=20, shares=low, counts={}, delivery_rate=1.0, mean_score=0.5, score_among_delivered=0.5,
                       n_scored=20, n_unscored=0, lever={})
    rec = router.recommend(comp)
    assert rec.ceiling and rec.lever == "weights" and rec.harness_share == pytest.approx(0.15)


@pytest.mark.parametrize("old", sorted(k for k in REMOVED_KEYS if "." in k))
def test_a_removed_key_names_its_replacement(old, tmp_path):
    section, key = old.split(".", 1)
    cfg = tmp_path / "evoharness.toml"
    cfg.write_text(f"[{section}]\n{key} = 0.1\n")
    with pytest.raises(InputError, match=f"{old} was removed: use {REMOVED_KEYS[old].split()[0]}"):
        load_settings(cfg, environ={})
    env = "EVOHARNESS_" + old.upper().replace(".", "__")
    with pytest.raises(InputError, match="was removed"):
        load_settings(environ={env: "0.1"})
