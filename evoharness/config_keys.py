"""Unknown settings are errors that name the closest valid key.

The known keys are read off the `Settings` model itself (nested pydantic models are sections; any
other field is a leaf whose value is free-form, e.g. the ``diagnosis.routing`` table), so a field
added to a section's ``config.py`` is known here at once. A key listed in ``config.REMOVED_KEYS``
(old dotted key -> its replacement) names the replacement instead.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from evoharness.errors import InputError

ENV_PREFIX = "EVOHARNESS_"


def _section_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _section_model(arg)
            if found is not None:
                return found
    return None


def _names(model: type[BaseModel]) -> dict[str, Any]:
    """Field name (and alias) -> its section model, or None for a leaf."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        section = _section_model(info.annotation)
        out[name] = section
        if info.alias:
            out[info.alias] = section
    return out


def known_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key the model accepts (leaves and sections)."""
    keys: list[str] = []
    for name, section in _names(model).items():
        dotted = f"{prefix}{name}"
        keys.append(dotted)
        if section is not None:
            keys += known_keys(section, dotted + ".")
    return keys


def _removed() -> dict[str, str]:
    from evoharness import config  # config imports this module: read its table at call time

    return config.REMOVED_KEYS


def env_name(dotted: str) -> str:
    return ENV_PREFIX + dotted.upper().replace(".", "__")


@dataclass
class UnknownKey:
    """A key no section declares: what to use instead (a replacement, close keys, or the valid ones)."""

    dotted: str
    replacement: str | None = None
    near: list[str] = field(default_factory=list)
    section: str = ""
    valid: list[str] = field(default_factory=list)

    def describe(self, spell: Callable[[str], str] = str) -> str:
        if self.replacement:
            return f"{spell(self.dotted)} was removed: use {self.replacement}"
        head = f"unknown setting {spell(self.dotted)}"
        if self.near:
            return f"{head}; did you mean {' or '.join(spell(k) for k in self.near)}?"
        where = f"in {self.section}" if self.section else "at the top level"
        return f"{head}; valid keys {where}: {', '.join(self.valid)}"


def find_unknown(model: type[BaseModel], dotted: str) -> UnknownKey | None:
    """None when ``dotted`` is a key of ``model`` (or lies inside a free-form table)."""
    removed = _removed()
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):  # the key, or a removed section it lies in (`agent.max_steps`)
        if (gone := ".".join(parts[:i])) in removed:
            return UnknownKey(dotted, replacement=removed[gone])
    node: type[BaseModel] | None = model
    for i, part in enumerate(parts):
        if node is None:  # below a free-form leaf (a table such as diagnosis.routing)
            return None
        names = _names(node)
        if part not in names:
            where = ".".join(parts[:i])
            near = [_completed(model, parts, i, n) for n in difflib.get_close_matches(part, sorted(names), n=1,
                                                                                 cutoff=0.7)]
            near = near or [k for k in known_keys(model) if k.rsplit(".", 1)[-1] == part]
            return UnknownKey(dotted, near=near, section=f"[{where}]" if where else "",
                              valid=sorted(names))
        node = names[part]
    return None


def _completed(model: type[BaseModel], parts: list[str], i: int, name: str) -> str:
    """``parts`` with ``parts[i]`` replaced by ``name``, the rest kept when that makes a valid key."""
    whole = ".".join([*parts[:i], name, *parts[i + 1:]])
    return whole if find_unknown(model, whole) is None else ".".join([*parts[:i], name])


def _dotted_leaves(tree: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        out.append(dotted)
        if isinstance(value, dict):
            out += _dotted_leaves(value, dotted + ".")
    return out


def check_tree(model: type[BaseModel], tree: dict[str, Any], source: str) -> None:
    """Raise `InputError` for the first key of a config tree (a TOML file) the model does not know."""
    for dotted in _dotted_leaves(tree):
        unknown = find_unknown(model, dotted)
        if unknown:
            raise InputError(source, unknown.describe())


def check_override(model: type[BaseModel], dotted: str) -> None:
    """``--set KEY=VALUE``: KEY must be a setting."""
    unknown = find_unknown(model, dotted)
    if unknown:
        raise InputError("--set", unknown.describe())


def env_key(variable: str, model: type[BaseModel]) -> str | None:
    """The dotted setting an ``EVOHARNESS_*`` variable sets, or None when it is not a setting.

    ``EVOHARNESS_A__B`` (double underscore between levels) is always meant as a setting, so an unknown
    one is an error. A variable without ``__`` is a setting only when it names a top-level field
    (``EVOHARNESS_HOME``); otherwise it belongs to something else (``EVOHARNESS_API_TOKEN``, the test
    switches), unless it is a known key written with one underscore where two belong
    (``EVOHARNESS_RUN_BUDGET``), which is an error naming the right spelling.
    """
    if not variable.startswith(ENV_PREFIX):
        return None
    rest = variable[len(ENV_PREFIX):].lower()
    if "__" in rest:
        dotted = rest.replace("__", ".")
        unknown = find_unknown(model, dotted)
        if unknown:
            raise InputError("environment", unknown.describe(env_name))
        return dotted
    names = _names(model)
    if rest in names:
        return rest
    for section, sub in names.items():
        if sub is not None and rest.startswith(section + "_"):
            dotted = f"{section}.{rest[len(section) + 1:]}"
            if find_unknown(model, dotted) is None:
                raise InputError("environment", f"{variable} is not a setting; did you mean {env_name(dotted)}? "
                                 "(two underscores between levels)")
    return None
