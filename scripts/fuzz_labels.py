"""Differential fuzz of the rule labeller: random tau-bench-like runs, each one's label as a JSON line.

A speed change must not change a label. Run this under the tree before and the tree after (each tree's
evoharness first on the path) with the same arguments and diff the outputs; they must be byte-identical.
The runs mix policy prompts (identity, confirmation), declared and inferred tool schemas, repeated calls
with equal results, tool errors, JSON results with statuses and ids, replies with ids, prices and dates,
simulated-user stops and instructions, and harness events: the single-agent rules fire on some (the
multi-agent log rules are not exercised here).

    PYTHONHASHSEED=0 PYTHONPATH=/tmp/before python scripts/fuzz_labels.py 1 3000 > before.jsonl
    PYTHONHASHSEED=0 PYTHONPATH=/tmp/after python scripts/fuzz_labels.py 1 3000 > after.jsonl
    cmp before.jsonl after.jsonl

Arguments: SEED N [TOOLS] (TOOLS: how many distinct tool names the runs call; fewer gives more repeats).
"""

from __future__ import annotations

import argparse
import json
import random
import sys

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.models import Event, Trajectory

RND = random.Random(0)
NN = 0
NAMES = [
    "get_user_details",
    "get_reservation_details",
    "book_reservation",
    "cancel_reservation",
    "transfer_to_human_agents",
    "update_reservation_flights",
    "bash",
    "search_direct_flight",
    "think",
    "calculate",
    "send_certificate",
    "lookup_customer",
]
IDS = [
    "HAT069",
    "ZFA04Y",
    "mia_li_3668",
    "W2378156",
    "12345678",
    "2024-05-17",
    "12th",
    "x-1",
    "A_1",
    "ab٣cd",
    "ORD-7",
    "4XGCCM",
]
STAT = ["pending", "delivered", "cancelled", "on-hold", "processed", "Pending"]
POLICY = [
    "You must authenticate the user before acting.",
    "Obtain explicit user confirmation (yes) before booking.",
    "- `book_reservation`: authenticate first",
    "Be nice.",
    "verify the user's identity with their id",
]
WORDS = [
    "the",
    "is",
    "was",
    "status",
    "your",
    "order",
    "flight",
    "$120",
    "$1,200.50",
    "on",
    "May 20",
    "2024-05-20",
    "yes",
    "ok",
    "please",
    "confirm",
    "?",
    "let me know",
    "###STOP###",
    "not found",
    "anything else",
    "```bash\nls\n```",
    "\n",
    "é",
    "—",
]


def text(k=8):
    return " ".join(RND.choice(WORDS + IDS + STAT) for _ in range(RND.randint(0, k)))


def args():
    r = RND.random()
    if r < 0.1:
        return "{bad json"
    if r < 0.15:
        return ""
    if r < 0.2:
        return {"user_id": RND.choice(IDS)}
    d = {}
    for k in RND.sample(["user_id", "reservation_id", "amount", "cabin", "command", "items"], RND.randint(0, 4)):
        d[k] = RND.choice([RND.choice(IDS), 3, 2.5, None, True, ["a"], {"x": 1}, "sed -i s/a/b/ f", "ls"])
    return json.dumps(d, sort_keys=RND.random() < 0.5, indent=RND.choice([None, 1]))


def result():
    r = RND.random()
    if r < 0.2:
        return RND.choice(["Error: not found", "  error: bad", "ERROR timeout", "Error: user HAT069 not found"])
    if r < 0.6:
        return json.dumps(
            {
                "user_id": RND.choice(IDS + ["zz_9001"] * 8),
                "reservation_id": RND.choice(IDS),
                "status": RND.choice(STAT),
                "price": RND.choice([120, 99.5]),
                "flights": [{"flight_number": RND.choice(IDS), "date": "2024-05-20"}],
            }
        )
    return text(12)


def main(argv: list[str] | None = None) -> int:
    global NN
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("seed", type=int)
    ap.add_argument("n", type=int)
    ap.add_argument("tools", type=int, nargs="?", default=len(NAMES))
    opts = ap.parse_args(argv)
    if opts.n < 0 or not 1 <= opts.tools <= len(NAMES):
        print(f"error: N must be >= 0 and TOOLS in 1..{len(NAMES)}", file=sys.stderr)
        return 2
    RND.seed(opts.seed)
    NN = opts.tools
    lab = Labeller()
    for k in range(opts.n):
        msgs = []
        if RND.random() < 0.8:
            msgs.append({"role": "system", "content": "\n".join(RND.sample(POLICY, RND.randint(0, 4)))})
        cid = 0
        LAST = []
        for _ in range(RND.randint(0, 14)):
            r = RND.random()
            if r < 0.3:
                msgs.append(
                    {
                        "role": "user",
                        "content": text(10) if RND.random() < 0.5 else " ".join(RND.choice(WORDS) for _ in range(4)),
                    }
                )
            elif r < 0.6:
                calls = []
                for _ in range(RND.randint(1, 2)):
                    cid += 1
                    if LAST and RND.random() < 0.4:
                        fn = dict(LAST[0])
                    else:
                        fn = {"name": RND.choice(NAMES[:NN]), "arguments": args()}
                    calls.append({"id": f"c{cid}" if RND.random() < 0.95 else None, "type": "function", "function": fn})
                msgs.append({"role": "assistant", "content": RND.choice([None, "", text(4)]), "tool_calls": calls})
                for c in calls:
                    if RND.random() < 0.9:
                        res = LAST[1] if LAST and c["function"] == LAST[0] and RND.random() < 0.7 else result()
                        LAST[:] = [c["function"], res]
                        msgs.append(
                            {"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"], "content": res}
                        )
            else:
                m = {"role": "assistant", "content": text(14)}
                if RND.random() < 0.1:
                    m["name"] = RND.choice(["Orchestrator", "WebSurfer", "Coder"])
                msgs.append(m)
        events = [
            Event(
                type=RND.choice(["tool_error", "blocked_call", "format_rejected", "budget_exhausted"]),
                step=RND.randint(0, max(len(msgs) - 1, 0)),
                detail=text(3),
                data={"call_id": f"c{RND.randint(1, cid + 1)}"} if RND.random() < 0.5 else {},
            )
            for _ in range(RND.randint(0, 2) if RND.random() < 0.3 else 0)
        ]
        meta = {}
        if RND.random() < 0.5:
            meta["user_instruction"] = text(10)
        if RND.random() < 0.2:
            meta["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": nm,
                        "description": "Authenticate the user " + nm,
                        "parameters": {
                            "type": "object",
                            "required": ["user_id"],
                            "properties": {
                                "user_id": {"type": "string"},
                                "cabin": {"type": "string", "enum": ["economy", "business"]},
                            },
                        },
                    },
                }
                for nm in RND.sample(NAMES, 3)
            ]
        last = next(
            (
                m["content"]
                for m in reversed(msgs)
                if m["role"] == "assistant" and isinstance(m.get("content"), str) and m["content"].strip()
            ),
            None,
        )
        t = Trajectory(
            id=f"t{k}",
            task_id=str(k % 7),
            messages=msgs,
            events=events,
            final_answer=last,
            score=RND.choice([0.0, 1.0, None, 0.5]),
            meta=meta,
            task=text(6) if RND.random() < 0.5 else None,
        )
        print(lab.label(t).model_dump_json())
    return 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    raise SystemExit(main())
