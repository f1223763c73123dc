"""The system prompt an export renders its records under: the seed harness's or the evolved one's.

``--render-under seed`` reads ``prompts/system.md``, ``lessons.md`` and ``policies.yaml`` at the
harness repo's root commit; ``evolved`` reads them at main's head; ``DIR@REV`` reads them at REV.
The seed ``system.md`` is a Jinja2 template with the variables ``task``, ``tools``, ``lessons`` and
``policies``; each record is rendered with its own task and tools (``StrictUndefined``). When a
template does not render (a variable it needs is not known here, or the template is broken), the
record gets the raw text followed by the lessons instead, and the export counts it as a fallback.

The template is a candidate's file, i.e. untrusted: it is compiled and rendered in one child process
with its own memory, CPU and wall limits (``evoharness.untrusted_render``), in ``evoharness.untrusted``'s
bounded ``ImmutableSandboxedEnvironment`` (no dunder or private attributes, no imports, no mutation,
bounded ranges, repetition, loop nesting and values). Records are rendered in batches
(``render_many``). A template that tries to reach Python internals, makes a value over the bound or
hits a limit falls back to the raw text like any other template that does not render; a render that
hits a limit is also counted in ``limit_hits`` and logged, and the child is started again for the next
record (after ``RENDER_MAX_HITS`` hits every later record falls back unrendered).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoharness.errors import InputError, missing_reason
from evoharness.logging import get_logger
from evoharness.traces.models import Trajectory
from evoharness.untrusted_render import RenderFailed, RenderLimits, TemplateRenderer

from .models import RenderedPrompt

SYSTEM_PATH = "prompts/system.md"
LESSONS_PATH = "lessons.md"
POLICIES_PATH = "policies.yaml"
MAIN_NAMES = ("main", "master")

log = get_logger(__name__)


def split_harness_arg(harness: str) -> tuple[Path, str | None]:
    """``DIR`` or ``DIR@REV`` -> (dir, rev). A directory whose own name holds '@' wins; else the first '@' after which
    the rest is the revision, so a revision may hold one too (``DIR@main@{1}`` read ``DIR@main`` as the directory)."""
    if Path(harness).is_dir() or "@" not in harness:
        return Path(harness), None
    at = [i for i, ch in enumerate(harness) if ch == "@"]
    cut = next((i for i in at if Path(harness[:i]).is_dir()), at[-1])
    path, rev = harness[:cut], harness[cut + 1:]
    if not rev:  # `DIR@$REV` with REV unset was read as DIR: main's head, without a word
        raise InputError("--harness", f"{harness!r}: no revision after '@' (DIR for main's head, or DIR@REV)")
    return Path(path), rev


def _main_branch(repo) -> str:
    names = {h.name for h in repo.heads}
    for name in MAIN_NAMES:
        if name in names:
            return name
    return "HEAD"


MAX_FILE_BYTES = 4 * 1024 * 1024  # a harness file an export reads (candidate edits stop at 256 KiB)


def _show(repo, commit: str, path: str) -> str | None:
    """``path`` at ``commit`` (None when absent); ``InputError`` over ``MAX_FILE_BYTES``, checked before it
    is read: the repository may hold files no candidate edit could write (plain git, a user's PR)."""
    from git import GitCommandError

    try:
        size = int(repo.git.cat_file("-s", f"{commit}:{path}"))
    except (GitCommandError, ValueError):
        return None
    if size > MAX_FILE_BYTES:
        raise InputError(f"{repo.working_tree_dir}", f"{path} at {commit[:12]} is {size} bytes, over the "
                         f"{MAX_FILE_BYTES}-byte limit for a harness file an export reads")
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
        from evoharness.harness_repo.gitops import damaged_repository

        damaged = damaged_repository(Path(path))
        if damaged is not None:  # a .git git cannot read (HEAD damaged): git says only 'not a git repository'
            raise InputError(str(path), damaged) from None
        raise InputError(str(path), "not a git repository (expected a harness repo)" if Path(path).exists() else
                         missing_reason(path)) from None
    main = _main_branch(repo)
    try:
        if rev is not None:
            commit, label = repo.git.rev_parse("--verify", f"{rev}^{{commit}}"), rev
        elif under == "seed":
            commit, label = repo.git.rev_list("--max-parents=0", main).split()[-1], f"root of {main}"
        else:
            commit, label = repo.git.rev_parse("--verify", f"{main}^{{commit}}"), main
    except (git.GitCommandError, ValueError):  # ValueError: a NUL in REV, which no git argument can hold
        raise InputError(str(path), f"cannot resolve {rev or main!r} (no commits?)") from None
    template = _show(repo, commit, SYSTEM_PATH)
    if template is None:
        raise InputError(str(path), f"no {SYSTEM_PATH} at {commit[:12]} ({label})")
    lessons = _show(repo, commit, LESSONS_PATH) or ""
    policies: dict[str, Any] = {}
    raw_policies = _show(repo, commit, POLICIES_PATH)
    if raw_policies:
        import yaml  # here: an export without --harness reads no policies (PyYAML's import, ~12 ms a process)

        try:
            loaded = yaml.safe_load(raw_policies)
            policies = loaded if isinstance(loaded, dict) else {}
        except yaml.YAMLError:
            policies = {}
    return RenderedPrompt(under="rev" if rev else under, repo=str(path.resolve()), rev=label, commit=commit,
                          template=template, lessons=lessons, policies=policies)


class SystemRenderer:
    """Renders one system message per record in the limited render process; counts the records that
    fell back to raw text (``fallbacks``) and, of them, those whose render hit a limit (``limit_hits``).
    ``close`` ends the render process (the export does, in a ``finally``)."""

    def __init__(self, prompt: RenderedPrompt, limits: RenderLimits | None = None) -> None:
        self.prompt = prompt
        self.fallbacks = 0
        self.limit_hits = 0
        self._renderer = None
        self._gave_up = False
        if prompt.template is not None:
            self._renderer = TemplateRenderer(prompt.template, SYSTEM_PATH, limits=limits, constants={
                "lessons": prompt.lessons, "policies": prompt.policies})

    @property
    def active(self) -> bool:
        return self.prompt.template is not None

    @property
    def batch(self) -> int:
        """How many records ``render_many`` is best given at once."""
        return self._renderer.limits.batch if self._renderer is not None else 1

    def fallback_text(self) -> str:
        text = (self.prompt.template or "").rstrip()
        lessons = self.prompt.lessons.strip()
        return f"{text}\n\n## Lessons from earlier runs\n{lessons}\n" if lessons else text + "\n"

    def render(self, traj: Trajectory, tools: list[dict]) -> str:
        return self.render_many([(traj, tools)])[0]

    def render_many(self, items: list[tuple[Trajectory, list[dict]]]) -> list[str]:
        """The system message of each (trajectory, tools): rendered, or the fallback text."""
        if self._renderer is None:
            self.fallbacks += len(items)
            return [self.fallback_text()] * len(items)
        results = self._renderer.render_many([
            {"task": task_text(traj), "tools": [
                {"name": t["function"]["name"], "description": t["function"].get("description", ""),
                 "parameters": t["function"].get("parameters", {})} for t in tools]}
            for traj, tools in items])
        out = []
        for (traj, _), result in zip(items, results, strict=True):
            if isinstance(result, RenderFailed):
                self.fallbacks += 1
                if result.limit and not self._gave_up:  # the renderer's give-up notice is logged once
                    log.warning("dataset.render_limit", trajectory=traj.id, reason=result.reason)
                    self._gave_up = result is self._renderer.broken
                out.append(self.fallback_text())
            else:
                out.append(result)
        self.limit_hits = self._renderer.limit_hits
        return out

    @property
    def unjailed(self) -> str | None:
        """Why the render process ran without its bubblewrap jail (its limits only); None when it ran jailed
        or never started."""
        r = self._renderer
        return r.unjailed if r is not None and r.jailed is False else None

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()


def task_text(traj: Trajectory) -> str:
    """The task as the agent saw it: ``traj.task``, else the first user message."""
    if traj.task:
        return traj.task
    for m in traj.messages:
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"]
    return ""
