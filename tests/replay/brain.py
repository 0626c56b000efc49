#!/usr/bin/env python3
"""A test brain on the command contract whose decisions depend on the
message, on what its tools returned and on its context (how many recent
turns it sees), so a replay that shows it less than the recorded turn saw
would change what it says.

  note: KEY TEXT   writes a note, appends TEXT to notes.txt, replies
  ask: KEY         reads the note back and replies with it
  anything else    replies with the text and what the context holds

Arguments: --other-key asks for KEY-x instead (a call no turn recorded);
--slow sleeps 0.3 s per step.
"""
import json
import sys
import time


def decide(request, other_key):
    text = request["message"]["text"]
    context = request.get("context") or {}
    seen = len(context.get("recent_turns") or [])
    previous = request["previous_results"]
    step = request["step"]
    if text.startswith("note: "):
        key, _, body = text[6:].partition(" ")
        if step == 1:
            return {"tool_calls": [{"name": "MemoryWrite", "input": {"key": key, "text": body}}]}
        if step == 2:
            command = "printf '%s\\n' >> notes.txt" % body.replace("'", "")
            return {"tool_calls": [{"name": "ExecCommand", "input": {"command": command}}]}
        results = [r for s in request["steps"] for r in s["results"]]
        failed = " (refused)" if any(r["is_error"] for r in results) else ""
        return {"reply": "kept %s after %d recent turns%s" % (key, seen, failed)}
    if text.startswith("ask: "):
        key = text[5:] + ("-x" if other_key else "")
        if not previous:
            return {"tool_calls": [{"name": "MemoryGet", "input": {"key": key}}]}
        result = previous[0]
        if result["is_error"]:
            return {"reply": "no note %s: %s" % (key, result["output"].get("error", "?"))}
        return {"reply": "%s is %s" % (key, result["output"].get("text", "?"))}
    return {"reply": "%s (%d recent turns, agent %s)" % (text, seen, request["agent"].get("name"))}


if __name__ == "__main__":
    if "--slow" in sys.argv:
        time.sleep(0.3)
    print(json.dumps(decide(json.load(sys.stdin), "--other-key" in sys.argv)))
