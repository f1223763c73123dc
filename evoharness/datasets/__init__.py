"""evoharness.datasets: the training queue and the exporters for weight training.

Public API (import from the submodules; nothing runs at import time):

- ``queue.TrainingQueue(url)``: ``enqueue(traj, label, run_id, round, labeller_fingerprint) -> bool``, ``items(...)``,
  ``status() -> dict``; ``queue.queue_from_settings(settings)``.
- ``export.export_dataset(out, fmt=..., source=..., trajectories=..., queue=..., filters=...,
  prompt=..., placebo=...) -> ExportSummary``; ``export.JsonlSource(path)``.
- ``prompts.resolve_prompt(harness, under)``; ``validate.openai_errors(record)``;
  ``placebo.permute(records, seed)``; ``chat.to_record(traj)``.
"""
