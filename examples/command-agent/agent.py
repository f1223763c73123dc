#!/usr/bin/env python3
"""An external agent for evoharness's command-agent protocol, in the Python standard library only.

    python3 agent.py TASK.json OUT.json

It reads the task file (task id, prompt, tool schemas, harness dir, output path, model endpoint,
tool command), solves the task, and writes plain OpenAI chat messages to OUT.json as
``{"messages": [...], "final_answer": ...}``; evoharness turns them into a Trajectory and scores it.

- With a model (``task["model"]["base_url"]`` set: the executor's model gateway, reached over the
  Unix socket ``task["model"]["socket"]``), it runs a plain tool-calling loop: the system prompt
  from the harness, the task, the tools; each tool call is run with ``task["tool_command"]``.
- Without one (a scripted model spec runs no gateway), it follows simple rules for the tasks of
  the built-in ``synthetic`` environment, still calling the environment's tools for every fact.
"""

import http.client
import json
import os
import re
import socket
import subprocess
import sys

MAX_STEPS = 12


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("gateway", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def chat(model, messages, tools):
    """One chat completion through the gateway; the assistant message."""
    body = json.dumps({"model": model["name"], "messages": messages, "tools": tools})
    conn = UnixHTTPConnection(model["socket"])
    prefix = model["base_url"].split("://", 1)[1].split("/", 1)[1]  # r/TOKEN/v1
    conn.request("POST", f"/{prefix}/chat/completions", body, {"Content-Type": "application/json"})
    reply = conn.getresponse()
    data = json.loads(reply.read())
    if reply.status != 200:
        raise RuntimeError(f"model call failed ({reply.status}): {data.get('error', {}).get('message')}")
    return data["choices"][0]["message"]


def call_tool(task, name, args):
    """Run one environment tool with the task's tool command; the text the agent sees."""
    args_json = args if isinstance(args, str) else json.dumps(args)
    proc = subprocess.run(task["tool_command"] + [name, args_json], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return f"error: tool command failed: {proc.stderr.strip()[-300:]}"
    result = json.loads(proc.stdout)
    return result["content"] if result["ok"] else f"error ({result['error']['kind']}): {result['error']['message']}"


def system_prompt(task):
    parts = []
    for name in ("prompts/system.md", "lessons.md"):
        path = os.path.join(task["harness_dir"], name)
        if os.path.isfile(path):
            with open(path) as fh:
                parts.append(fh.read().strip())
    return "\n\n".join(p for p in parts if p) or "You are a careful assistant. Use the tools."


class Transcript:
    def __init__(self, task):
        self.task = task
        self.messages = [{"role": "system", "content": system_prompt(task)},
                         {"role": "user", "content": task["prompt"]}]

    def act(self, name, args, text=None):
        """An assistant turn with one tool call, and its result."""
        call_id = f"call_{len(self.messages)}"
        self.messages.append({"role": "assistant", "content": text, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        result = call_tool(self.task, name, args)
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        return result

    def answer(self, text):
        self.messages.append({"role": "assistant", "content": text})
        return text


def with_model(task):
    t = Transcript(task)
    for _ in range(MAX_STEPS):
        msg = chat(task["model"], t.messages, task["tools"])
        calls = msg.get("tool_calls") or []
        t.messages.append({"role": "assistant", "content": msg.get("content"), **({"tool_calls": calls} if calls
                                                                                   else {})})
        if not calls:
            return t.messages, (msg.get("content") or None), "delivered" if msg.get("content") else "aborted"
        for call in calls:
            fn = call["function"]
            t.messages.append({"role": "tool", "tool_call_id": call["id"],
                               "content": call_tool(task, fn["name"], fn["arguments"])})
    return t.messages, None, "step_budget"


def by_rules(task):
    """The synthetic environment's four kinds of task, without a model."""
    t = Transcript(task)
    prompt = task["prompt"]
    if m := re.fullmatch(r"What is the email address of (.+)\?", prompt):
        found = json.loads(t.act("lookup_contact", {"name": m[1]}))
        return t.messages, t.answer(f"The email address of {m[1]} is {found['email']}."), "delivered"
    if m := re.fullmatch(r"What is the status of order (\S+)\?", prompt):
        order = json.loads(t.act("get_order", {"order_id": m[1]}))
        return t.messages, t.answer(f"Order {m[1]} is {order['status']}."), "delivered"
    if m := re.fullmatch(r"How much did order (\S+) cost in total\?", prompt):
        order = json.loads(t.act("get_order", {"order_id": m[1]}))
        return t.messages, t.answer(f"Order {m[1]} cost {order['total']} in total."), "delivered"
    if m := re.fullmatch(r"Send (.+) a message saying exactly: (.+)", prompt):
        found = json.loads(t.act("lookup_contact", {"name": m[1]}))
        t.act("send_message", {"to": found["email"], "body": m[2]})
        return t.messages, t.answer(f"Sent {m[1]} the message."), "delivered"
    t.answer("I have no model and no rule for this task.")
    return t.messages, None, "aborted"


def main():
    task_path, out_path = sys.argv[1], sys.argv[2]
    with open(task_path) as fh:
        task = json.load(fh)
    solve = with_model if task["model"].get("base_url") else by_rules
    messages, final, termination = solve(task)
    with open(out_path, "w") as fh:
        json.dump({"messages": messages, "final_answer": final, "termination": termination}, fh)


if __name__ == "__main__":
    main()
