"""The roles' model endpoint down is an infrastructure failure: the run pauses, as for the rollouts' endpoint.

`evoharness run` (or the service's run) with `roles.kind = "llm"` and the endpoint refusing connections, answering
503 or at a wrong `roles.base_url` (404) dropped the round ("analyst failed: ... Connection refused"), went on to the
next and ended `round limit (N) reached`, exit 0: every round spent on nothing and the run done, never to be resumed.
"""

from __future__ import annotations

import json

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness
from tests.http_fakes import completion, replying


def test_a_run_whose_roles_endpoint_is_down_pauses_and_resumes_once_it_answers(tmp_path, capsys):
    init_harness(tmp_path / "harness")
    answer = {"now": (503, {"Content-Type": "text/plain"}, b"upstream unavailable")}
    with replying(lambda: answer["now"]) as url:
        given = ["--set", f"home={tmp_path / 'state'}", "--set", f"run.harness={tmp_path / 'harness'}",
                 "--set", "run.env=synthetic", "--set", "run.model=scripted:weak", "--set", "run.rollouts=2",
                 "--set", "run.max_rounds=2", "--set", "sandbox.backend=inprocess", "--set", "roles.kind=llm",
                 "--set", "roles.model=openai:m", "--set", f"roles.base_url={url}", "--set", "roles.max_retries=1",
                 "--set", "log_level=error"]
        assert main([*given, "run", "--run-id", "r"]) == 2
        err = capsys.readouterr().err
        [line] = [x for x in err.splitlines() if x.startswith("error:")]
        assert "] analyst: asking openai:m about 13 process failure(s)\n" in err  # said before the wait
        assert line.startswith("error: run r paused: analyst: "), line
        assert "HTTP 503: upstream unavailable" in line and "run --resume r`" in line, line
        assert not (tmp_path / "state" / "runs" / "r" / "summary.json").exists()

        answer["now"] = completion("no JSON here")  # the model answers, badly: the role's failure, not the run's
        assert main([*given[:2], "run", "--resume", "r"]) == 0
    summary = json.loads((tmp_path / "state" / "runs" / "r" / "summary.json").read_text())
    assert summary["stop_reason"] == "round limit (2) reached"
    assert [d["reason"].split(":")[0] for d in summary["dropped"]] == ["analyst failed"] * 2
