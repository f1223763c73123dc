"""The placebo control set: the same records with the assistant turns permuted across samples.

A record is split into its system message, its user messages (kept in place) and its *assistant
units*: an assistant message together with the tool results that answer it. Units are permuted
across the records of a window, within their kind (a unit that calls tools fills a slot that called
tools; a plain reply fills a reply slot), so every record keeps its system prompt, its user turns,
its number of assistant turns and its shape, still ends on an assistant reply, and every tool call
is still answered by its own result. Tool-call ids are re-keyed per record afterwards and ``tools``
is re-declared from the calls the record now makes. The permutation is seeded; a unit lands back in
its own record only when no other placement exists (counted as ``kept_in_place``). A record whose
call turns now hold more than ``chat.MAX_CALLS`` calls is None (the export skips it as
``too_many_tool_calls``, as it skips such a record of its own).
"""

from __future__ import annotations

import itertools
import random

from .chat import RecordSkipped, declared_tools, rekey


def _units(messages: list[dict]) -> list[tuple[str, list[dict]]]:
    """Segments in order: ("fixed", [msg]) for system/user, ("call"|"reply", [assistant, tools...])."""
    segs: list[tuple[str, list[dict]]] = []
    for m in messages:
        if m["role"] == "tool" and segs and segs[-1][0] == "call":
            segs[-1][1].append(m)
        elif m["role"] == "assistant":
            segs.append(("call" if m.get("tool_calls") else "reply", [m]))
        else:
            segs.append(("fixed", [m]))
    return segs


def _derange(owners: list[int], rng: random.Random) -> tuple[list[int], int]:
    """A permutation ``perm`` of positions where owners[perm[p]] != owners[p] wherever possible."""
    n = len(owners)
    perm = list(range(n))
    rng.shuffle(perm)
    for p in range(n):
        if owners[perm[p]] != owners[p]:
            continue
        candidates = itertools.chain((rng.randrange(n) for _ in range(8)), range(n))
        for q in candidates:
            if owners[perm[q]] != owners[p] and owners[perm[p]] != owners[q]:
                perm[p], perm[q] = perm[q], perm[p]
                break
    kept = sum(1 for p in range(n) if owners[perm[p]] == owners[p])
    return perm, kept


def permute(records: list[dict], seed: int = 0) -> tuple[list[dict | None], int]:
    """Placebo versions of ``records`` (OpenAI chat records), each None that would hold more than ``MAX_CALLS`` tool
    calls; returns (records, units kept in place)."""
    rng = random.Random(seed)
    segmented = [_units(r["messages"]) for r in records]
    by_name: dict[str, dict] = {}
    for r in records:
        for t in r.get("tools", []):
            by_name.setdefault(t["function"]["name"], t)
    kept_total = 0
    filled = [list(segs) for segs in segmented]
    for kind in ("call", "reply"):
        slots = [(ri, si) for ri, segs in enumerate(segmented) for si, (k, _) in enumerate(segs) if k == kind]
        if not slots:
            continue
        perm, kept = _derange([ri for ri, _ in slots], rng)
        kept_total += kept
        for p, (ri, si) in enumerate(slots):
            src_ri, src_si = slots[perm[p]]
            filled[ri][si] = segmented[src_ri][src_si]
    out = []
    for r, segs in zip(records, filled, strict=True):
        try:
            messages = rekey([m for _, ms in segs for m in ms])
        except RecordSkipped:  # too many calls for nine-character ids: an uncaught RecordSkipped out of the export
            out.append(None)
            continue
        called = {c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}
        extra = [*r.get("tools", []), *(by_name[n] for n in sorted(called) if n in by_name)]
        out.append({**r, "messages": messages, "tools": declared_tools(None, messages, extra)})
    return out, kept_total
