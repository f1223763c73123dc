"""The report's figures (matplotlib, Agg backend: no display needed). Each writes one PNG.

Every function takes plain data (the run summary's pieces), so the figures can be drawn for a run
in progress as well as a finished one. matplotlib is imported when a figure is drawn, not before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CLASSES = ["healthy", "F1", "F2", "F3", "F4", "E"]
UNKNOWN = "unknown"  # an unscored run in which no failure signal fired: no verdict; shown only when a run is
CLASS_LABELS = {"healthy": "Healthy", "F1": "F1 evidence", "F2": "F2 friction", "F3": "F3 control",
                "F4": "F4 planning", "E": "E environment", UNKNOWN: "Unknown (no verdict)"}
CLASS_COLORS = {"healthy": "#4c9a2a", "F1": "#8e6cbf", "F2": "#e8a33d", "F3": "#d1495b", "F4": "#5b7fa6",
                "E": "#8c8c8c", UNKNOWN: "#d9d9d9"}


def shown_classes(comps: list[dict[str, float] | None]) -> list[str]:
    """``CLASSES``, and ``unknown`` when any of these compositions (class -> share) has an unknown run."""
    return [*CLASSES, UNKNOWN] if any((c or {}).get(UNKNOWN) for c in comps) else CLASSES
DPI = 110
FRESH_LABELS = {"fresh": "fresh anchor after the merge",
                "moved": "fresh anchor: main moved outside the run"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 12, "axes.labelsize": 10, "legend.fontsize": 9,
                         "axes.spines.top": False, "axes.spines.right": False})
    return plt


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def anchors_plot(rounds: list[dict[str, Any]], anchors: list[dict[str, Any]], z: float, path: Path) -> Path:
    """(a) The anchor (the bar) per round, each candidate's reading, and the fresh anchor after a merge
    (or after main moved outside the run: a round that merged nothing, drawn in its own colour).

    The gap between an accepted candidate's reading and the fresh anchor measured after its merge
    is the selection optimism.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    if not anchors:
        raise ValueError("no anchors to plot")
    # the anchor in force at each round: the seed's, then each merge's fresh anchor from the next round on
    in_force, current, later = [], anchors[0], list(anchors[1:])
    for r in rounds:
        in_force.append(current)
        if r.get("fresh_anchor") is not None and later:
            current = later.pop(0)
    xs = [r["round"] for r in rounds] or [0]
    bars = [r["anchor_before"] for r in rounds] or [anchors[0]["mean"]]
    in_force = in_force or [anchors[0]]
    edges = [x - 0.5 for x in xs] + [xs[-1] + 0.5]
    ax.step(edges, bars + bars[-1:], where="post", color="#333333", lw=1.6, label="anchor: the bar of the round",
            zorder=2)
    halves = []
    for x, an in zip(xs, in_force, strict=True):  # noise band: anchor mean +/- z*sigma/sqrt(k)
        half = z * (an.get("sigma") or 0.0) / max(an.get("k") or 1, 1) ** 0.5
        halves.append((an["mean"] - half, an["mean"] + half))
        ax.fill_between([x - 0.5, x + 0.5], an["mean"] - half, an["mean"] + half, color="#999999",
                        alpha=0.18, lw=0, zorder=1, label="anchor \u00b1 noise" if x == xs[0] else None)
    styles = {"merged": ("*", "#2b8a3e", 150, "reading, merged"),
              "accepted": ("o", "#e8a33d", 55, "reading, accepted but not merged"),
              "rejected": ("x", "#888888", 50, "reading, rejected"),
              "unverified": ("^", "#bbbbbb", 45, "not verified (budget)")}
    seen: set[str] = set()
    for r in rounds:
        cands = r.get("candidates") or []
        n = len(cands)
        for i, c in enumerate(cands):
            v = c.get("verdict") or {}
            reading = (v.get("measurements") or {}).get("reading")
            if reading is None:
                continue
            kind = ("merged" if c["branch"] in (r.get("merged") or []) else
                    "accepted" if v.get("accepted") else
                    "unverified" if str(v.get("reason", "")).startswith("not verified") else "rejected")
            marker, color, size, label = styles[kind]
            x = r["round"] + (i - (n - 1) / 2) * 0.12
            ax.scatter([x], [reading], marker=marker, color=color, s=size, zorder=4,
                       label=None if kind in seen else label)
            seen.add(kind)
        if r.get("fresh_anchor") is not None:
            merged_reading = next(((c.get("verdict") or {}).get("measurements", {}).get("reading")
                                   for c in cands if c["branch"] in (r.get("merged") or [])), None)
            # a round that merged nothing re-measured main because it moved outside the run (another commit)
            why = "fresh" if r.get("merged") else "moved"
            ax.scatter([r["round"] + 0.3], [r["fresh_anchor"]], marker="D", s=45, zorder=5,
                       color="#1f5fa8" if why == "fresh" else "#7a4fb0",
                       label=None if why in seen else FRESH_LABELS[why])
            seen.add(why)
            if merged_reading is not None:
                ax.annotate("", xy=(r["round"] + 0.3, r["fresh_anchor"]), xytext=(r["round"], merged_reading),
                            arrowprops={"arrowstyle": "->", "color": "#1f5fa8", "lw": 1.1}, zorder=3)
                opt = r.get("selection_optimism")
                if opt is not None:
                    ax.annotate(f"optimism {opt:+.3f}", xy=(r["round"] + 0.34, r["fresh_anchor"]),
                                xytext=(6, -12), textcoords="offset points", fontsize=8, color="#1f5fa8")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"round {x}" if x else "seed" for x in xs])
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.8)
    readings = [x for r in rounds for c in r.get("candidates") or [] if (x := _reading(c)) is not None]
    fresh = [r["fresh_anchor"] for r in rounds if r.get("fresh_anchor") is not None]
    lo = min([*bars, *(h[0] for h in halves), *readings])
    hi = max([*bars, *(h[1] for h in halves), *readings, *fresh])
    pad = max(0.03, (hi - lo) * 0.08)
    ax.set_ylim(max(0.0, lo - pad), min(1.05, hi + pad))
    ax.set_ylabel("mean score (dev)")
    ax.set_title("Anchor per round and candidates' readings")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.text(0.01, -0.04, f"grey band: anchor \u00b1 {z:g}\u03c3/\u221ak (run-to-run noise). A reading is the "
             "candidate's mean on its verification tasks; arrow: reading \u2192 fresh anchor (selection optimism).",
             fontsize=8, color="#555555")
    return _save(fig, path)


def _reading(c: dict[str, Any]) -> float | None:
    return ((c.get("verdict") or {}).get("measurements") or {}).get("reading")


def _stacked(ax, labels: list[str], comps: list[dict[str, float] | None], width: float = 0.62) -> None:
    bottoms = [0.0] * len(labels)
    xs = list(range(len(labels)))
    for cls in shown_classes(comps):
        vals = [100 * (c or {}).get(cls, 0.0) for c in comps]
        ax.bar(xs, vals, width, bottom=bottoms, color=CLASS_COLORS[cls], label=CLASS_LABELS[cls],
               edgecolor="white", lw=0.6)
        for x, v, b in zip(xs, vals, bottoms, strict=True):
            if v >= 6:
                ax.text(x, b + v / 2, f"{v:.0f}%", ha="center", va="center", fontsize=8,
                        color="#333333" if cls == UNKNOWN else "white")
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    for x, c in zip(xs, comps, strict=True):
        if c is None:
            ax.text(x, 50, "not\nmeasured", ha="center", va="center", fontsize=8, color="#777777")
    ax.set_xticks(xs)
    ax.set_xticklabels(labels)
    ax.set_ylim(0, 100)
    ax.set_ylabel("share of rollouts (%)")


def composition_plot(columns: list[tuple[str, dict[str, float] | None]], path: Path) -> Path:
    """(b) The failure composition of the anchor per round (stacked shares Healthy/F1..F4).

    ``columns``: (label, `Composition.to_dict()` or None) per bar.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.5, 1.2 * len(columns) + 3.2), 4.4))
    _stacked(ax, [c[0] for c in columns], [(c[1] or {}).get("composition") for c in columns])
    ax.set_title("Failure composition of the anchor per round (dev)")
    ax.set_xlabel("the anchor each round started from; end = the final anchor")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, reverse=True)
    return _save(fig, path)


def seed_vs_evolved_plot(data: dict[str, dict[str, Any]], path: Path) -> Path:
    """(c) Seed vs evolved on dev and held-out: mean score (with the noise threshold) and composition.

    ``data[split] = {"seed": comp|None, "evolved": comp|None, "resolvable": float|None}`` where a comp
    is a `Composition.to_dict()`.
    """
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4), gridspec_kw={"width_ratios": [1, 1.35]})
    splits = [s for s in ("dev", "heldout") if s in data]
    width = 0.36
    for j, (arm, color) in enumerate((("seed", "#9aa5b1"), ("evolved", "#2b8a3e"))):
        xs = [i + (j - 0.5) * width for i in range(len(splits))]
        vals = [((data[s].get(arm) or {}).get("mean_score")) for s in splits]
        errs = [data[s].get("resolvable") or 0.0 for s in splits] if arm == "evolved" else None
        bars = left.bar(xs, [v or 0.0 for v in vals], width, color=color, label=arm,
                        yerr=errs if errs and any(errs) else None, capsize=4, ecolor="#333333")
        for b, v, e in zip(bars, vals, errs or [0.0] * len(vals), strict=True):
            left.text(b.get_x() + b.get_width() / 2, (v or 0) + e + 0.02, "-" if v is None else f"{v:.3f}",
                      ha="center", va="bottom", fontsize=9)
    left.set_xticks(range(len(splits)))
    left.set_xticklabels(["dev" if s == "dev" else "held-out" for s in splits])
    left.set_ylim(0, 1.2)
    left.set_ylabel("mean score")
    left.set_title("Mean score: seed vs evolved")
    left.legend(loc="upper left", frameon=False, ncols=2)
    if any(data[s].get("resolvable") for s in splits):
        left.text(0.0, -0.16, "error bar: the resolvable difference z\u03c3/\u221ak of the comparison",
                  transform=left.transAxes, fontsize=8, color="#555555")
    cols, comps = [], []
    for s in splits:
        for arm in ("seed", "evolved"):
            cols.append(f"{arm}\n{'dev' if s == 'dev' else 'held-out'}")
            comps.append((data[s].get(arm) or {}).get("composition"))
    _stacked(right, cols, comps)
    right.set_title("Failure composition: seed vs evolved")
    right.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, reverse=True)
    fig.tight_layout()
    return _save(fig, path)


def ablation_plot(edits: list[dict[str, Any]], splits: list[str], path: Path) -> Path:
    """(d) Leave-one-out: the score of main without each accepted edit, against main with all of them."""
    plt = _pyplot()
    names = [_short(e["branch"]) for e in edits]
    fig, axes = plt.subplots(1, len(splits), figsize=(5.6 * len(splits), 1.2 + 0.75 * max(len(edits), 1) + 1.2),
                             squeeze=False, sharey=True)
    for ax, split in zip(axes[0], splits, strict=True):
        full = next((e["results"][split]["candidate"]["mean"] for e in edits if split in e.get("results", {})), None)
        ys = list(range(len(edits)))
        for y, e in zip(ys, edits, strict=True):
            res = (e.get("results") or {}).get(split)
            if not e.get("applies") or res is None:
                ax.text(0.02, y, "revert does not apply" if not e.get("applies") else "not measured",
                        va="center", fontsize=9, color="#b02a37")
                continue
            without = res["baseline"]["mean"]
            drop = res["difference"]
            color = "#d1495b" if res["verdict"] == "better" else "#9aa5b1"
            ax.barh([y], [without], height=0.5, color=color)
            ax.errorbar([without], [y], xerr=[[res["resolvable"]], [res["resolvable"]]], fmt="none",
                        ecolor="#333333", capsize=3, lw=1)
            label_x = max(without + res["resolvable"], full if full is not None else 0.0) + 0.03
            ax.text(label_x, y, f"{without:.3f}\n(drop {drop:+.3f})", va="center", fontsize=9)
        if full is not None:
            ax.axvline(full, color="#2b8a3e", lw=1.6, ls="--", label=f"main with every edit: {full:.3f}")
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)
        ax.set_yticks(ys)
        ax.set_yticklabels(names)
        ax.invert_yaxis()
        ax.set_xlim(0, 1.3)
        ax.set_ylim(len(edits) - 0.4, -0.6)
        ax.set_xlabel(f"mean score without the edit ({'dev' if split == 'dev' else 'held-out'})")
        ax.set_title(f"Leave-one-out on {'dev' if split == 'dev' else 'held-out'}")
        ax.grid(axis="x", alpha=0.3)
    fig.text(0.01, -0.02, "red: main is better with the edit beyond noise; grey: within noise. "
             "Error bar: the resolvable difference z\u03c3/\u221ak.", fontsize=8, color="#555555")
    fig.tight_layout()
    return _save(fig, path)


def _short(branch: str, width: int = 40) -> str:
    name = branch.removeprefix("candidate/")
    return name if len(name) <= width else name[: width - 1] + "\u2026"
