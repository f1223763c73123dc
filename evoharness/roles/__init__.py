"""evoharness.roles: analyst, critic and engineer, playbook (no LLM) and LLM-backed.

``make_roles(kind, cfg, model=None) -> (analyst, critic, engineer)``; the Protocols are in
`evoharness.roles.base`, the data (`Pattern`, `Review`, `HarnessView`) in `evoharness.roles.models`.
"""

from evoharness.roles.errors import RoleError
from evoharness.roles.factory import make_roles

__all__ = ["RoleError", "make_roles"]
