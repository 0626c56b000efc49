#!/bin/sh
# The worked example of docs/replay.md: ten GitHub issues reach the triage
# instance as signed webhooks, then its ten recorded turns are replayed
# under a changed role (roles/triage-v2.md) to see what the change does.
#
# From the repository root, with a daemon serving the instance:
#   GH_WEBHOOK_SECRET=s3cret holarchy serve --skills-dir examples/triage/skills \
#       --http-listen 127.0.0.1:8080 &
#   holarchy instance apply examples/triage/triage.toml
#   GH_WEBHOOK_SECRET=s3cret examples/triage/replay-demo.sh 127.0.0.1:8080
set -eu
addr=${1:-127.0.0.1:8080}
: "${GH_WEBHOOK_SECRET:?set it to the daemon's webhook secret}"

deliver() { # number, title, body
    payload=$(printf '{"action":"opened","issue":{"number":%s,"title":"%s","body":"%s"},"repository":{"full_name":"acme/app"}}' "$1" "$2" "$3")
    signature=$(printf '%s' "$payload" | openssl dgst -sha256 -hmac "$GH_WEBHOOK_SECRET" | sed 's/^.* //')
    curl -sS -o /dev/null -w "issue#$1: %{http_code}\n" "http://$addr/ingress/github/triage" \
        -H 'Content-Type: application/json' -H 'X-GitHub-Event: issues' \
        -H "X-GitHub-Delivery: replay-demo-$1" -H "X-Hub-Signature-256: sha256=$signature" \
        --data-binary "$payload"
}

deliver 1 "Crash on start" "the app is a bug factory since 2.1"
deliver 2 "The docs are stale" "the install page is out of date"
deliver 3 "Add dark mode" "a feature many asked for"
deliver 4 "Login fails" "looks like a bug in the session code"
deliver 5 "Typo in README" "see the docs folder too"
deliver 6 "Export to CSV" "would be a nice feature"
deliver 7 "Slow search" "no idea why"
deliver 8 "Bug: wrong totals" "the sums are off by one"
deliver 9 "Question about licensing" "can we ship it in a product?"
deliver 10 "Sidebar overlaps" "a layout bug on small screens"

# Wait until the ten turns are handled, then replay them under the new role.
for _ in $(seq 1 100); do
    handled=$(holarchy --json agent messages triage | grep -c '"status":"handled"' || true)
    [ "$handled" -ge 10 ] && break
    sleep 0.2
done
holarchy replay start --instance triage --turns 10 --role-file examples/triage/roles/triage-v2.md \
    --label "role v2: read the body" --wait >/dev/null
id=$(holarchy --json replay list | head -1 | sed 's/.*"replay_id":"\([^"]*\)".*/\1/')
holarchy replay show "$id"
