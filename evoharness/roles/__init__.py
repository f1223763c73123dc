"""evoharness.roles: analyst, critic and engineer, playbook (no LLM) and LLM-backed.

``make_roles(kind, cfg, model=None) -> (analyst, critic, engineer)``; the Protocols are in
`evoharness.roles.base`, the data (`Pattern`, `Review`, `HarnessView`) in `evoharness.roles.models`.

``make_roles`` and ``RoleError`` are imported on first use (PEP 562): the settings import ``roles.config``, which
runs this file first, and every command reads the settings; importing the factory here (the playbook, the guard,
GitPython, PyYAML: ~0.14 s of CPU) made every command pay for roles it never makes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evoharness.roles.errors import RoleError
    from evoharness.roles.factory import make_roles

__all__ = ["RoleError", "make_roles"]


def __getattr__(name: str):
    if name == "make_roles":
        from evoharness.roles.factory import make_roles

        return make_roles
    if name == "RoleError":
        from evoharness.roles.errors import RoleError

        return RoleError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
