"""evoharness.agent: the reference agent that runs a harness checkout, and scripted models.

Public entry points (import them from their modules; nothing is imported here):
``evoharness.agent.runner.run_rollout``, ``evoharness.agent.runner.make_model``,
``evoharness.agent.scripted.ScriptedModel`` / ``WeakScriptedModel``, and the worker
``python -m evoharness.agent.worker REQUEST.json OUT.json``.
"""
