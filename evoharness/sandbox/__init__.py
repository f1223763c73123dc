"""evoharness.sandbox: run rollouts in isolation.

- ``api``: ``RolloutRequest`` and the ``RolloutRunner`` protocol (what verification depends on).
- ``base``: the ``Sandbox`` protocol, ``ProcessSandbox`` (limits, no isolation), ``run_limited``.
- ``bwrap``: ``BwrapSandbox`` (bubblewrap: no network, read-only harness, private /tmp, limits).
- ``models``: ``Limits`` and ``SandboxResult``.
- ``executor``: ``LocalExecutor``, a ``RolloutRunner`` with bounded parallelism.
- ``factory``: ``make_sandbox(backend)`` from settings; ``cli``: ``evoharness rollout``.

Nothing is imported here: importing the package does no work.
"""
