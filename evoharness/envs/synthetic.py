"""A small built-in environment: a contacts book, an order desk and an outbox. Deterministic.

Tools: ``lookup_contact(name)``, ``get_order(order_id)``, ``list_orders(customer)``,
``send_message(to, body)``. 20 tasks of four kinds (contact email, order status, order total,
send a message); the split is fixed by ``rank_split("synthetic", ids)``: 14 dev, 6 held-out.
Scorer: read tasks need the expected value in the final answer; message tasks need exactly the
requested message in the outbox (and nothing else sent).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from evoharness.envs.base import TaskSpec, TaskTable, ToolCallSpec, ToolError, rank_split

CONTACTS = {
    "Ada Lovelace": "ada@example.org", "Alan Turing": "alan@example.org",
    "Grace Hopper": "grace@example.org", "Edsger Dijkstra": "edsger@example.org",
    "Barbara Liskov": "barbara@example.org",
}
ORDERS = {
    "A-100": {"customer": "Ada Lovelace", "status": "shipped", "total": "42.50"},
    "A-101": {"customer": "Ada Lovelace", "status": "pending", "total": "17.00"},
    "B-200": {"customer": "Alan Turing", "status": "delivered", "total": "99.99"},
    "C-300": {"customer": "Grace Hopper", "status": "cancelled", "total": "5.25"},
    "D-400": {"customer": "Edsger Dijkstra", "status": "shipped", "total": "64.00"},
}
_TOOLS = [
    ("lookup_contact", "Find a contact's email address by full name.", {"name": "full name of the contact"}),
    ("get_order", "Get an order's status and total by its id.", {"order_id": "order id, e.g. A-100"}),
    ("list_orders", "List the order ids of a customer.", {"customer": "full name of the customer"}),
    ("send_message", "Send a message to an email address.", {"to": "recipient email", "body": "message text"}),
]


def _tasks() -> list[TaskSpec]:
    raw: list[tuple[str, str, dict[str, Any]]] = []
    for i, (name, email) in enumerate(CONTACTS.items()):
        raw.append((f"contact_{i}", f"What is the email address of {name}?",
                    {"kind": "answer", "expect": email, "gt": [["lookup_contact", {"name": name}]]}))
    for oid, o in ORDERS.items():
        raw.append((f"status_{oid}", f"What is the status of order {oid}?",
                    {"kind": "answer", "expect": o["status"], "gt": [["get_order", {"order_id": oid}]]}))
        raw.append((f"total_{oid}", f"How much did order {oid} cost in total?",
                    {"kind": "answer", "expect": o["total"], "gt": [["get_order", {"order_id": oid}]]}))
    for i, name in enumerate(list(CONTACTS)):
        body = f"Meeting moved to {10 + i}:00."
        raw.append((f"message_{i}", f"Send {name} a message saying exactly: {body}",
                    {"kind": "send", "to": CONTACTS[name], "body": body,
                     "gt": [["lookup_contact", {"name": name}],
                            ["send_message", {"to": CONTACTS[name], "body": body}]]}))
    splits = rank_split("synthetic", [tid for tid, _, _ in raw])
    return [TaskSpec(id=tid, prompt=p, split=splits[tid], meta=m) for tid, p, m in raw]


class SyntheticEnv(TaskTable):
    name = "synthetic"
    version = "1"

    def __init__(self) -> None:
        self._tasks = {t.id: t for t in _tasks()}

    def reset(self, task: TaskSpec) -> dict[str, Any]:
        return {"contacts": dict(CONTACTS), "orders": copy.deepcopy(ORDERS), "outbox": []}

    def tools(self, task: TaskSpec) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {
            "name": name, "description": desc,
            "parameters": {"type": "object", "required": list(params),
                           "properties": {p: {"type": "string", "description": d} for p, d in params.items()}},
        }} for name, desc, params in _TOOLS]

    def call_tool(self, state: dict[str, Any], name: str, args: dict[str, Any]) -> str:
        spec = {n: p for n, _, p in _TOOLS}
        if name not in spec:
            raise ToolError("unknown_tool", f"no tool named {name!r}")
        if set(args) != set(spec[name]) or not all(isinstance(v, str) for v in args.values()):
            raise ToolError("invalid_arguments",
                            f"{name} takes string arguments {sorted(spec[name])}, got {sorted(args)}")
        if name == "lookup_contact":
            if args["name"] not in state["contacts"]:
                raise ToolError("tool_error", f"no contact named {args['name']!r}")
            return json.dumps({"name": args["name"], "email": state["contacts"][args["name"]]})
        if name == "get_order":
            if args["order_id"] not in state["orders"]:
                raise ToolError("tool_error", f"no order {args['order_id']!r}")
            return json.dumps({"order_id": args["order_id"], **state["orders"][args["order_id"]]})
        if name == "list_orders":
            return json.dumps([k for k, o in state["orders"].items() if o["customer"] == args["customer"]])
        state["outbox"].append({"to": args["to"], "body": args["body"]})
        return json.dumps({"sent": True, "to": args["to"]})

    def score(self, task: TaskSpec, state: dict[str, Any], final_answer: str | None,
              messages: list[dict[str, Any]]) -> float:
        m = task.meta
        if m["kind"] == "answer":
            return 1.0 if final_answer is not None and m["expect"] in final_answer else 0.0
        return 1.0 if state["outbox"] == [{"to": m["to"], "body": m["body"]}] else 0.0

    def ground_truth_calls(self, task: TaskSpec) -> list[ToolCallSpec]:
        return [ToolCallSpec(name=n, args=dict(a)) for n, a in task.meta["gt"]]


def from_spec(spec: str) -> SyntheticEnv:
    """``synthetic`` (anything after ``synthetic:`` is ignored: there is one synthetic task table)."""
    return SyntheticEnv()
