"""A plain `serve` starts no run until there is work, and says where its harness is."""

from __future__ import annotations

import time

from tests.service.helpers import Server, write_config


def test_a_fresh_service_waits_for_work_and_says_so(tmp_path):
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("min_new_process_failures = 0\n", ""))  # the default trigger
    server = Server(cfg).start()
    try:
        c = server.client()
        time.sleep(1.0)  # five poll intervals
        health = c.get("/health").json()
        assert health["current_run"] is None and health["auto_runs"] is True and health["worker_alive"] is True
        assert f"harness {tmp_path / 'harness'} (created now: a seed harness)" in server.output()
        assert "runs: on POST /runs, or once 1 ingested process failure(s) arrive" in server.output()
    finally:
        server.stop()
