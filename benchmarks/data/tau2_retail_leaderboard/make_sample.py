"""Write ``results.json``: one public tau2-bench retail run, trimmed, in tau2's ``results.json`` layout.

Source: sierra-research/tau2-bench (MIT, Sierra), ``web/leaderboard/public/submissions/
adaptive-agent_ironshell-ui_2026-03-22/trajectories/adaptive-agent_retail_claude-opus-4-6_1trial.json`` at commit
b8e48f9ada6f83a9cf7c925295776a62c7121d77 (a leaderboard submission: Claude Opus 4.6 as the agent, one trial of each
retail task; the file is a bare list of tau2 simulations). Kept: its first simulation (task 0, reward 1.0), each
message's role, text, tool calls, ``turn_idx`` and the simulation's reward, termination and policy; left out: the
provider's raw responses, usage, timestamps and audio fields. The agent's and the user's texts and the tool calls are
copied verbatim; each tool result is written by replaying the recorded call on tau2's retail database with tau2's own
environment (tau2 is a dependency), which returns the recorded text (checked below on the results the file shows).
The file is wrapped as tau2's ``tau2 run`` output (``info``, ``tasks``, ``simulations``), the layout the ``tau2``
importer reads. No step labels: a reward only.

    .venv/bin/python benchmarks/data/tau2_retail_leaderboard/make_sample.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ["PYTHON_DOTENV_DISABLED"] = "1"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

from loguru import logger  # noqa: E402

logger.disable("tau2")

from tau2.data_model.message import ToolCall  # noqa: E402
from tau2.domains.retail.environment import get_environment  # noqa: E402

OUT = Path(__file__).with_name("results.json")
SOURCE = ("sierra-research/tau2-bench@b8e48f9ada6f83a9cf7c925295776a62c7121d77:web/leaderboard/public/submissions/"
          "adaptive-agent_ironshell-ui_2026-03-22/trajectories/adaptive-agent_retail_claude-opus-4-6_1trial.json")

# (role, text) or ("calls", [(id, name, arguments), ...]) in the recorded order
TASK_0 = [
    ("assistant", "Hi! How can I help you today?"),
    ("user", "Hi there! I recently received my order and I'd like to make a couple of exchanges on it. The order "
             "number is W2378156. I have two items I'd like to swap out \u2014 a mechanical keyboard and a smart "
             "thermostat. Can you help me with that?"),
    ("assistant", "I'd be happy to help you with those exchanges! First, I need to verify your identity. Could you "
                  "please provide me with your email address, or your first name, last name, and zip code?"),
    ("user", "Sure! I honestly can't remember which email I used for the order, but my name is Yusuf Rossi and my "
             "zip code is 19122."),
    ("calls", [("toolu_018Bsb8nq7jXmbtXuQAtRxAa", "find_user_id_by_name_zip",
                {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"})]),
    ("calls", [("toolu_01Cdz8tL6bQT11FfYu5GVuRx", "get_user_details", {"user_id": "yusuf_rossi_9620"})]),
    ("calls", [("toolu_01GvDYrHzPh6yoTh2dshf7EU", "get_order_details", {"order_id": "#W2378156"})]),
    ("assistant", "I've verified your identity and found your order **#W2378156**, which is in **delivered** "
                  "status. Here are the two items you'd like to exchange:\n\n1. **Mechanical Keyboard** (Item ID: "
                  "1151293680) - Linear switch, RGB backlight, Full size \u2014 $272.33\n2. **Smart Thermostat** "
                  "(Item ID: 4983901480) - Apple HomeKit compatible, Black \u2014 $262.47\n\nNow, could you tell me "
                  "what options you'd like for the replacement items? For example:\n- For the **Mechanical "
                  "Keyboard**: what switch type, backlight, or size would you prefer?\n- For the **Smart "
                  "Thermostat**: what compatibility or color would you prefer?\n\nIf you'd like, I can also look up "
                  "the available options for each product so you can choose."),
    ("user", "That's exactly right, those are the two items! Let me tell you what I'm looking for:\n\n1. "
             "**Mechanical Keyboard**: I'd like to switch to **clicky switches**, and I'd prefer to keep the **RGB "
             "backlight** and **full size**. If that exact combination isn't available, I'd be okay with **clicky, "
             "no backlight, full size** instead.\n\n2. **Smart Thermostat**: I'd like one that's compatible with "
             "**Google Home** instead of Apple HomeKit. I'm flexible on the color.\n\nCould you check what's "
             "available for both?"),
    ("calls", [("toolu_01J8zdpU43UUFxEezST31oPA", "get_product_details", {"product_id": "1656367028"}),
               ("toolu_01EAJgf4sEvfwSpDB4zuTbrh", "get_product_details", {"product_id": "4896585277"})]),
    ("assistant", "Here's what I found:\n\n### Mechanical Keyboard\n- \u274c **Clicky, RGB, Full size** \u2014 "
                  "unfortunately this is **out of stock**.\n- \u2705 **Clicky, No backlight, Full size** (your "
                  "backup choice) \u2014 **available** at $269.16 (Item ID: 7706410293)\n\n### Smart Thermostat "
                  "(Google Home compatible)\nNote: The compatibility option is listed as \"Google Assistant.\" Here "
                  "are the available options:\n- \u2705 **Google Assistant, Black** \u2014 $249.01 (Item ID: "
                  "7747408585)\n- \u274c Google Assistant, White \u2014 out of stock\n- \u274c Google Assistant, "
                  "Stainless Steel \u2014 out of stock\n\nSo the only available Google Assistant thermostat is the "
                  "**black** one.\n\n### Exchange Summary\nHere's what the exchange would look like:\n\n| Item | "
                  "Current | New | Price Difference |\n|------|---------|-----|-----------------|\n| Mechanical "
                  "Keyboard | Linear, RGB, Full size ($272.33) | Clicky, No backlight, Full size ($269.16) | -$3.17 "
                  "|\n| Smart Thermostat | Apple HomeKit, Black ($262.47) | Google Assistant, Black ($249.01) | "
                  "-$13.46 |\n\n**Total refund: $16.63** \u2014 This would be refunded to your Mastercard ending in "
                  "2478 (the original payment method), and would take 5-7 business days to process.\n\nBefore I "
                  "proceed, are these the only two items you'd like to exchange? And do you confirm you'd like to go "
                  "ahead with this exchange?"),
    ("user", "That all looks perfect! Yes, those are the only two items I need to exchange. The backup keyboard "
             "option works fine for me, and the black Google Assistant thermostat is great. \n\nLet's go ahead with "
             "both exchanges. And just to confirm \u2014 the $16.63 refund back to my Mastercard ending in 2478 "
             "sounds good. Please proceed!"),
    ("calls", [("toolu_01YVMKK3MgheBuSzvBDsEhmN", "exchange_delivered_order_items",
                {"order_id": "#W2378156", "item_ids": ["1151293680", "4983901480"],
                 "new_item_ids": ["7706410293", "7747408585"], "payment_method_id": "credit_card_9513926"})]),
    ("assistant", "The exchange has been successfully processed! Here's a recap:\n\n- **Order #W2378156** \u2014 "
                  "Status: **Exchange Requested**\n- **Mechanical Keyboard**: Linear, RGB, Full size \u2192 "
                  "**Clicky, No backlight, Full size**\n- **Smart Thermostat**: Apple HomeKit, Black \u2192 "
                  "**Google Assistant, Black**\n- **Refund of $16.63** to your Mastercard ending in 2478 (expect it "
                  "within 5-7 business days)\n\nYou'll receive an email with instructions on how to return the "
                  "original items. Is there anything else I can help you with?"),
    ("user", "That's everything I needed \u2014 thank you so much for handling both exchanges in one go! I'll keep "
             "an eye out for that return email. Have a great day! \n\n###STOP###"),
]
# recorded results, as the source file shows them (the replay must give these)
RECORDED = {
    "toolu_018Bsb8nq7jXmbtXuQAtRxAa": "yusuf_rossi_9620",
    "toolu_01YVMKK3MgheBuSzvBDsEhmN": '"status": "exchange requested"',
    "toolu_01EAJgf4sEvfwSpDB4zuTbrh": '"7747408585": {"item_id": "7747408585", "options": {"compatibility": "Google '
                                      'Assistant", "color": "black"}, "available": true, "price": 249.01}',
}


def messages(env) -> list[dict]:
    out: list[dict] = []
    for role, body in TASK_0:
        if role != "calls":
            out.append({"role": role, "content": body, "tool_calls": None, "turn_idx": len(out)})
            continue
        calls = [ToolCall(id=cid, name=name, arguments=args, requestor="assistant") for cid, name, args in body]
        out.append({"role": "assistant", "content": "", "turn_idx": len(out),
                    "tool_calls": [c.model_dump(include={"id", "name", "arguments", "requestor"}) for c in calls]})
        for c in calls:
            result = env.get_response(c)
            want = RECORDED.get(c.id)
            assert want is None or want in result.content, (c.id, result.content[:200])
            out.append({"id": c.id, "role": "tool", "content": result.content, "requestor": "assistant",
                        "error": result.error, "turn_idx": len(out)})
    return out


def main() -> None:
    env = get_environment()
    sim = {"id": "a1c35def-2ad7-4fbd-b97e-0dd6586d98ff", "task_id": "0", "trial": 0,
           "termination_reason": "user_stop", "reward_info": {"reward": 1.0}, "messages": messages(env)}
    results = {"source": SOURCE,
               "info": {"environment_info": {"domain_name": "retail", "policy": env.policy},
                        "agent_info": {"implementation": "adaptive-agent", "llm": "claude-opus-4-6"}},
               "tasks": [], "simulations": [sim]}
    OUT.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}: {len(sim['messages'])} messages")


if __name__ == "__main__":
    main()
