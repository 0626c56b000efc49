#!/usr/bin/env python3
"""A small holarchy brain on the command contract (docs/brains.md).

One JSON object comes in on stdin per step; one decision goes out on
stdout. This brain understands a few plain-text commands:

  run: CMD          runs CMD with ExecCommand and replies with its output
  delegate: TEXT    spawns a private child (on this same brain) with TEXT
  finish: TEXT      replies TEXT and says the delegated work is done
  anything else     echoes it back

A child's result arrives as a message with provenance "child_result".
"""
import json
import sys


def decide(request):
    message = request["message"]
    text = message["text"]
    previous = request["previous_results"]

    # Second step: the tool calls of the first came back; report on them.
    if previous:
        result = previous[0]
        if result["is_error"]:
            return {"reply": "the tool failed: %s" % json.dumps(result["output"])}
        if result["tool"] == "ExecCommand":
            handle = result["output"]["task_handle"]
            return {"reply": "ran: %s" % handle["initial_output"].strip()}
        if result["tool"] == "SpawnAgent":
            return {"reply": "delegated to %s" % result["output"]["agent_id"]}
        return {"reply": "done with %s" % result["tool"]}

    if message["provenance"] == "child_result":
        return {"reply": "child %s reported: %s" % (message["from_agent_id"], text)}
    if text.startswith("run: "):
        return {"tool_calls": [{"name": "ExecCommand", "input": {"command": text[5:]}}]}
    if text.startswith("delegate: "):
        return {
            "tool_calls": [
                {"name": "SpawnAgent", "input": {"preset": "private_child", "initial_message": text[10:]}}
            ]
        }
    if text.startswith("finish: "):
        return {"reply": text[8:], "done": True}
    return {"reply": "echo: %s" % text}


if __name__ == "__main__":
    json.dump(decide(json.load(sys.stdin)), sys.stdout)
