"""Entry point for LangGraph Studio (`langgraph.json`): a factory, so nothing is built at import."""

from __future__ import annotations

from evoharness.config import load_settings
from evoharness.graph.graph import build_graph
from evoharness.graph.progress import Progress
from evoharness.graph.runner import runs_dir
from evoharness.graph.wiring import build_services


def graph(config: dict | None = None):
    """Build the run graph from `evoharness.toml` (or defaults) in the current directory."""
    settings = load_settings()
    run_dir = runs_dir(settings) / "studio"
    run_dir.mkdir(parents=True, exist_ok=True)
    services = build_services(settings, run_dir, Progress())
    return build_graph(services, review=settings.run.review)
