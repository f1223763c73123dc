"""Template injection: a candidate's ``prompts/system.md`` is rendered on the host by ``dataset export
--render-under``. Jinja payloads that reach Python internals (SSTI), mutate what they are given or burn
the host's CPU and memory must run nothing: the record falls back to the raw text, quickly."""

from __future__ import annotations

import json
import resource
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


# Values made without a binop (a filter with a size argument, `~` growth): each at a small, cheap size whose
# intermediate value is over MAX_RENDER_CHARS while the output is short, so the final length check cannot
# see it. At full size they took the host's memory (`center(4000000000)`, 2**40 characters) during
# `dataset export --render-under`; strict xfails before the values were bounded (docs/security.md).
UNBOUNDED = {
    "filter_width": '{{ ("x" | center(3000000)) | length }}',
    "concat_doubling": '{% set ns = namespace(s="x") %}{% for i in range(22) %}{% set ns.s = ns.s ~ ns.s %}'
                       '{% endfor %}{{ ns.s | length }}',
    "batch_fill": '{{ ([1] | batch(3000000, 0) | first) | length }}',
}


@pytest.mark.parametrize("name", list(UNBOUNDED))
def test_render_template_refuses_values_over_the_bound_made_without_binops(name):
    with pytest.raises(Exception) as e:  # noqa: PT011 -- an InputError is the one right answer
        render_template(UNBOUNDED[name], "prompts/system.md", task="t", tools=[], lessons="", policies={})
    assert type(e.value).__name__ == "InputError"
    assert "over 2000000 items" in str(e.value)


# What no value check sees: an allocation the sandbox checks only after it is made (a `format` width),
# a template whose constant filter calls Jinja folds while compiling (150 folded values of 1.9 M characters
# each), three loops over bounded ranges (10**9 iterations, about half a minute of CPU without a limit).
# The host must not pay for any of them: the render process's memory and CPU limits end each.
LIMITS = {
    "memory": ('{{ ("%0900000000d" | format(1)) | length }}', "memory limit"),
    "compile_folding": ('{{ "x" | center(1900000) }}' * 150, "memory limit"),
    "cpu": ("{% for a in range(10000) %}{% for b in range(10000) %}{% for c in range(10) %}{% endfor %}"
            "{% endfor %}{% endfor %}done", "CPU-second limit"),
}


@pytest.mark.parametrize("name", list(LIMITS))
def test_render_template_hits_the_render_process_limits_not_the_host(name):
    template, reason = LIMITS[name]
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(Exception) as e:  # noqa: PT011 -- an InputError is the one right answer
        render_template(template, "prompts/system.md", task="t", tools=[], lessons="", policies={})
    assert type(e.value).__name__ == "InputError"
    assert reason in str(e.value)
    # this process's peak resident memory (KiB) did not take the 900 MB value or the folded constants
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 200 * 1024


def test_export_goes_on_after_a_record_whose_render_hits_a_limit(tmp_path):
    """One record's task makes the template loop for minutes: that record falls back (counted as a limit
    hit), the render process is started again, and the records after it render as before."""
    repo = init_harness(tmp_path / "harness")
    g = git.Repo(repo.path)
    (repo.path / "prompts" / "system.md").write_text(
        '{% if "bomb" in task %}{% for a in range(10000) %}{% for b in range(10000) %}{% for c in range(10) %}'
        "{% endfor %}{% endfor %}{% endfor %}{% endif %}Rendered for: {{ task }}\n")
    g.index.add(["prompts/system.md"])
    g.index.commit("a template that loops on one task")
    tasks = ["first task", "a bomb task", "third task", "fourth task"]
    trajs = [Trajectory(id=f"t{i}", task_id=f"task_{i}", task=task,
                        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": task},
                                  {"role": "assistant", "content": "done"}],
                        final_answer="done", score=1.0, termination="delivered", meta={"env": "synthetic"})
             for i, task in enumerate(tasks)]
    src = tmp_path / "t.jsonl"
    write_trajectories(src, trajs)
    code = main(["dataset", "export", "--out", str(tmp_path / "out"), "--source", "all", "-t", str(src),
                 "--harness", str(repo.path), "--render-under", "evolved"])
    assert code == 0
    systems = [json.loads(line)["messages"][0]["content"].rstrip()
               for line in (tmp_path / "out" / "data.jsonl").read_text().splitlines()]
    assert systems[0] == "Rendered for: first task"
    assert systems[1].startswith('{% if "bomb" in task %}')  # the raw template: the fallback
    assert systems[2:] == ["Rendered for: third task", "Rendered for: fourth task"]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "1 record fell back" in card and "1 render hit the render process's" in card


def test_an_oversized_harness_file_is_one_error_line_before_it_is_read(tmp_path, capsys):
    """`--render-under` reads the harness's files with git: a 5 MiB `lessons.md` committed with plain git
    (no candidate edit could write it) is refused by its size, before it is read into memory."""
    repo = init_harness(tmp_path / "harness")
    g = git.Repo(repo.path)
    (repo.path / "lessons.md").write_text("a lesson\n" * (5 * 1024 * 1024 // 9 + 1))
    g.index.add(["lessons.md"])
    g.index.commit("a huge lessons file")
    src = tmp_path / "t.jsonl"
    write_trajectories(src, [Trajectory(id="t1", task_id="k", messages=[{"role": "user", "content": "hi"},
                                                                        {"role": "assistant", "content": "ok"}],
                                        final_answer="ok", score=1.0, termination="delivered")])
    code = main(["dataset", "export", "--out", str(tmp_path / "out"), "--source", "all", "-t", str(src),
                 "--harness", str(repo.path), "--render-under", "evolved"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error:") and "lessons.md" in err[0] and "limit" in err[0], err
    assert not (tmp_path / "out" / "data.jsonl").exists()
