"""anchors.png names why each fresh anchor was measured: after the round's merge, or because main moved outside
the run (another commit landed on main; the round merged nothing)."""

from __future__ import annotations

from evoharness.reports import plots


def _legend(monkeypatch, rounds, anchors, tmp_path) -> list[str]:
    texts: list[str] = []
    real = plots._save

    def save(fig, path):
        texts.extend(t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts())
        return real(fig, path)

    monkeypatch.setattr(plots, "_save", save)
    plots.anchors_plot(rounds, anchors, 2.0, tmp_path / "anchors.png")
    assert (tmp_path / "anchors.png").stat().st_size > 0
    return texts


def _round(n, merged, fresh):
    cand = {"branch": f"cand/{n}", "verdict": {"accepted": bool(merged), "measurements": {"reading": 0.6}}}
    return {"round": n, "anchor_before": 0.5, "fresh_anchor": fresh, "merged": [cand["branch"]] if merged else [],
            "candidates": [cand]}


def test_a_fresh_anchor_after_main_moved_outside_the_run_is_not_called_after_the_merge(monkeypatch, tmp_path):
    anchors = [{"mean": 0.5, "sigma": 0.1, "k": 4}, {"mean": 0.55, "sigma": 0.1, "k": 4}]
    texts = _legend(monkeypatch, [_round(1, merged=False, fresh=0.55)], anchors, tmp_path)
    assert plots.FRESH_LABELS["moved"] in texts
    assert plots.FRESH_LABELS["fresh"] not in texts


def test_both_kinds_of_fresh_anchor_get_their_own_legend_entry(monkeypatch, tmp_path):
    anchors = [{"mean": 0.5, "sigma": 0.1, "k": 4}, {"mean": 0.6, "sigma": 0.1, "k": 4},
               {"mean": 0.62, "sigma": 0.1, "k": 4}]
    texts = _legend(monkeypatch, [_round(1, merged=True, fresh=0.6), _round(2, merged=False, fresh=0.62)],
                    anchors, tmp_path)
    assert texts.count(plots.FRESH_LABELS["fresh"]) == 1
    assert texts.count(plots.FRESH_LABELS["moved"]) == 1
