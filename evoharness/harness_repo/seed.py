"""The seed harness `evoharness init` writes (kept as strings so it ships with the package)."""

from __future__ import annotations

from evoharness.harness_repo.policies import Policies

SYSTEM_PROMPT = """\
You are a careful assistant that solves one task using the tools below.

## Task
{{ task }}

## Tools
{% for tool in tools -%}
- `{{ tool.name }}`: {{ tool.description }}
{% endfor %}
{%- if lessons.strip() %}
## Lessons from earlier runs
{{ lessons.strip() }}
{% endif %}
## How to work
- Call one tool at a time and read its result before deciding the next step.
- Base every claim in your final answer on a tool result or on the task text.
- You have at most {{ policies.max_steps }} steps; deliver a final answer before they run out.
"""

LESSONS = ""

POLICIES = Policies().to_yaml("# Harness policies read by the reference agent.\n")

MIDDLEWARE_README = """\
# middleware/

Python modules here are harness middleware: code the agent runs around model and tool calls.
The reference agent defines which hooks it calls; `noop.py` is an example that does nothing.
Candidates may edit this directory (it is an editable surface in `harness.toml`).
"""

MIDDLEWARE_NOOP = '''\
"""Example middleware hook: does nothing. Copy it to write a real one."""


def hook(event: dict) -> None:
    """Called with an event dict; returning None changes nothing."""
    return None
'''

TOOLS_README = """\
# tools/

Python modules here add tools the agent may call. `noop.py` is an example that adds none.
Candidates may edit this directory (it is an editable surface in `harness.toml`).
"""

TOOLS_NOOP = '''\
"""Example tool module: declares no tools. Copy it to write a real one."""

TOOLS: list = []
'''

PACKAGE_INIT = '"""Harness {name} (editable surface)."""\n'

GITIGNORE = "__pycache__/\n*.pyc\n"


def seed_files() -> dict[str, str]:
    """Every seed file, path -> text (``harness.toml`` is added by ``init_harness``)."""
    return {
        "prompts/system.md": SYSTEM_PROMPT,
        "lessons.md": LESSONS,
        "policies.yaml": POLICIES,
        "middleware/__init__.py": PACKAGE_INIT.format(name="middleware"),
        "middleware/README.md": MIDDLEWARE_README,
        "middleware/noop.py": MIDDLEWARE_NOOP,
        "tools/__init__.py": PACKAGE_INIT.format(name="tools"),
        "tools/README.md": TOOLS_README,
        "tools/noop.py": TOOLS_NOOP,
        ".gitignore": GITIGNORE,
    }
