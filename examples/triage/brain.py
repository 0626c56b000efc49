#!/usr/bin/env python3
"""The triage brain of docs/composition.md's worked example, on the command
contract (docs/brains.md): one JSON request on stdin per step, one decision
on stdout.

An inbound GitHub event (provenance "event") for a new issue: first load
the `labels` skill, then reply with the label its rule picks, and record an
explicit decision. Anything else is acknowledged and recorded as `no_op`.

It stands in for a model that follows its role: when the role asks for the
issue's body to be read too, the label's word is looked for in the body as
well as the title (docs/replay.md replays its turns under such a change).
"""
import json
import sys


def labels_of(skill_text):
    return [line[2:].strip() for line in skill_text.splitlines() if line.startswith("- ")]


def decide(request):
    message = request["message"]
    if message["provenance"] != "event":
        return {
            "reply": "I triage GitHub issues; I act on their events.",
            "decision": {"kind": "no_op", "reason": "not an inbound event"},
        }
    event = json.loads(message["text"])
    previous = request["previous_results"]
    if not previous:
        return {"tool_calls": [{"name": "LoadSkill", "input": {"name": "labels"}}]}
    skill = previous[0]["output"]
    if previous[0]["is_error"]:
        return {"reply": "cannot read the labels skill: %s" % json.dumps(skill)}
    labels = labels_of(skill.get("text", ""))
    issue = event.get("payload", {}).get("issue", {})
    title = issue.get("title", "").lower()
    role = (request.get("role") or {}).get("prompt", "")
    words = title
    if "body as well" in role:
        words = "%s %s" % (title, (issue.get("body") or "").lower())
    label = next((l for l in labels if l in words), labels[-1] if labels else "needs-triage")
    return {
        "reply": "%s: label %s" % (event["subject"], label),
        "decision": {
            "kind": "comment",
            "reason": "the labels skill's rule picks %s" % label,
            "target": event["subject"],
            "idempotency_key": event["dedupe_key"],
        },
    }


print(json.dumps(decide(json.load(sys.stdin))))
