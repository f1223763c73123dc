"""The host-side render process (``evoharness.untrusted_render``): a render that hits a limit fails alone,
the process is started again for the records after it, a template that hits limits again and again is
given up on, and no process is left behind."""

from __future__ import annotations

import os

import pytest

from evoharness.untrusted_render import RenderFailed, RenderLimits, TemplateRenderer

# 10**9 loop iterations (about half a minute of CPU) when ``bomb`` is true, else one line
TEMPLATE = ("{% if bomb %}{% for a in range(10000) %}{% for b in range(10000) %}{% for c in range(10) %}"
            "{% endfor %}{% endfor %}{% endfor %}{% endif %}record {{ n }} {{ constant }}")


def reasons(results):
    return [r.reason if isinstance(r, RenderFailed) else r for r in results]


def test_a_record_over_the_cpu_limit_fails_alone_and_the_rest_of_its_batch_renders():
    with TemplateRenderer(TEMPLATE, "prompts/system.md", {"constant": "C"}, RenderLimits(cpu_s=1)) as r:
        results = r.render_many([{"n": i, "bomb": i == 1} for i in range(4)])
        assert results[0] == "record 0 C"
        assert isinstance(results[1], RenderFailed) and results[1].limit, reasons(results)
        assert "CPU-second limit" in results[1].reason
        assert results[2:] == ["record 2 C", "record 3 C"]
        # two restarts: the process ended with records 1-3 unanswered, then record 1 alone in the next one
        assert (r.limit_hits, r.restarts) == (1, 2)
        assert r.render_many([{"n": 9, "bomb": False}]) == ["record 9 C"]  # the fresh process goes on


def test_the_wall_limit_ends_a_render_the_cpu_limit_has_not_ended_yet():
    with TemplateRenderer(TEMPLATE, "prompts/system.md", {"constant": "C"},
                          RenderLimits(cpu_s=600, wall_s=0.5)) as r:
        results = r.render_many([{"n": 0, "bomb": True}, {"n": 1, "bomb": False}])
    assert isinstance(results[0], RenderFailed) and "0.5 s wall limit" in results[0].reason
    assert results[1] == "record 1 C"


def test_after_max_hits_the_rest_fail_at_once_without_rendering():
    with TemplateRenderer(TEMPLATE, "prompts/system.md", {"constant": "C"},
                          RenderLimits(cpu_s=1, max_hits=2)) as r:
        results = r.render_many([{"n": i, "bomb": True} for i in range(6)])
        assert r.limit_hits == 2
        assert all(isinstance(x, RenderFailed) and x.limit for x in results), reasons(results)
        assert all("2 renders hit a limit; the rest are not rendered" in x.reason for x in results[2:])
        assert r._proc is None  # given up: no render process runs for the rest
        assert isinstance(r.render_many([{"n": 7, "bomb": False}])[0], RenderFailed)


def test_a_template_that_does_not_compile_fails_every_render_without_a_limit_hit():
    with TemplateRenderer("{{ oops(", "prompts/system.md") as r:
        results = r.render_many([{"n": 0}, {"n": 1}])
    assert [x.reason for x in results] == ["template does not parse: unexpected 'end of template' (line 1)"] * 2
    assert not any(x.limit for x in results) and r.limit_hits == 0


def test_errors_are_per_record_and_values_stay_bounded():
    template = "{{ items | join(',') }}{% if big %}{{ 'x' | center(3000000) }}{% endif %}"
    with TemplateRenderer(template, "prompts/system.md") as r:
        results = r.render_many([{"items": ["a", "b"], "big": False}, {"big": False},
                                 {"items": ["c"], "big": True}, {"items": ["d"], "big": False}])
    assert results[0] == "a,b" and results[3] == "d"
    assert "UndefinedError" in results[1].reason and not results[1].limit
    assert "center width over 2000000 items" in results[2].reason and not results[2].limit
    assert r.limit_hits == 0


def test_close_leaves_no_process_behind():
    r = TemplateRenderer("{{ n }}", "prompts/system.md")
    assert r.render_one({"n": 1}) == "1"
    pid = r._proc.pid
    r.close()
    with pytest.raises(ProcessLookupError):  # ended and reaped
        os.kill(pid, 0)
    assert r.render_one({"n": 2}) == "2"  # a later render starts a new one
    r.close()


@pytest.mark.parametrize("limits", [RenderLimits(cpu_s=1), RenderLimits(cpu_s=600, wall_s=1.0)],
                         ids=["cpu limit", "wall limit"])
def test_a_record_over_a_limit_in_one_long_c_call_fails_alone(limits):
    """A ``sum`` of 100,000 lists is one C call of many seconds in which CPython runs no signal handler, so the
    child's periodic flush never came and the records before it in the batch were still unsent when the
    process was killed. The host blamed record 0, then (in the next process) record 1, then the bomb: 3 limit
    hits, the renderer gave up, and record 3 -- and every later record of an export -- fell back unrendered."""
    template = "{% if bomb %}{{ ([[1]] * 100000) | sum(start=[]) | length }}{% endif %}record {{ n }}"
    with TemplateRenderer(template, "prompts/system.md", {"bomb": False}, limits) as r:
        results = r.render_many([{"n": 0}, {"n": 1}, {"n": 2, "bomb": True}, {"n": 3}])
        assert results[:2] == ["record 0", "record 1"], reasons(results)  # were limit failures
        assert isinstance(results[2], RenderFailed) and results[2].limit, reasons(results)
        assert results[3] == "record 3", reasons(results)  # was 'not rendered': given up
        assert r.limit_hits == 1 and r.broken is None  # was 3, broken
        assert r.render_many([{"n": i} for i in range(4, 8)]) == [f"record {i}" for i in range(4, 8)]
