"""Repairs outside the catalogue: the file changes that undo a lint finding, on any editable surface.

- middleware findings: the offending hook is cut out of its module (the module is deleted when no
  hook is left in it);
- instruction findings: the offending sentence is cut out of the prompt template or lessons;
- prompt tool-list findings: the template's tool loop (or, without one, a new Tools section) is
  rewritten to list every tool by its name and description;
- harness tools that shadow an environment tool: their entries cut from the module's ``TOOLS`` (the module is
  deleted when it declares no other tool);
- budget findings: ``max_steps`` back to at least the reference default (or what progressing runs
  needed), an unreachable ``loop_guard.max_repeats`` to 2, an unreachable nudge to every 4 steps.

`repair(finding, view)` returns the changes, or None when it cannot write one (a surface that is not
editable, a quote no longer in the file).
"""

from __future__ import annotations

import ast
import re

from evoharness.agent.harness import DEFAULT_SYSTEM_PROMPT, HOOKS
from evoharness.harness_repo.models import FileChange
from evoharness.roles.fixes import POLICIES, update_policies
from evoharness.roles.lint import DEFAULT_MAX_STEPS, declared_tools
from evoharness.roles.models import Finding, HarnessView

TOOL_LOOP = "{% for tool in tools -%}\n- `{{ tool.name }}`: {{ tool.description }}\n{% endfor %}"
_FOR_TOOLS = re.compile(r"\{%-?\s*for\s+\w+\s+in\s+tools\b.*?%\}.*?\{%-?\s*endfor\s*-?%\}", re.S)


def repair(finding: Finding, view: HarnessView) -> list[FileChange] | None:
    if not view.editable(finding.path):
        return None
    kind = finding.rule.split(".", 1)[0]
    if kind == "middleware":
        return _cut_hook(finding, view)
    if kind == "instructions":
        return _cut_sentence(finding, view)
    if kind == "prompt":
        return _restore_tool_list(view)
    if kind == "policies":
        return _restore_budget(finding, view)
    if kind == "tools":
        return _cut_tools(finding, view)
    return None


def describe(finding: Finding) -> str:
    kind = finding.rule.split(".", 1)[0]
    return {
        "middleware": f"remove the hook in {finding.path} ({finding.detail})",
        "instructions": f"remove the instruction {finding.quote!r} from {finding.path}",
        "prompt": f"list every tool in {finding.path}",
        "policies": f"restore the budget in {finding.path} ({finding.quote})",
        "tools": f"remove {', '.join(finding.tools)} from {finding.path}: the environment's own tool runs again",
    }.get(kind, finding.detail)


def _cut_hook(finding: Finding, view: HarnessView) -> list[FileChange] | None:
    source = view.text(finding.path)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [FileChange(path=finding.path, delete=True)]
    hook = {"middleware.rewrites_results": "after_tool", "middleware.blocks_tools": "before_tool",
            "middleware.rewrites_calls": "before_tool",
            "middleware.rewrites_messages": "before_model",
            "middleware.rewrites_replies": "after_model"}.get(finding.rule)
    if hook is None:
        return [FileChange(path=finding.path, delete=True)]
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    target = next((f for f in fns if f.name == hook), None)
    if target is None:
        return None
    if not [f for f in fns if f.name in HOOKS and f is not target]:
        return [FileChange(path=finding.path, delete=True)]
    lines = source.splitlines(keepends=True)
    start = min([target.lineno, *(d.lineno for d in target.decorator_list)]) - 1
    end = target.end_lineno or target.lineno
    return [FileChange(path=finding.path, content="".join(lines[:start] + lines[end:]))]


def _cut_tools(finding: Finding, view: HarnessView) -> list[FileChange] | None:
    """The finding's tools out of the module's ``TOOLS`` list; the module goes when it declares no other tool."""
    source = view.text(finding.path)
    declared = declared_tools(source)
    if not set(finding.tools) & set(declared):
        return None
    if set(declared) <= set(finding.tools):
        return [FileChange(path=finding.path, delete=True)]
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TOOLS" for t in node.targets) \
                and isinstance(node.value, (ast.List, ast.Tuple)):
            keep = [ast.get_source_segment(source, e) or "" for e in node.value.elts
                    if not set(declared_tools(f"TOOLS = [{ast.get_source_segment(source, e)}]")) & set(finding.tools)]
            lines = source.splitlines(keepends=True)
            head, tail = lines[: node.lineno - 1], lines[node.end_lineno or node.lineno:]
            return [FileChange(path=finding.path, content="".join([*head, f"TOOLS = [{', '.join(keep)}]\n", *tail]))]
    return None


def _cut_sentence(finding: Finding, view: HarnessView) -> list[FileChange] | None:
    text = view.text(finding.path)
    quote = finding.quote.strip()
    if not quote or quote not in text:
        return None
    new = text.replace(quote, "", 1)
    new = re.sub(r"[ \t]+\n", "\n", new)
    new = re.sub(r"\n(?:[-*+] *)?\n(?=\n)", "\n", new)
    new = re.sub(r"\n{3,}", "\n\n", new)
    return [FileChange(path=finding.path, content=new)]


def _restore_tool_list(view: HarnessView) -> list[FileChange] | None:
    path = "prompts/system.md"
    template = view.files.get(path, DEFAULT_SYSTEM_PROMPT)
    if _FOR_TOOLS.search(template):
        new = _FOR_TOOLS.sub(lambda _: TOOL_LOOP, template, count=1)
    else:
        new = template.rstrip("\n") + "\n\n## Tools\n" + TOOL_LOOP + "\n"
    return None if new == template else [FileChange(path=path, content=new)]


def _restore_budget(finding: Finding, view: HarnessView) -> list[FileChange] | None:
    pol = view.policies()
    steps = pol.get("max_steps", DEFAULT_MAX_STEPS)
    updates: dict[str, object] = {}
    if finding.quote.startswith("max_steps") and isinstance(steps, int):
        need = [int(n) for n in re.findall(r"needed >= (\d+)", finding.detail)]
        updates["max_steps"] = max(DEFAULT_MAX_STEPS, *need, steps)
    elif finding.quote.startswith("max_repeats"):
        updates["loop_guard.max_repeats"] = 2
    elif finding.quote.startswith("every"):
        updates["checkpoint_nudge.every"] = 4
    if not updates:
        return None
    return [FileChange(path=POLICIES, content=update_policies(view.text(POLICIES), updates))]
