"""A fork server's prepared template and policies (``agent.harness.prepare``): the same as parsing afresh."""

from __future__ import annotations

import os

import pytest

from evoharness.agent import harness as H
from evoharness.harness_repo.init import init_harness


@pytest.fixture(autouse=True)
def _empty_memo(monkeypatch):
    monkeypatch.setattr(H, "_PREPARED_TEMPLATES", {})
    monkeypatch.setattr(H, "_PREPARED_POLICIES", {})


def _render(root) -> tuple[str, dict]:
    h = H.load_harness(root)
    return h.render_system("Find Ada's email.", [{"name": "lookup_contact", "description": "by name"}]), h.policies


def test_a_prepared_harness_renders_and_reads_as_one_parsed_afresh(tmp_path):
    root = init_harness(tmp_path / "h").path
    (root / "policies.yaml").write_text("max_steps: 9\nloop_guard:\n  enabled: true\nextra_key: [1, 2]\n")
    fresh = _render(root)
    assert H.prepare(root) and len(H._PREPARED_TEMPLATES) == 1 and len(H._PREPARED_POLICIES) == 1
    assert not H.prepare(root)  # once per text
    prompt, policies = _render(root)
    assert (prompt, policies) == fresh and policies["max_steps"] == 9
    policies["loop_guard"]["enabled"] = False  # a rollout's copy: the prepared entry is untouched
    assert _render(root)[1]["loop_guard"]["enabled"] is True
    (root / "prompts" / "system.md").write_text("Only: {{ task }}")  # another text is never served from the memo
    (root / "policies.yaml").write_text("max_steps: 3\n")
    assert _render(root) == ("Only: Find Ada's email.", H.Policies(max_steps=3).model_dump())


def test_prepare_leaves_odd_files_and_broken_text_to_the_rollout(tmp_path):
    root = init_harness(tmp_path / "h").path
    prompt = root / "prompts" / "system.md"
    prompt.unlink()
    os.mkfifo(prompt)  # never opened for reading by the server (it would block)
    (root / "policies.yaml").write_text("base: &b {enabled: true}\nloop_guard: *b\n")  # anchors: may expand
    assert not H.prepare(root) and H._PREPARED_TEMPLATES == {} and H._PREPARED_POLICIES == {}
    prompt.unlink()
    prompt.write_text("{% for x in %}")  # does not compile: the rollout reports it as before
    (root / "policies.yaml").write_text("max_steps: [")
    assert not H.prepare(root)
    with pytest.raises(H.HarnessError, match="policies.yaml: invalid YAML"):
        H.load_harness(root)
    (root / "policies.yaml").write_text("max_steps: 5\n")
    with pytest.raises(H.HarnessError, match="prompts/system.md: TemplateSyntaxError"):
        _render(root)


def test_a_template_that_folds_into_a_large_constant_is_not_kept_by_the_server(tmp_path):
    """Jinja folds `"x" | center(N)` (and a filled batch) while compiling and the compiled code keeps the result:
    the fork server, which serves every commit, must not hold it after this commit's rollouts (it would take
    that memory from the sandbox the next commits' rollouts share). The rollout still renders it."""
    root = init_harness(tmp_path / "h").path
    prompt = root / "prompts" / "system.md"
    for text in ('{{ "x" | center(1500000) }}{{ task }}', '{% set b = [1] | batch(300000, 0) | first %}{{ task }}'):
        prompt.write_text(text)
        H.prepare(root)  # (its policies.yaml is kept)
        assert text in H._PREPARED_TEMPLATES and H._PREPARED_TEMPLATES[text] is None, text  # not tried again
    assert _render(root)[0] == "Find Ada's email."  # left to the rollout, which renders it as before
    long = "{{ task }} " + "plain text " * 20_000  # a long template folds into nothing larger
    prompt.write_text(long)
    H.prepare(root)
    assert H._PREPARED_TEMPLATES[long] is not None


def test_the_fork_server_prepares_the_tree_it_is_told_of_and_the_executor_tells_it(tmp_path, monkeypatch):
    from evoharness.agent import forkserver
    from evoharness.sandbox import executor as ex_mod
    from evoharness.sandbox.bwrap import BwrapSandbox

    repo = init_harness(tmp_path / "h")
    root = repo.path
    forkserver._prepare(str(root))  # what serve() does before each fork, with the spec's harness_dir
    assert list(H._PREPARED_TEMPLATES) == [(root / "prompts" / "system.md").read_text()]
    assert list(H._PREPARED_POLICIES) == [(root / "policies.yaml").read_text()]
    specs = []

    class Capture(ex_mod.WarmWorker):
        def __init__(self, *a, warm, **kw):
            specs.append(dict(warm))
            super().__init__(*a, warm=warm, **kw)

    monkeypatch.setattr(ex_mod, "WarmWorker", Capture)
    from evoharness.sandbox.api import RolloutRequest

    with ex_mod.LocalExecutor(root, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), batch_size=2) as ex:
        traj = ex.run([RolloutRequest(task_id="contact_0", harness_commit=repo.main_head(), seed=0)])[0]
    assert specs and specs[0]["harness_dir"] == "/harness" and not traj.meta.get("rollout_failure")


def test_prepared_module_code_runs_afresh_per_load_and_only_for_the_same_bytes(tmp_path, monkeypatch):
    """A fork server compiles the harness's modules once (``prepare_code``); each rollout still gets a new module with
    fresh globals, runs its body again, and gets the prepared code only for the exact bytes it was compiled from."""
    monkeypatch.setattr(H, "_PREPARED_CODE", {})
    root = init_harness(tmp_path / "h").path
    mod = root / "middleware" / "count.py"
    mod.write_text("CALLS = []\nLOADED = len(CALLS)\ndef before_model(messages, ctx):\n    CALLS.append(1)\n"
                   "    return None\n")
    assert H.prepare_code(root) and not H.prepare_code(root)  # once per text
    code = H._PREPARED_CODE[(str(mod), mod.read_bytes())]
    hooks = []
    for _ in range(2):
        fn = next(h.function for h in H.load_harness(root).hooks["before_model"] if h.module == "count.py")
        assert fn.__code__ in code.co_consts  # the prepared code ran, not a fresh compile
        fn([], {})
        assert fn.__globals__["CALLS"] == [1] and fn.__globals__["LOADED"] == 0  # fresh globals each load
        hooks.append(fn)
    assert hooks[0].__globals__ is not hooks[1].__globals__
    mod.write_text("def before_model(messages, ctx):\n    return 'changed'\n")  # other bytes: compiled afresh
    fn = next(h.function for h in H.load_harness(root).hooks["before_model"] if h.module == "count.py")
    assert fn([], {}) == "changed" and fn.__code__ not in code.co_consts
    mod.write_text("def before_model(:\n")  # does not compile: left to the rollout, which reports it as before
    assert not H.prepare_code(root)
    with pytest.raises(H.HarnessError, match="middleware/count.py: SyntaxError"):
        H.load_harness(root)
    mod.unlink()
    os.mkfifo(mod)  # never opened for reading
    assert not H.prepare_code(root)


def test_in_process_rollouts_compile_a_template_once_and_read_as_if_compiled_afresh(tmp_path, monkeypatch):
    """The in-process executor prepares each tree as a fork server does (``LocalExecutor(prepare=True)``, the
    default): 8 rollouts of one commit compile its template once, not 8 times, and every trajectory is the one a
    rollout compiling its own template gives (``prepare=False``), a harness with a middleware module included."""
    from evoharness import untrusted
    from evoharness.sandbox.api import RolloutRequest
    from evoharness.sandbox.executor import LocalExecutor

    monkeypatch.setattr(H, "_PREPARED_CODE", {})
    repo = init_harness(tmp_path / "h")
    (repo.path / "middleware" / "count.py").write_text(
        "RUNS = []\ndef before_model(messages, ctx):\n    RUNS.append(1)\n    return None\n")
    repo.repo.index.add(["middleware/count.py"])
    commit = repo.repo.index.commit("a middleware with module state").hexsha
    compiled = []
    made = untrusted.template_environment

    def counting():
        env = made()
        real = env.from_string
        env.from_string = lambda source, *a, **kw: compiled.append(source) or real(source, *a, **kw)
        return env

    monkeypatch.setattr(untrusted, "template_environment", counting)
    reqs = [RolloutRequest(task_id=t, harness_commit=commit, seed=s) for t in ("contact_0", "status_A-101")
            for s in range(4)]
    runs = {}
    for prepare in (False, True):
        compiled.clear()
        H._PREPARED_TEMPLATES.clear()
        with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=None, workers=2, prepare=prepare) as ex:
            trajs = ex.run(reqs)
        assert not [t.meta.get("rollout_failure") for t in trajs if t.meta.get("rollout_failure")]
        runs[prepare] = ([t.model_dump(exclude={"id", "meta", "usage", "started_at", "ended_at"}) for t in trajs],
                         len(compiled))
    assert runs[False][1] == len(reqs) and runs[True][1] == 1  # compiled per rollout, then once per text
    assert runs[True][0] == runs[False][0]  # the same messages, answers and scores
