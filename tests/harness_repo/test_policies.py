"""One `Policies` schema: the seed writes it, the agent reads it, the playbook's fixes set only its keys."""

from __future__ import annotations

import pytest

from evoharness.agent.harness import HarnessError, load_policies
from evoharness.errors import EditRejected
from evoharness.harness_repo.policies import Policies
from evoharness.harness_repo.seed import POLICIES
from evoharness.roles.fixes import FIXES, update_policies


def test_seed_agent_and_fixes_share_the_schema(tmp_path):
    assert Policies.from_yaml(POLICIES) == Policies()  # the seed file is the defaults
    (tmp_path / "policies.yaml").write_text("loop_guard:\n  enabled: true\nmy_hook_setting: 3\n")
    pol = load_policies(tmp_path / "policies.yaml")
    assert pol["loop_guard"] == {"enabled": True, "max_repeats": 2} and pol["max_steps"] == 12
    assert pol["my_hook_setting"] == 3  # unknown keys reach the template and hooks
    assert all(Policies.knows(k) for f in FIXES for k in f.policies)


@pytest.mark.parametrize("text, match", [("max_steps: 0\n", "max_steps"), ("loop_guard: [1]\n", "loop_guard"),
                                         ("- a\n", "mapping")])
def test_bad_policies_fail_the_harness(tmp_path, text, match):
    (tmp_path / "policies.yaml").write_text(text)
    with pytest.raises(HarnessError, match=match):
        load_policies(tmp_path / "policies.yaml")


def test_an_edit_cannot_set_a_key_the_agent_does_not_read():
    with pytest.raises(EditRejected, match="unknown policy key.*loop_gaurd.enabled"):
        update_policies(POLICIES, {"loop_gaurd.enabled": True})
    with pytest.raises(EditRejected, match="invalid policies"):
        update_policies(POLICIES, {"max_steps": -1})
    assert "enabled: true" in update_policies(POLICIES, {"exit_gate.enabled": True})
