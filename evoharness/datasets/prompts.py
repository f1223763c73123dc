"""The system prompt an export renders its records under: the seed harness's or the evolved one's.

``--render-under seed`` reads ``prompts/system.md``, ``lessons.md`` and ``policies.yaml`` at the
harness repo's root commit; ``evolved`` reads them at main's head; ``DIR@REV`` reads them at REV.
The seed ``system.md`` is a Jinja2 template with the variables ``task``, ``tools``, ``lessons`` and
``policies``; each record is rendered with its own task and tools (``StrictUndefined``). When a
template does not render (a variable it needs is not known here, or the template is broken), the
record gets the raw text followed by the lessons instead, and the export counts it as a fallback.

The template is a candidate's file, i.e. untrusted: it renders in ``evoharness.untrusted``'s bounded
``ImmutableSandboxedEnvironment`` (no dunder or private attributes, no imports, no mutation, bounded
ranges, repetition and loop nesting). A template that tries to reach Python internals falls back to
the raw text like any other template that does not render; nothing of it runs on the host.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from jinja2 import TemplateError

from evoharness.errors import InputError
from evoharness.traces.models import Trajectory
from evoharness.untrusted import check_template, template_environment

from .models import RenderedPrompt

SYSTEM_PATH = "prompts/system.md"
LESSONS_PATH = "lessons.md"
POLICIES_PATH = "policies.yaml"
MAIN_NAMES = ("main", "master")


def split_harness_arg(harness: str) -> tuple[Path, str | None]:
    """``DIR`` or ``DIR@REV`` -> (dir, rev). A directory whose own name holds '@' wins."""
    if Path(harness).is_dir() or "@" not in harness:
        return Path(harness), None
    path, rev = harness.rsplit("@", 1)
    return Path(path), rev or None


def _main_branch(repo) -> str:
    names = {h.name for h in repo.heads}
    for name in MAIN_NAMES:
        if name in names:
            return name
    return "HEAD"


def _show(repo, commit: str, path: str) -> str | None:
    from git import GitCommandError

    try:
        return repo.git.show(f"{commit}:{path}")
    except GitCommandError:
        return None


def resolve_prompt(harness: str | None, under: str = "evolved") -> RenderedPrompt:
    """Read the harness prompt named by ``harness`` (DIR or DIR@REV) and ``under`` (seed | evolved)."""
    if harness is None:
        return RenderedPrompt(under="trajectory")
    if under not in ("seed", "evolved"):
        raise InputError("--render-under", f"expected seed | evolved, got {under!r}")
    import git

    path, rev = split_harness_arg(harness)
    try:
        repo = git.Repo(path)
    except (git.NoSuchPathError, git.InvalidGitRepositoryError):
        raise InputError(str(path), "not a git repository (expected a harness repo)") from None
    main = _main_branch(repo)
    try:
        if rev is not None:
            commit, label = repo.git.rev_parse("--verify", f"{rev}^{{commit}}"), rev
        elif under == "seed":
            commit, label = repo.git.rev_list("--max-parents=0", main).split()[-1], f"root of {main}"
        else:
            commit, label = repo.git.rev_parse("--verify", f"{main}^{{commit}}"), main
    except git.GitCommandError:
        raise InputError(str(path), f"cannot resolve {rev or main!r} (no commits?)") from None
    template = _show(repo, commit, SYSTEM_PATH)
    if template is None:
        raise InputError(str(path), f"no {SYSTEM_PATH} at {commit[:12]} ({label})")
    lessons = _show(repo, commit, LESSONS_PATH) or ""
    policies: dict[str, Any] = {}
    raw_policies = _show(repo, commit, POLICIES_PATH)
    if raw_policies:
        try:
            loaded = yaml.safe_load(raw_policies)
            policies = loaded if isinstance(loaded, dict) else {}
        except yaml.YAMLError:
            policies = {}
    return RenderedPrompt(under="rev" if rev else under, repo=str(path.resolve()), rev=label, commit=commit,
                          template=template, lessons=lessons, policies=policies)


class SystemRenderer:
    """Renders one system message per record; counts the records that fell back to raw text."""

    def __init__(self, prompt: RenderedPrompt) -> None:
        self.prompt = prompt
        self.fallbacks = 0
        self._template = None
        self._broken = False
        if prompt.template is not None:
            try:
                check_template(prompt.template, SYSTEM_PATH)
                self._template = template_environment().from_string(prompt.template)
            except (InputError, TemplateError):
                self._broken = True

    @property
    def active(self) -> bool:
        return self.prompt.template is not None

    def fallback_text(self) -> str:
        text = (self.prompt.template or "").rstrip()
        lessons = self.prompt.lessons.strip()
        return f"{text}\n\n## Lessons from earlier runs\n{lessons}\n" if lessons else text + "\n"

    def render(self, traj: Trajectory, tools: list[dict]) -> str:
        if self._template is None or self._broken:
            self.fallbacks += 1
            return self.fallback_text()
        tool_vars = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
                      "parameters": t["function"].get("parameters", {})} for t in tools]
        try:
            return self._template.render(task=task_text(traj), tools=tool_vars, lessons=self.prompt.lessons,
                                         policies=self.prompt.policies)
        except (TemplateError, TypeError, AttributeError, KeyError, ValueError, ArithmeticError, RecursionError,
                MemoryError):  # TemplateError includes the sandbox's SecurityError
            self.fallbacks += 1
            return self.fallback_text()


def task_text(traj: Trajectory) -> str:
    """The task as the agent saw it: ``traj.task``, else the first user message."""
    if traj.task:
        return traj.task
    for m in traj.messages:
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"]
    return ""
