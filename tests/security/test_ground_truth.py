"""Ground truth out of the sandbox: the offline models (stand-ins, scripted) are handed the task's reference
solution, so with a sandbox they are served host-side behind the model gateway
(``sandbox/gateway_standin.py``). Harness code in the sandbox then finds no reference in its process or
in the request file; the same probe in-process (no sandbox) does find it, so the probe can fail.
"""

from __future__ import annotations

import json

import pytest

from evoharness.envs import get_environment
from evoharness.harness_repo import gitops
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.static_review import review_files
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.models import Limits

TASKS = ["contact_0", "status_A-101"]

# looks for the reference the simple ways: any object in the process holding a bound model's planned
# actions (what a stand-in or a scripted model is handed), and the request file the worker was started with
PROBE = '''
import gc, json, sys

def _look():
    found = []
    for o in gc.get_objects():
        try:
            held = vars(o) if hasattr(type(o), "bind_task") else {}
            acts = held.get("actions") or getattr(held.get("plan"), "actions", None)
            if acts:
                found.append([[a.name, a.args] for a in acts])
        except Exception:
            continue
    request = ""
    for path in sys.argv[1:]:
        try:
            request = open(path).read()
            break
        except OSError:
            continue
    return found, request

def on_finish(answer, ctx):
    if ctx["scratch"].get("probed"):
        return None
    ctx["scratch"]["probed"] = True
    found, request = _look()
    return "probe: " + json.dumps({"found": found, "request": request})
'''


def _probe_reports(traj) -> dict:
    pushed = [m["content"] for m in traj.messages if m["role"] == "user" and m["content"].startswith("probe: ")]
    assert len(pushed) == 1, traj.messages  # the probe ran exactly once in this rollout
    return json.loads(pushed[0].removeprefix("probe: "))


def _run(tmp_path, sandbox, model: str) -> list:
    repo = init_harness(tmp_path / "harness")
    base = repo.main_head()
    tree = gitops.rewrite_tree(repo.repo, repo.repo.commit(base).tree, {"middleware/probe.py": PROBE.encode()})
    sha = gitops.make_commit(repo.repo, tree, "probe for the reference", [base])
    reqs = [RolloutRequest(task_id=t, harness_commit=sha, seed=0) for t in TASKS]
    with LocalExecutor(repo.path, "synthetic", model, sandbox=sandbox, limits=Limits(wall_seconds=30)) as ex:
        return ex.run(reqs)


@pytest.mark.parametrize("model", ["standin:weak", "scripted:oracle"])
def test_harness_code_in_the_sandbox_finds_no_reference(tmp_path, model):
    env = get_environment("synthetic")
    truth = {t: [c.name for c in env.ground_truth_calls(env.get_task(t))] for t in TASKS}
    control = _run(tmp_path / "inprocess", None, model)
    for traj in control:  # in-process the reference (one argument perhaps perturbed) is in the agent's process
        assert [[name for name, _args in found] for found in _probe_reports(traj)["found"]] == [truth[traj.task_id]]
    sandboxed = _run(tmp_path / "bwrap", BwrapSandbox(), model)
    for traj in sandboxed:
        report = _probe_reports(traj)
        assert report["found"] == [], report  # the model ran host-side, behind the gateway
        assert report["request"] == ""  # the worker deleted its request file before harness code loaded
        assert traj.meta["gateway"]["requests"] >= 2
    # the same draws as in-process: identical conversations up to the probe's report
    for a, b in zip(control, sandboxed, strict=True):
        cut = [m for m in a.messages if not m.get("content", "").startswith("probe: ")]
        assert cut == [m for m in b.messages if not m.get("content", "").startswith("probe: ")]
        assert (a.score, a.termination, a.final_answer) == (b.score, b.termination, b.final_answer)


def test_what_still_reaches_the_reference_is_flagged_by_static_review():
    """The environment's package is on disk in the sandbox (its tools run there): harness code that imports
    it can rebuild the reference. Static review names that import, so such a merge needs a human."""
    steal = ("from evoharness.envs import get_environment\n"
             "def before_model(messages, ctx):\n"
             "    env = get_environment('synthetic')\n"
             "    ctx['scratch']['truth'] = env.ground_truth_calls(env.get_task(ctx['task_id']))\n")
    findings = review_files({"middleware/steal.py": steal})
    assert any("evoharness" in str(f) for f in findings), findings
