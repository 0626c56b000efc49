//! Examples under the main commands' help: what a first use looks like,
//! beside the flags (the README's tour runs the same commands).

pub const SERVE_EXAMPLES: &str = "Examples:
  holarchy serve                                    # data in the platform's data directory
  holarchy serve --data-dir /srv/holarchy --listen 127.0.0.1:7420
  OPENAI_API_KEY=sk-... holarchy serve --brain-openai-url https://api.openai.com/v1 --brain-model gpt-4o-mini
  RUST_LOG=debug holarchy serve                     # more of the daemon's log";
pub const AGENT_EXAMPLES: &str = "Examples:
  holarchy agent create ops --message hello
  holarchy agent send ops \"check the build\"
  echo '{\"reply\":\"on it\"}' | holarchy agent send ops -
  holarchy agent messages ops                       # replies, and why a turn failed
  holarchy agent list --all --state archived
  holarchy agent archive --name bench-              # every live agent whose name starts so";
pub const EVENTS_EXAMPLES: &str = "Examples:
  holarchy events --follow                          # keep watching
  holarchy events --agent ops --after 1200
  holarchy --json events | jq 'select(.kind == \"run_finished\")'";
pub const BENCH_EXAMPLES: &str =
    "Examples (on a scratch daemon: its agents stay, and --restart kills it):
  holarchy serve --data-dir /tmp/holarchy-bench &
  holarchy --data-dir /tmp/holarchy-bench bench idle --agents 100000
  holarchy --data-dir /tmp/holarchy-bench bench turns --agents 1000 --messages 30000 --cleanup";
pub const TREE_EXAMPLES: &str = "Examples:
  holarchy tree                                     # every agent, task and wait
  holarchy tree ops --depth 2                       # ops's subtree, two levels down
  holarchy tree --limit 0 > tree.txt                # every line, indented without box drawing";
pub const TASK_EXAMPLES: &str = "Examples:
  holarchy task list ops
  holarchy task output TASK_ID --follow             # a command's output as it runs
  holarchy task input TASK_ID '{\"reply\":\"done\",\"done\":true}'
  holarchy task stop TASK_ID                        # a child and its whole subtree";
pub const INSTANCE_EXAMPLES: &str = "Examples:
  holarchy instance apply triage.toml               # created; again: unchanged; edited: updated
  holarchy instance get triage
  holarchy instance delete triage";
pub const MEMORY_EXAMPLES: &str = "Examples:
  holarchy memory search ops \"release checklist\"
  holarchy memory search ops deploy --kind note --limit 20
  holarchy memory write ops \"the staging host is build-2\" --key staging --tag infra
  holarchy memory list ops";
pub const WORKSPACE_EXAMPLES: &str = "Examples:
  holarchy workspace attach ops ~/src/project       # its id: project
  holarchy workspace list ops                       # * marks the active one
  holarchy workspace detach ops project";
pub const TOKEN_EXAMPLES: &str = "Examples:
  holarchy token create --role viewer --name dashboards --expires 90d
  holarchy token list
  holarchy token revoke 01JD5Z...                   # refused from now on
  HOLARCHY_TOKEN=hlt1_... holarchy --addr https://daemon:7420 --ca ca.pem token whoami";
pub const AUDIT_EXAMPLES: &str = "Examples:
  holarchy audit                                    # the newest 50 writes, oldest first
  holarchy audit --caller token:01JD5Z... --since 24h
  holarchy audit --action PauseAgent --since 2026-11-01T00:00:00Z --json";
pub const REPLAY_EXAMPLES: &str = "Examples:
  holarchy replay start --instance triage --turns 10 --role-file roles/triage-v2.md --wait
  holarchy replay start ops --brain-command ./candidate.py --concurrency 4
  holarchy replay show rpl_01JD5Z...               # turns that differ, as diffs
  holarchy --json replay show rpl_01JD5Z... --all   # every turn, one JSON object each
  holarchy replay cancel rpl_01JD5Z...              # then resume or delete it";
pub const NAMESPACE_EXAMPLES: &str = "Examples:
  holarchy namespace list                           # agents and commands against each quota
  holarchy namespace quota team-a --agents 500 --turns-per-minute 120 --commands 8
  holarchy namespace quota team-a --clear           # unbounded again (the daemon's limits hold)";
pub const STATUS_EXAMPLES: &str = "Examples:
  holarchy status
  holarchy --json status | jq .public_agents
  holarchy --addr https://daemon:7420 --ca ca.pem status";
pub const TOP_EXAMPLES: &str = "Examples:
  holarchy top                                      # keys: q quit, s sort, / filter, p pause, r resume
  holarchy top --interval 5";
