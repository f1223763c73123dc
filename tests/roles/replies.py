"""Canned role replies for the scripted chat model."""

from __future__ import annotations

import json

ANALYST_OK = json.dumps({"patterns": [{
    "signal": "F3.repeated_action",
    "root_cause": "nothing in the harness stops an identical tool call from being repeated",
    "surface": "policies.yaml",
    "evidence": [{"trajectory_id": "t1", "step": 6, "quote": "3x search_emails"}],
}]})

CRITIC_OK = json.dumps({"approved": True, "accommodation": False, "attribution_ok": True,
                        "predicted_flips": ["task-a", "task-b", "task-zzz"], "notes": "loop guard fits"})

NEW_POLICIES = """\
# Harness policies read by the reference agent.
max_steps: 12
loop_guard:
  enabled: true
  max_repeats: 3
checkpoint_nudge:
  enabled: false
  every: 4
exit_gate:
  enabled: false
repair_tool_calls: false
"""

ENGINEER_OK = json.dumps({"message": "Enable the loop guard", "rationale": "blocks identical repeats",
                          "changes": [{"path": "policies.yaml", "content": NEW_POLICIES}]})


def engineer_reply(path: str, content: str, message: str = "Fix it") -> str:
    return json.dumps({"message": message, "changes": [{"path": path, "content": content}]})
