"""Wiring only: collect -> diagnose -> enqueue -> analyst -> critic -> engineer -> verify ->
[review] -> merge -> reanchor -> next round (diagnose) | finish -> END."""

from __future__ import annotations

from typing import Literal

from langgraph.graph import END, START, StateGraph

from evoharness.graph.nodes import Nodes
from evoharness.graph.services import Services
from evoharness.graph.state import RunInput, RunState


def build_graph(services: Services, checkpointer=None, review: bool = False):
    nodes = Nodes(services)
    g = StateGraph(RunState, input_schema=RunInput)
    g.add_node("collect", nodes.collect)
    g.add_node("diagnose", nodes.diagnose)
    g.add_node("enqueue", nodes.enqueue)
    g.add_node("analyst", nodes.analyst)
    g.add_node("critic", nodes.critic)
    g.add_node("engineer", nodes.engineer)
    g.add_node("verify", nodes.verify)
    g.add_node("review", nodes.review)
    g.add_node("merge", nodes.merge)
    g.add_node("reanchor", nodes.reanchor)
    g.add_node("finish", nodes.finish)

    def after_start(state: RunState) -> Literal["collect", "diagnose"]:
        return "diagnose" if state.get("anchor") else "collect"

    def after_enqueue(state: RunState) -> Literal["analyst", "finish"]:
        return "finish" if services.should_stop(state) else "analyst"

    def after_analyst(state: RunState) -> Literal["critic", "reanchor"]:
        return "critic" if state.get("patterns") else "reanchor"

    def after_critic(state: RunState) -> Literal["analyst", "engineer"]:
        # the critic may send patterns back to the analyst once per round
        sent = [r for r in state.get("reviews", []) if r.get("send_back") and not r.get("was_sent_back")]
        return "analyst" if sent else "engineer"

    def after_engineer(state: RunState) -> Literal["verify", "reanchor"]:
        return "verify" if state.get("candidates") else "reanchor"

    def after_verify(state: RunState) -> Literal["review", "merge"]:
        return "review" if review and any(v["accepted"] for v in state.get("verdicts", [])) else "merge"

    def after_reanchor(state: RunState) -> Literal["diagnose", "finish"]:
        return "finish" if services.should_stop(state) else "diagnose"

    g.add_conditional_edges(START, after_start)
    g.add_edge("collect", "diagnose")
    g.add_edge("diagnose", "enqueue")
    g.add_conditional_edges("enqueue", after_enqueue)
    g.add_conditional_edges("analyst", after_analyst)
    g.add_conditional_edges("critic", after_critic)
    g.add_conditional_edges("engineer", after_engineer)
    g.add_conditional_edges("verify", after_verify)
    g.add_edge("review", "merge")
    g.add_edge("merge", "reanchor")
    g.add_conditional_edges("reanchor", after_reanchor)
    g.add_edge("finish", END)
    return g.compile(checkpointer=checkpointer)
