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
import os
import stat
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

# The parsed forms of harness templates and policies a warm worker's fork server prepared (``prepare``)
# for the tree it shows, so that each forked rollout does not compile the template and parse the YAML
# again (two thirds of a synthetic rollout's own CPU); the in-process executor prepares them too. Keyed by
# the exact text: a rollout uses an entry only when the file it reads holds that text, and gets what parsing
# it would give -- the template compiled by the same environment factory (rendering keeps no state in it),
# a deep copy of the policies.
_PREPARED_TEMPLATES: dict[str, Any] = {}
_PREPARED_POLICIES: dict[str, dict[str, Any]] = {}
PREPARED_KEEP = 8  # entries of each kind (the least recently prepared go first)
# The compiled code of harness modules (``middleware/*.py``, ``tools/*.py``) a fork server prepared
# (``prepare_code``), keyed by the file's path and exact bytes: a rollout still executes each module afresh (a new
# module object and globals, its body run again) and only skips compiling the same source again -- which every
# forked rollout otherwise did, ``/harness`` being read-only (no bytecode cache). Compiling runs no harness code.
_PREPARED_CODE: dict[tuple[str, bytes], Any] = {}
PREPARED_CODE_KEEP = 64  # compiled modules kept (the least recently prepared go first)
PREPARED_MAX_BYTES = 256 * 1024  # a larger file is left to the rollout


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
            compiled = _PREPARED_TEMPLATES.get(self.template)
            if compiled is None:
                compiled = template_environment().from_string(self.template)
            return compiled.render(task=task, tools=tools, lessons=self.lessons, policies=self.policies)
        except jinja2.TemplateError as e:
            raise HarnessError(f"prompts/system.md: {type(e).__name__}: {e}") from e


def load_policies(path: Path) -> dict[str, Any]:
    """``policies.yaml`` (the `Policies` schema, defaults for missing keys, unknown keys kept) as a dict."""
    if not path.is_file():
        return copy.deepcopy(DEFAULT_POLICIES)
    text = path.read_text()
    prepared = _PREPARED_POLICIES.get(text)
    if prepared is not None:
        return copy.deepcopy(prepared)
    try:
        return Policies.from_yaml(text).model_dump()
    except ValueError as e:
        raise HarnessError(f"policies.yaml: {e}") from e


def prepare(root: Path | str) -> bool:
    """Compile ``root``'s prompt template and parse its ``policies.yaml`` into the prepared entries (see
    ``_PREPARED_TEMPLATES``); True when one was added. Only a fork server calls it, on the tree it shows,
    before forking a rollout, and the in-process executor before each rollout (``LocalExecutor(prepare=)``).
    Runs no harness code and never raises: a file that is not a small regular file, a template that does not
    compile, YAML with anchors or aliases (which can expand without bound) or policies that do not parse are
    left to the rollout, which reads and reports them as it always did."""
    root = Path(root)
    added = False
    template = _small_text(root / "prompts" / "system.md", DEFAULT_SYSTEM_PROMPT)
    if template is not None and template not in _PREPARED_TEMPLATES:
        from evoharness.untrusted import template_environment

        try:
            compiled = template_environment().from_string(template)
        except Exception:  # noqa: BLE001 -- the rollout compiles it again and reports the error
            compiled = None
        # Jinja folds constant expressions while compiling (a filter call on literals: `"x" | center(50000000)`),
        # and the compiled code keeps the result: kept here, in a server that serves every commit, it would hold
        # that memory -- charged to the sandbox the next commits' rollouts share -- long after this commit's
        # rollouts ended. Such a template is left to each rollout, which pays for it in its own child, as before.
        if compiled is not None and _folded_size(compiled) > 2 * len(template) + FOLDED_SLACK:
            compiled = None
        # None (does not compile, took over PREPARE_S, or folded large) is remembered too, so that the server does
        # not try the same text again before every rollout: the rollout compiles it (``render_system``)
        _keep(_PREPARED_TEMPLATES, template, compiled)
        added = compiled is not None
    policies = _small_text(root / "policies.yaml", None)
    if policies is not None and policies not in _PREPARED_POLICIES and not {"&", "*"} & set(policies):
        try:
            parsed = Policies.from_yaml(policies).model_dump()
        except Exception:  # noqa: BLE001 -- likewise
            parsed = None
        if parsed is not None:
            added = _keep(_PREPARED_POLICIES, policies, parsed) or added
    return added


def prepare_code(root: Path | str) -> bool:
    """Compile the harness modules of ``root`` (each ``middleware/*.py`` and ``tools/*.py`` that is a regular file of
    at most ``PREPARED_MAX_BYTES``) into ``_PREPARED_CODE``; True when one was added. Like ``prepare``: only a fork
    server calls it, before forking, and the in-process executor; it runs no harness code (``compile`` only) and
    never raises -- a module that does not compile is left to the rollout, which reports it as it always did."""
    added = False
    for path in [*_py_files(Path(root) / "middleware"), *_py_files(Path(root) / "tools")]:
        data = _small_bytes(path)
        if data is None or (str(path), data) in _PREPARED_CODE:
            continue
        try:
            code = compile(data, str(path), "exec", dont_inherit=True)  # as importlib's source loader compiles it
        except Exception:  # noqa: BLE001 -- SyntaxError, ValueError (a NUL byte): the rollout reports it
            continue
        _PREPARED_CODE[(str(path), data)] = code
        while len(_PREPARED_CODE) > PREPARED_CODE_KEEP:
            _PREPARED_CODE.pop(next(iter(_PREPARED_CODE)))
        added = True
    return added


FOLDED_SLACK = 64 * 1024  # constants a compiled template may hold beyond twice its own text


def _folded_size(compiled: Any) -> int:
    """Items in the constants of a compiled template's code (strings, bytes, tuples, nested code): its own text
    and whatever compile-time folding made. Above ``FOLDED_SLACK`` more than twice the text, folding grew it."""
    import types

    todo: list[Any] = [compiled.root_render_func.__code__, *(f.__code__ for f in compiled.blocks.values())]
    total = 0
    while todo:
        item = todo.pop()
        if isinstance(item, types.CodeType):
            todo.extend(item.co_consts)
        elif isinstance(item, str | bytes):
            total += len(item)
        elif isinstance(item, tuple | frozenset):
            total += len(item)
            todo.extend(item)
    return total


def _keep(entries: dict[str, Any], key: str, value: Any) -> bool:
    entries[key] = value
    while len(entries) > PREPARED_KEEP:
        entries.pop(next(iter(entries)))
    return True


def _small_text(path: Path, missing: str | None) -> str | None:
    """``path``'s text when it is a regular file of at most ``PREPARED_MAX_BYTES`` (opened without blocking:
    a FIFO or device is never read); ``missing`` when there is nothing at ``path``; None otherwise."""
    data = _small_bytes(path, _ABSENT)
    if data is _ABSENT:
        return missing
    try:
        return data.decode("utf-8") if isinstance(data, bytes) else None
    except UnicodeDecodeError:
        return None


_ABSENT = object()  # ``_small_bytes``' answer for nothing at the path, where the caller tells it from unreadable


def _small_bytes(path: Path, absent: Any = None) -> Any:
    """``path``'s bytes when it is a regular file of at most ``PREPARED_MAX_BYTES`` (opened without blocking: a
    FIFO or device is never read); ``absent`` when there is nothing at ``path``; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return absent
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > PREPARED_MAX_BYTES:
            return None
        data = os.read(fd, PREPARED_MAX_BYTES + 1)
        return data if len(data) <= PREPARED_MAX_BYTES else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _load_module(path: Path, prefix: str) -> Any:
    name = f"_evoharness_{prefix}_{abs(hash(str(path.resolve())))}_{path.stem}"
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        code = _prepared_code(path)
        if code is None:
            spec.loader.exec_module(module)
        else:  # what the source loader's exec_module does, less compiling the same bytes again
            exec(code, module.__dict__)  # noqa: S102 -- the harness module's own code, as an import runs it
    except BaseException as e:  # noqa: BLE001 -- SyntaxError, SystemExit, anything: the harness is broken
        sys.modules.pop(name, None)
        raise HarnessError(f"{path.parent.name}/{path.name}: {type(e).__name__}: {e}") from e
    return module


def _prepared_code(path: Path) -> Any:
    """The code a fork server compiled for ``path``'s present bytes (``prepare_code``), else None."""
    if not _PREPARED_CODE:
        return None
    data = _small_bytes(path)
    return None if data is None else _PREPARED_CODE.get((str(path), data))


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
