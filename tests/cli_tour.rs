//! The README's tour, command by command, against the real binary: the
//! daemon is `holarchy serve` on a temporary data directory, and every
//! step is `holarchy ...` run as a CLI client, checked on what it prints
//! for people and with `--json`. `readme` keeps the README and these tests
//! in step.

mod common;

#[path = "cli_tour/approvals.rs"]
mod approvals;
#[path = "cli_tour/brains.rs"]
mod brains;
#[path = "cli_tour/builder.rs"]
mod builder;
#[path = "cli_tour/cli.rs"]
mod cli;
#[path = "cli_tour/connect.rs"]
mod connect;
#[path = "cli_tour/errors.rs"]
mod errors;
#[path = "cli_tour/events.rs"]
mod events;
#[path = "cli_tour/export.rs"]
mod export;
#[path = "cli_tour/failures.rs"]
mod failures;
#[path = "cli_tour/help.rs"]
mod help;
#[path = "cli_tour/hostile_text.rs"]
mod hostile_text;
#[path = "cli_tour/instances.rs"]
mod instances;
#[path = "cli_tour/labels.rs"]
mod labels;
#[path = "cli_tour/lifecycle.rs"]
mod lifecycle;
#[path = "cli_tour/memory.rs"]
mod memory;
#[path = "cli_tour/ops.rs"]
mod ops;
#[path = "cli_tour/progress.rs"]
mod progress;
#[path = "cli_tour/readable.rs"]
mod readable;
#[path = "cli_tour/readme.rs"]
mod readme;
#[path = "cli_tour/replay.rs"]
mod replay;
#[path = "cli_tour/signals.rs"]
mod signals;
#[path = "cli_tour/tour.rs"]
mod tour;
#[path = "cli_tour/tree.rs"]
mod tree;
#[path = "cli_tour/workspaces.rs"]
mod workspaces;
