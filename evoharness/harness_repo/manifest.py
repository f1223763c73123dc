"""`harness.toml`: editable surfaces, protected paths and how the agent runs."""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evoharness.errors import InputError

MANIFEST_NAME = "harness.toml"

DEFAULT_SURFACES = ["prompts/**", "lessons.md", "policies.yaml", "middleware/**", "tools/**"]
DEFAULT_PROTECTED = ["harness.toml", ".git*", "**/.git*", "scorer/**", "tasks/**", "tests/**"]


class AgentSpec(BaseModel):
    """How a rollout runs the agent: the ``builtin`` reference agent or a ``command``."""

    model_config = ConfigDict(extra="allow")

    kind: Literal["builtin", "command"] = "builtin"
    command: str | None = Field(None, description="shell command (kind = 'command'), run in the checkout")

    @model_validator(mode="after")
    def _command_given(self) -> AgentSpec:
        if self.kind == "command" and not self.command:
            raise ValueError("agent.kind = 'command' needs agent.command")
        return self


class Manifest(BaseModel):
    """The parsed ``harness.toml``. Protected globs win over surfaces."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    main_branch: str = "main"
    surfaces: list[str] = Field(default_factory=lambda: list(DEFAULT_SURFACES))
    protected: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTECTED))
    agent: AgentSpec = Field(default_factory=AgentSpec)

    def is_protected(self, path: str) -> bool:
        return any(glob_match(g, path) for g in self.protected)

    def in_surface(self, path: str) -> bool:
        return any(glob_match(g, path) for g in self.surfaces)

    def editable(self, path: str) -> bool:
        return self.in_surface(path) and not self.is_protected(path)

    @classmethod
    def parse(cls, text: str, source: str = MANIFEST_NAME) -> Manifest:
        try:
            return cls.model_validate(tomllib.loads(text))
        except tomllib.TOMLDecodeError as e:
            raise InputError(source, f"invalid TOML: {e}") from None
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(x) for x in first["loc"])
            raise InputError(source, f"{loc}: {first['msg']}") from None

    @classmethod
    def load(cls, path: Path) -> Manifest:
        if not path.is_file():
            raise InputError(str(path), "no harness.toml (run `evoharness init` or adopt the repo)")
        return cls.parse(path.read_text(encoding="utf-8"), str(path))

    def to_toml(self) -> str:
        lines = [
            "# evoharness harness manifest. Candidates may only edit `surfaces`;",
            "# `protected` globs win over surfaces and are never editable by a candidate.",
            f"version = {self.version}",
            f"main_branch = {_q(self.main_branch)}",
            f"surfaces = [{', '.join(_q(s) for s in self.surfaces)}]",
            f"protected = [{', '.join(_q(s) for s in self.protected)}]",
            "",
            "[agent]",
            "# builtin = the evoharness reference agent; command = run `command` inside the checkout",
        ]
        for key, value in self.agent.model_dump(exclude_none=True).items():
            lines.append(f"{key} = {_toml_value(value)}")
        return "\n".join(lines) + "\n"


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return _q(str(v))


def glob_match(pattern: str, path: str) -> bool:
    """Match a repo-relative posix ``path`` against a glob: ``**`` spans directories, ``*`` does not.

    ``dir/**`` matches everything below ``dir``; ``**/x`` matches ``x`` at any depth.
    """
    return _compile(pattern).fullmatch(path) is not None


@lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))
