"""Settings section `[service]`: `evoharness serve` (HTTP API and the background loop)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ServiceConfig(BaseModel):
    """The long-lived service. The API token is never a setting: it comes from `EVOHARNESS_API_TOKEN`."""

    model_config = ConfigDict(allow_inf_nan=False)  # inf, nan (TOML reads 1e999 as inf): refused

    host: str = Field("127.0.0.1", description="Address the HTTP API binds to (0.0.0.0 to listen on all).")
    port: int = Field(8321, ge=0, le=65535, description="TCP port of the HTTP API (0: any free port).")
    loop: bool = Field(True, description="Drive runs in the background: resume the current run on start, "
                       "start new runs when the trigger fires. Off: the API only (ingest, review, export).")
    poll_interval_s: float = Field(5.0, gt=0, description="How often the idle loop checks for work "
                                   "(a new run to start, ingested content failures to queue).")
    min_new_process_failures: int = Field(
        1, ge=0,
        description="Trigger: a new run starts when at least this many ingested trajectories labelled as "
        "process failures (F2/F3, lever harness) arrived since the previous run started (or on POST /runs). "
        "0: the first run starts as soon as the service does; after a finished run at least one new process "
        "failure is always needed.")
    max_evidence: int = Field(
        500, ge=0,
        description="A run the service starts gets the ingested process failures (F2/F3) that arrived since the "
        "previous run started as analyst evidence (the most recent this many; 0: none). Written once into the "
        "run's evidence.jsonl; candidates are still verified on the environment's tasks only.")
    run_id: str | None = Field(None, description="Drive this run id (resumed if it exists, else started). "
                               "Unset: the service's current run, or a generated id.")
    shutdown_timeout_s: float = Field(
        120.0, gt=0,
        description="On SIGTERM, wait this long for the running graph node to finish and be checkpointed; "
        "past it the process exits anyway and the node re-runs on resume (nodes are idempotent).")
    max_batch: int = Field(1000, ge=1, description="Most trajectories one POST /trajectories may carry.")
    workers: int = Field(
        1, ge=1, le=64, description="Processes that parse, label and store POST /trajectories batches (canonical "
        "format). 1: in the server process. N > 1: a pool of N worker processes sharing the SQLite ingest store; "
        "a batch is acknowledged once its worker committed it. The HTTP front, the loop and every other endpoint "
        "stay in the server process; the in-flight limit is at least N.")
    max_in_flight: int = Field(
        4, ge=1, description="Most requests handled at once; beyond it an immediate 429 with Retry-After "
        "(/health and /metrics exempt). Ingestion is CPU-bound: more in flight only queues them in the process.")
    max_queued: int = Field(256, ge=0, description="Requests that wait for a slot beyond max_in_flight; "
                            "past them, 429 at once.")
    retry_after_s: int = Field(1, ge=1, description="Retry-After (seconds) sent with a 429 over max_in_flight.")
    body_timeout_s: float = Field(
        60.0, gt=0, le=3600, description="An admitted request must have sent its whole body within this many "
        "seconds (408 otherwise), so slow or stalled clients cannot hold the max_in_flight slots.")
    max_body_mb: float = Field(64.0, gt=0, description="Largest request body accepted, in MiB (413 above); a gzip "
                                                        "body is held to it once inflated too.")
    protect_reads: bool = Field(False, description="Also require the bearer token on read endpoints "
                                "(GET /runs, /candidates, /composition, /metrics). /health stays open.")
