"""The batch child's check between rollouts (``forkserver._Baseline``): what it sees, with and without dict version
tags, and from a snapshot the fork server took before forking."""

from __future__ import annotations

import sys
import warnings

import pytest

import evoharness.agent.loop as loop_module
from evoharness.agent import forkserver as fs


class _AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


@pytest.fixture(params=["tags", "no tags"])
def tags(request, monkeypatch):
    """Every test runs with the version tags read (this interpreter) and without (every namespace compared)."""
    if request.param == "no tags":
        monkeypatch.setattr(fs, "_TAG_OFFSET", None)
    elif fs._TAG_OFFSET is None:
        pytest.skip("this interpreter's dict version tags cannot be read")
    return request.param


@pytest.fixture
def mark():
    """An attribute of an evoharness module, removed again after the test."""
    yield loop_module
    for name in ("_probe", "_probe2"):
        if hasattr(loop_module, name):
            delattr(loop_module, name)
    if hasattr(loop_module.Agent, "_probe"):
        del loop_module.Agent._probe


def test_cpython_dict_version_tags_are_found_here():
    # the fast path is what runs in CI: if this fails, every check compares every namespace (still correct)
    if sys.implementation.name == "cpython" and sys.version_info[:2] in ((3, 11), (3, 12)):
        assert fs._TAG_OFFSET is not None


def test_an_attribute_set_replaced_or_removed_is_seen_and_one_set_back_is_not(tags, mark):
    mark._probe = 1000
    base = fs._Baseline()
    assert base.changed() == []
    mark._probe2 = 1
    assert base.changed() == ["attributes (evoharness.agent.loop)"]
    del mark._probe2
    assert base.changed() == []
    held = mark._probe
    mark._probe = int("1000")  # equal, another object
    assert base.changed() == ["attributes (evoharness.agent.loop)"]
    mark._probe = _AlwaysEqual()  # an object whose __eq__ lies
    assert base.changed() == ["attributes (evoharness.agent.loop)"]
    mark._probe = held  # set back: unchanged, and stays so
    assert base.changed() == []
    assert base.changed() == []
    mark._probe = held  # set to the object it holds
    assert base.changed() == []


def test_a_class_attribute_and_builtins_are_seen(tags, mark):
    import builtins

    base = fs._Baseline()
    mark.Agent._probe = 1
    assert base.changed() == ["attributes (evoharness.agent.loop.Agent)"]
    del mark.Agent._probe
    assert base.changed() == []
    builtins._fs_probe = 1
    try:
        assert base.changed() == ["attributes (builtins)"]
    finally:
        del builtins._fs_probe
    assert base.changed() == []


def test_a_warning_shown_from_a_checked_module_is_no_change(tags):
    base = fs._Baseline()
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.warn_explicit("probe", UserWarning, "loop.py", 1, module="evoharness.agent.loop",
                               registry=vars(loop_module).setdefault("__warningregistry__", {}))
    assert base.changed() == []


def test_a_check_of_unchanged_namespaces_reads_none_of_them(monkeypatch, mark):
    import operator

    if fs._TAG_OFFSET is None:
        pytest.skip("this interpreter's dict version tags cannot be read")
    mark._probe = 0
    base = fs._Baseline()
    base.changed()  # settles the namespaces whatever the test run moved, compared once
    compared = []
    real = operator.is_
    monkeypatch.setattr(operator, "is_", lambda a, b: compared.append(1) or real(a, b))  # (not a checked module)
    assert base.changed() == [] and compared == []
    mark._probe = 1
    assert base.changed() == ["attributes (evoharness.agent.loop)"]
    assert 0 < len(compared) < 1000  # that namespace's entries, not the ~4,000 of all of them


def test_a_child_takes_over_the_servers_snapshot_with_what_changed_since(tags, mark):
    snapshot = fs.server_snapshot()
    mark._probe = 1  # after the snapshot, before the child's baseline (as threading's globals at a fork)
    base = fs._Baseline(snapshot)
    assert base.spaces is snapshot
    assert base.changed() == []
    mark._probe = 2
    assert base.changed() == ["attributes (evoharness.agent.loop)"]
    del mark._probe
    assert base.changed() == ["attributes (evoharness.agent.loop)"]


def test_a_snapshot_of_other_modules_is_not_taken_over(tags):
    snapshot = fs.server_snapshot()
    sys.modules["_fs_probe_module"] = sys
    try:
        base = fs._Baseline(snapshot)
        assert base.spaces is not snapshot and base.changed() == []
    finally:
        del sys.modules["_fs_probe_module"]


def test_a_warning_registry_from_before_the_snapshot_is_no_change(tags, mark):
    """A module that had shown a warning before the snapshot held ``__warningregistry__`` in it; the check drops that
    key before it reads tags, so the first check after the snapshot saw the module changed (CI: a test earlier in
    the same worker had warned from evoharness.verification.sim) and a fork server would end a clean child."""
    mark.__warningregistry__ = {"version": 0}
    base = fs._Baseline()
    assert base.changed() == []
    assert "__warningregistry__" not in vars(mark)


def test_the_module_names_a_batch_child_took_are_what_the_check_compares(tags):
    """The batch child takes ``sys.modules``' names once after a rollout, removes the harness's modules among those new
    since the baseline, and hands the rest to the check (no second walk over every name): a module the rollout
    imported is still seen, the harness's removed ones are not, and the check reads the names it is handed."""
    base = fs._Baseline()
    harness, imported = f"{fs.HARNESS_MODULE_PREFIXES[0]}probe", "_fs_probe_imported"
    sys.modules[harness] = sys.modules[imported] = sys
    try:
        taken = frozenset(sys.modules)
        assert sorted(taken - base.modules) == [harness, imported]
        assert base.changed(taken.difference([harness])) == [f"modules ({imported})"]
    finally:
        del sys.modules[harness], sys.modules[imported]
    assert base.changed(base.modules) == [] and base.changed() == []
    assert base.changed(base.modules | {imported}) == [f"modules ({imported})"]  # handed, not read again
