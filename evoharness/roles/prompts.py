"""Prompt files (``roles/prompts/*.md``) rendered with Jinja2 ``StrictUndefined``.."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

PROMPTS_DIR = Path(__file__).parent / "prompts"


def defuse(text: str) -> str:
    """Trace text cannot close or open the ``<trace-data>`` block the prompts wrap it in."""
    return str(text).replace("</trace-data", "</ trace-data").replace("<trace-data", "< trace-data")


def _json(value: Any, indent: int | None = 1) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False)


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(PROMPTS_DIR), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["json"] = _json
    env.filters["defuse"] = defuse
    return env


def render(name: str, **variables: Any) -> str:
    """Render ``prompts/<name>`` with ``variables``; raises ``jinja2.UndefinedError`` on a missing one."""
    return environment().get_template(name).render(**variables)
