"""The tool declarations of the environment a rollout ran in, for the tools its trajectory calls but does not declare.

A rollout of evoharness's own agent records the environment it ran in (``meta["env"]``, a spec such as
``tau2:airline``, and ``meta["env_version"]``) but not the tool schemas the model was offered. Inferred from the
calls, such a tool was exported with an empty description and parameters typed from the argument values, while
the environment declares it with its description (tau2's tools: their docstrings) and parameter schema. `EnvTools`
builds each environment once per export and gives those declarations by tool name; a trajectory without an env
spec, of an env of another version, or of a task or env that cannot be built here gets none (inference, as
before). The environment is looked up at the first tool name asked for: a record whose called tools its trajectory
declares, or one skipped before its tools are read, builds none.

``meta["env"]`` of an ingested trajectory is whatever the client wrote, so the environments built are bounded: at
most ``MAX_ENVS`` distinct specs per export are built (or tried); a trajectory of a further spec that calls a tool
it does not declare gets none and is counted (``past_limit``, the export's ``env_tools_past_limit``). A spec whose
name is no registered environment (``nosuchenv:x``) is never built nor counted against the limit. Until the
thirteenth session every distinct spec was built, and kept for the whole export.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from evoharness.logging import get_logger
from evoharness.traces.models import Trajectory

log = get_logger(__name__)

# The most distinct env specs one export builds (or tries to): the environments a run's rollouts name are a handful
# (one per env and simulated user); more come from trajectories a client wrote.
MAX_ENVS = 16


class EnvTools:
    """``of(traj)``: {tool name: OpenAI tool object} as the trajectory's environment declares them ({} when none).

    ``past_limit``: the trajectories whose declarations were looked up and whose env spec was not built because
    ``limit`` specs were."""

    def __init__(self, limit: int = MAX_ENVS) -> None:
        self.limit = limit
        self.past_limit = 0
        self._envs: dict[str, Any] = {}  # spec -> the environment, or None when it cannot be built here
        self._tools: dict[tuple[str, str], dict[str, dict]] = {}
        self._unknown_logged: set[str] = set()  # specs whose first unknown task was logged (one line per spec)

    def of(self, traj: Trajectory) -> Mapping[str, dict]:
        """``traj``'s environment's declarations, found (its environment built) at the first name looked up."""
        return _Declarations(lambda: self._of(traj))

    def _of(self, traj: Trajectory) -> dict[str, dict]:
        meta = traj.meta if isinstance(traj.meta, dict) else {}
        spec = meta.get("env")
        if not isinstance(spec, str) or not spec:
            return {}
        env = self._env(spec)
        if env is None:
            return {}
        key = (spec, traj.task_id)
        if key not in self._tools:
            self._tools[key] = self._declared(env, spec, traj.task_id, meta.get("env_version"))
        return self._tools[key]

    def _declared(self, env: Any, spec: str, task_id: str, version: Any) -> dict[str, dict]:
        if version is not None and str(version) != str(getattr(env, "version", None)):
            return {}
        try:
            tools = env.tools(env.get_task(task_id))
        except Exception as e:  # noqa: BLE001 - a task this env does not have: the calls' inference, as before
            if spec not in self._unknown_logged:  # once per spec: a file of N tasks the env lacks logged N lines
                self._unknown_logged.add(spec)
                log.info("export.env_tools_unknown_task", env=spec, task_id=task_id, error=f"{type(e).__name__}: {e}",
                         note="the first of this env's unknown tasks; the others are not logged")
            return {}
        out = {}
        for t in tools:
            fn = t.get("function") if isinstance(t, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                out[fn["name"]] = {"type": "function", "function": {
                    "name": fn["name"], "description": str(fn.get("description") or ""),
                    "parameters": fn["parameters"] if isinstance(fn.get("parameters"), dict)
                    else {"type": "object", "properties": {}}}}
        return out

    def _env(self, spec: str) -> Any:
        if spec not in self._envs:
            from evoharness.envs.registry import ENVIRONMENTS, entry_for

            if spec.partition(":")[0] not in ENVIRONMENTS:
                return None  # no environment of that name: nothing to build, nothing kept
            if len(self._envs) >= self.limit:
                if not self.past_limit:
                    log.warning("export.env_tools_limit", limit=self.limit, env=spec,
                                why="more distinct env specs than an export builds: the rest keep inferred tools")
                self.past_limit += 1
                return None
            try:
                self._envs[spec] = entry_for(spec).build(spec)
            except Exception as e:  # noqa: BLE001 - its package or data missing here: the calls' inference
                log.warning("export.env_tools_unavailable", env=spec, error=f"{type(e).__name__}: {e}")
                self._envs[spec] = None
        return self._envs[spec]


class _Declarations(Mapping[str, dict]):
    """A mapping that calls ``find`` for its contents at its first use, and only then."""

    def __init__(self, find: Callable[[], dict[str, dict]]) -> None:
        self._find = find
        self._tools: dict[str, dict] | None = None

    def _all(self) -> dict[str, dict]:
        if self._tools is None:
            self._tools = self._find()
        return self._tools

    def __getitem__(self, name: str) -> dict:
        return self._all()[name]

    def __contains__(self, name: object) -> bool:
        # Mapping's own asks ``self[name]`` and catches the KeyError: a raise for every call of an undeclared tool
        # of a trajectory with no environment (every tau-bench row), ~29k instructions a row
        return name in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())
