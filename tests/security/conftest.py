"""The sandbox tests' fixtures (a checked bwrap, a harness and work dir, a helper to run python in it)."""

from tests.sandbox.conftest import _reset_logging, bwrap, dirs, run_py  # noqa: F401
