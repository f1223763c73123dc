"""evoharness.sandbox: run rollouts in isolation.

- ``api``: ``RolloutRequest`` and the ``RolloutRunner`` protocol (what verification depends on).
- ``base``: the ``Sandbox`` protocol, ``ProcessSandbox`` (limits, no isolation), ``run_limited``.
- ``bwrap``: ``BwrapSandbox`` (bubblewrap: no network, read-only harness, private /tmp, limits).
- ``models``: ``Limits`` and ``SandboxResult``.
- ``executor``: ``LocalExecutor``, a ``RolloutRunner`` with bounded parallelism.
- ``factory``: ``make_sandbox(backend)`` and ``make_executor(cfg, ...)`` (local | ray) from the ``[sandbox]`` section;
  ``cli``: ``evoharness rollout``.
- ``ray_executor``: ``RayExecutor``, the same rollouts as Ray tasks (trees shipped through the object store).
- ``command_agent``: external agents run as a command: their task file, output formats and scoring.

Nothing is imported here: importing the package does no work.
"""
