"""A run the service paused (an endpoint down) says why for as long as it is paused, and goes on when resumed.

The pause's reason was in /health's `last_error` for one poll of the loop (`service.poll_interval_s`), then gone:
the next idle step cleared it, and `GET /runs/{id}` said only `phase: paused`, so a user who looked later saw a
paused run and no reason anywhere but the log.
"""

from __future__ import annotations

import threading
import time

from tests.http_fakes import completion, replying
from tests.service.helpers import wait_for


def test_a_paused_run_says_why_until_it_is_resumed(serve):
    answer = {"now": (503, {"Content-Type": "text/plain"}, b"upstream unavailable"), "go": threading.Event()}

    def reply():
        if "slow" in answer:  # after the resume: held until the test has looked
            answer["slow"].set()
            answer["go"].wait(60)
        return answer["now"]

    with replying(reply) as url:
        roles = {"EVOHARNESS_ROLES__KIND": "llm", "EVOHARNESS_ROLES__MODEL": "openai:m",
                 "EVOHARNESS_ROLES__BASE_URL": url, "EVOHARNESS_ROLES__MAX_RETRIES": "0"}
        server = serve(run={"max_rounds": 1}, env=roles)
        with server.client() as c:
            run_id = wait_for(lambda: c.get("/health").json()["current_run"], what="the first run")
            view = wait_for(lambda: (v := c.get(f"/runs/{run_id}").json())["phase"] == "paused" and v,
                            timeout=120, what="the run to pause")
            time.sleep(10 * 0.2)  # ten polls of the idle loop
            health, view = c.get("/health").json(), c.get(f"/runs/{run_id}").json()
            assert view["phase"] == "paused"
            why = f"run {run_id} paused: analyst: model call failed: HTTP 503: upstream unavailable"
            assert (health["last_error"] or "").startswith(why), health
            assert view["paused_by"].startswith(why), view

            answer["now"] = completion("no JSON here")  # back, and the model answers (badly: the role's failure)
            answer["slow"] = asked = threading.Event()
            assert c.post(f"/runs/{run_id}/resume").status_code == 202
            assert asked.wait(60)  # the analyst is being answered: the run goes on, and the pause is over
            health, view = c.get("/health").json(), c.get(f"/runs/{run_id}").json()
            assert view["phase"] == "running" and "paused_by" not in view, view
            assert health["last_error"] is None, health  # it said the pause for the whole drive
            answer["go"].set()
            view = wait_for(lambda: (v := c.get(f"/runs/{run_id}").json())["phase"] == "done" and v,
                            timeout=120, what="the run to end")
            assert "paused_by" not in view and c.get("/health").json()["last_error"] is None
            assert [d["reason"].split(":")[0] for d in view["summary"]["dropped"]] == ["analyst failed"]
