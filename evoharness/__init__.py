"""evoharness: evolve an LLM agent's harness from its own failure traces."""

__version__ = "0.1.0"
