"""`Registry`: name -> entry, with no default branch.

Every pluggable kind of thing (environments, models, export formats, verification strategies,
detectors, trace importers) lives in one registry of its own module. Looking up a name that is
not registered is one `InputError` that lists the valid names; nothing falls through to a
default. Adding a kind of thing is one ``register`` call beside its own module
(`docs/extending.md` lists the exact files).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from evoharness.errors import InputError

E = TypeVar("E")


class Registry(Generic[E]):
    """Entries by name. ``kind`` names what is registered in errors ("export format"); ``option`` is
    the option or setting the name came from ("--format")."""

    def __init__(self, kind: str, option: str) -> None:
        self.kind = kind
        self.option = option
        self._entries: dict[str, E] = {}

    def register(self, name: str, entry: E) -> E:
        if not name or name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered (or empty)")
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> E:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise InputError(self.option, f"unknown {self.kind} {name!r} (valid: {', '.join(self.names())})") from None

    def names(self) -> list[str]:
        return list(self._entries)

    def items(self) -> list[tuple[str, E]]:
        return list(self._entries.items())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
