#!/bin/sh
# The smallest holarchy brain on the command contract (docs/brains.md):
# it reads the step's JSON request on stdin and answers with a reply that
# says how big the request was. It calls no tool, so each turn is one step.
bytes=$(wc -c | tr -d ' ')
printf '{"reply":"a shell brain read %s bytes of context"}\n' "$bytes"
