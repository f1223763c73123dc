"""Template injection: a candidate's ``prompts/system.md`` is rendered on the host by ``dataset export
--render-under``. Jinja payloads that reach Python internals (SSTI), mutate what they are given or burn
the host's CPU and memory must run nothing: the record falls back to the raw text, quickly."""

from __future__ import annotations

import time

import git
import pytest

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness
from evoharness.traces.models import Trajectory
from evoharness.traces.store import write_trajectories
from evoharness.untrusted import render_template


def payloads(mark: str) -> dict[str, str]:
    cmd = f"touch {mark}"
    return {
        "cycler_globals": "{{ cycler.__init__.__globals__.os.popen('" + cmd + "').read() }}",
        "lipsum_globals": "{{ lipsum.__globals__['os'].system('" + cmd + "') }}",
        "subclasses": "{% for c in ''.__class__.__mro__[1].__subclasses__() %}{% if c.__name__ == 'Popen' %}"
                      "{{ c(['touch', '" + mark + "']) }}{% endif %}{% endfor %}",
        "attr_filter": "{{ (cycler|attr('__init__')|attr('__globals__'))['os'].system('" + cmd + "') }}",
        "format_escape": "{{ '{0.__class__.__init__.__globals__}'.format(cycler) }}",
        "mutation": "{{ policies.update({'max_steps': 1}) }}{{ policies.clear() }}",
        "huge_range": "{% for i in range(10**9) %}x{% endfor %}",
        "huge_repeat": "{{ 'x' * 10**10 }}",
        "huge_power": "{{ 10 ** 10 ** 10 }}",
        "nested_loops": "{% for a in tools %}{% for b in tools %}{% for c in tools %}{% for d in tools %}"
                        "{{ a }}{% endfor %}{% endfor %}{% endfor %}{% endfor %}",
        "deep_nesting": "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
    }


@pytest.mark.parametrize("name", list(payloads("M")))
def test_render_template_refuses_each_payload(tmp_path, name):
    mark = tmp_path / "pwned"
    start = time.monotonic()
    policies = {"max_steps": 12}
    try:
        out = render_template(payloads(str(mark))[name], "prompts/system.md", task="t", tools=[{"name": "x"}],
                              lessons="", policies=policies)
    except Exception as e:  # noqa: BLE001 -- the only acceptable failure is an InputError
        assert type(e).__name__ == "InputError", repr(e)
    else:  # rendered: only harmless text (format_escape renders the string, not the object's internals)
        assert "__globals__" not in out or name == "format_escape"
        assert "<module 'os'" not in out and "function" not in out
    assert not mark.exists()
    assert policies == {"max_steps": 12}
    assert time.monotonic() - start < 5


def test_dataset_export_renders_no_payload_on_the_host(tmp_path):
    mark = tmp_path / "pwned-by-export"
    repo = init_harness(tmp_path / "harness")
    bad = "\n".join(payloads(str(mark)).values())
    g = git.Repo(repo.path)
    (repo.path / "prompts" / "system.md").write_text("Evil prompt.\n" + bad + "\n")
    g.index.add(["prompts/system.md"])
    g.index.commit("candidate template with payloads")
    traj = Trajectory(id="t1", task_id="contact_0", messages=[{"role": "system", "content": "s"},
                                                             {"role": "user", "content": "hi"},
                                                             {"role": "assistant", "content": "done"}],
                      final_answer="done", score=1.0, termination="delivered", meta={"env": "synthetic"})
    src = tmp_path / "t.jsonl"
    write_trajectories(src, [traj])
    start = time.monotonic()
    code = main(["dataset", "export", "--out", str(tmp_path / "out"), "--source", "all", "-t", str(src),
                 "--harness", str(repo.path), "--render-under", "evolved"])
    assert code == 0
    assert time.monotonic() - start < 30
    assert not mark.exists()
    record = (tmp_path / "out" / "data.jsonl").read_text()
    assert "Evil prompt." in record  # fell back to the raw text: nothing was evaluated
    assert "fell back" in (tmp_path / "out" / "README.md").read_text()


def test_control_plain_jinja_runs_the_payload(tmp_path):
    """Control: an ordinary ``jinja2.Environment`` runs the first payload (so the tests above can fail)."""
    import jinja2

    mark = tmp_path / "pwned"
    jinja2.Environment().from_string(payloads(str(mark))["cycler_globals"]).render()
    assert mark.exists()


# Bombs the bounds above do not catch yet (a filter with a size argument, `~` growth, loops 3 deep over
# bounded ranges): each is shown here at a small, cheap size whose intermediate value is still over
# MAX_RENDER_CHARS while the output is short, so the final length check cannot see it. At full size they
# take the host's memory (`center(4000000000)`, 2**40 characters) or hours of CPU (10,000**3 iterations)
# during `dataset export --render-under`. Compile-time constant folding evaluates the first one before
# anything renders. docs/security.md lists them as not bounded; strict: a fix makes these pass.
UNBOUNDED = {
    "filter_width": '{{ ("x" | center(3000000)) | length }}',
    "concat_doubling": '{% set ns = namespace(s="x") %}{% for i in range(22) %}{% set ns.s = ns.s ~ ns.s %}'
                       '{% endfor %}{{ ns.s | length }}',
    "batch_fill": '{{ ([1] | batch(3000000, 0) | first) | length }}',
}


@pytest.mark.xfail(strict=True, reason="filters and `~` are not bounded on the host yet (docs/security.md)")
@pytest.mark.parametrize("name", list(UNBOUNDED))
def test_render_template_refuses_values_over_the_bound_made_without_binops(name):
    with pytest.raises(Exception) as e:  # noqa: PT011 -- an InputError is the one right answer
        render_template(UNBOUNDED[name], "prompts/system.md", task="t", tools=[], lessons="", policies={})
    assert type(e.value).__name__ == "InputError"
