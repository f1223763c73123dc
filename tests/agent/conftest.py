"""A tiny harness checkout written on the fly (the layout the harness repo seeds)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

SYSTEM = """Solve: {{ task }}
Tools: {% for t in tools %}{{ t.name }} {% endfor %}
{{ lessons }}
Max steps {{ policies.max_steps }}.
"""

FORMAT_LESSON = "- Pass tool arguments as a JSON object with the exact parameter names from the tool schema.\n"

FIXED_POLICIES = {
    "max_steps": 12,
    "loop_guard": {"enabled": True, "max_repeats": 2},
    "checkpoint_nudge": {"enabled": True, "every": 4},
    "exit_gate": {"enabled": True},
    "repair_tool_calls": True,
}


def write_harness(root: Path, policies: dict | None = None, lessons: str = "",
                  files: dict[str, str] | None = None, prompt: str | None = SYSTEM) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if prompt is not None:
        (root / "prompts").mkdir(exist_ok=True)
        (root / "prompts" / "system.md").write_text(prompt)
    (root / "lessons.md").write_text(lessons)
    if policies is not None:
        (root / "policies.yaml").write_text(yaml.safe_dump(policies))
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def harness(tmp_path: Path):
    def make(name: str = "h", **kw) -> Path:
        return write_harness(tmp_path / name, **kw)

    return make
