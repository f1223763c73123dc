from evoharness.cli import entrypoint

entrypoint()
