"""Loading a harness checkout into what the reference agent needs.

Layout read (every file optional; a missing one takes its default):

- ``prompts/system.md`` -- Jinja2 template (``StrictUndefined``) with ``task``, ``tools``
  (list of ``{name, description}``), ``lessons`` (str) and ``policies`` (dict).
- ``lessons.md`` -- free text handed to the template as ``lessons``.
- ``policies.yaml`` -- ``max_steps`` (12), ``loop_guard: {enabled, max_repeats}`` (false, 2),
  ``checkpoint_nudge: {enabled, every}`` (false, 4), ``exit_gate: {enabled}`` (false),
  ``repair_tool_calls`` (false). Unknown keys are kept and passed to the template and hooks.
- ``middleware/*.py`` -- modules defining any of the hooks ``before_model``, ``after_model``,
  ``before_tool``, ``after_tool``, ``on_finish`` (contracts in ``evoharness.agent.hooks``).
- ``tools/*.py`` -- modules with a ``TOOLS`` list; each entry is a plain function (name from
  ``__name__``, description from its docstring, string/int/float/bool parameters from its
  signature) or a dict ``{name, description, parameters (JSON schema), function}``.

Any problem (syntax error, import-time crash, bad YAML, template error) raises ``HarnessError``,
which the agent turns into a failed trajectory.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoharness.harness_repo.policies import Policies
from evoharness.harness_repo.seed import SYSTEM_PROMPT

HOOKS = ("before_model", "after_model", "before_tool", "after_tool", "on_finish")

# A harness without prompts/system.md gets the seed prompt `evoharness init` writes (one source).
DEFAULT_SYSTEM_PROMPT = SYSTEM_PROMPT

DEFAULT_POLICIES: dict[str, Any] = Policies().model_dump()

_PY_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


class HarnessError(Exception):
    """The harness checkout cannot run; ``reason`` says why (file and error)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass
class HarnessTool:
    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


@dataclass
class Hook:
    module: str
    name: str
    function: Callable[..., Any]


@dataclass
class Harness:
    root: Path
    template: str
    lessons: str
    policies: dict[str, Any]
    hooks: dict[str, list[Hook]] = field(default_factory=dict)
    tools: list[HarnessTool] = field(default_factory=list)

    def render_system(self, task: str, tools: list[dict[str, str]]) -> str:
        import jinja2

        from evoharness.untrusted import template_environment

        try:  # the same bounded sandbox the host renders harness templates in (evoharness.untrusted)
            env = template_environment()
            return env.from_string(self.template).render(task=task, tools=tools, lessons=self.lessons,
                                                         policies=self.policies)
        except jinja2.TemplateError as e:
            raise HarnessError(f"prompts/system.md: {type(e).__name__}: {e}") from e


def load_policies(path: Path) -> dict[str, Any]:
    """``policies.yaml`` (the `Policies` schema, defaults for missing keys, unknown keys kept) as a dict."""
    if not path.is_file():
        return copy.deepcopy(DEFAULT_POLICIES)
    try:
        return Policies.from_yaml(path.read_text()).model_dump()
    except ValueError as e:
        raise HarnessError(f"policies.yaml: {e}") from e


def _load_module(path: Path, prefix: str) -> Any:
    name = f"_evoharness_{prefix}_{abs(hash(str(path.resolve())))}_{path.stem}"
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except BaseException as e:  # noqa: BLE001 -- SyntaxError, SystemExit, anything: the harness is broken
        sys.modules.pop(name, None)
        raise HarnessError(f"{path.parent.name}/{path.name}: {type(e).__name__}: {e}") from e
    return module


def _py_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")


def _tool_from(entry: Any, where: str) -> HarnessTool:
    if isinstance(entry, dict):
        try:
            return HarnessTool(entry["name"], entry.get("description", ""),
                               entry.get("parameters", {"type": "object", "properties": {}}), entry["function"])
        except KeyError as e:
            raise HarnessError(f"{where}: tool dict lacks {e}") from e
    if not callable(entry):
        raise HarnessError(f"{where}: TOOLS entries must be functions or dicts, got {type(entry).__name__}")
    props, required = {}, []
    for pname, p in inspect.signature(entry).parameters.items():
        props[pname] = {"type": _PY_TYPES.get(p.annotation, "string")}
        if p.default is inspect.Parameter.empty:
            required.append(pname)
    doc = inspect.getdoc(entry) or ""
    return HarnessTool(entry.__name__, doc.split("\n\n")[0].strip(),
                       {"type": "object", "properties": props, "required": required}, entry)


def load_harness(root: Path | str) -> Harness:
    """Load the harness at ``root`` or raise ``HarnessError``."""
    root = Path(root)
    if not root.is_dir():
        raise HarnessError(f"harness directory {root} does not exist")
    prompt = root / "prompts" / "system.md"
    template = prompt.read_text() if prompt.is_file() else DEFAULT_SYSTEM_PROMPT
    lessons_path = root / "lessons.md"
    lessons = lessons_path.read_text() if lessons_path.is_file() else ""
    harness = Harness(root, template, lessons, load_policies(root / "policies.yaml"), {h: [] for h in HOOKS})
    for path in _py_files(root / "middleware"):
        module = _load_module(path, "middleware")
        for hook in HOOKS:
            fn = getattr(module, hook, None)
            if callable(fn):
                harness.hooks[hook].append(Hook(path.name, hook, fn))
    for path in _py_files(root / "tools"):
        module = _load_module(path, "tools")
        for entry in getattr(module, "TOOLS", []) or []:
            harness.tools.append(_tool_from(entry, f"tools/{path.name}"))
    return harness
