//! `holarchy store`: work on a store itself, with no daemon serving from
//! it.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use holarchy_actors::secrets::Secrets;

use super::output::Output;
use super::progress::Counter;
use crate::store::copy::{self, Copied};
use crate::store::dump::Table;
use crate::store::postgres::{self, PgStore};

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy a stopped daemon's embedded store into an empty PostgreSQL
    /// database, in one transaction: all of it or, on any failure, none.
    ///
    /// The data directory is only read, and keeps the agents' workspaces:
    /// serve on with `holarchy serve --data-dir DIR --store URL`.
    #[command(after_help = COPY_EXAMPLES)]
    Copy(CopyArgs),
}

const COPY_EXAMPLES: &str = "Examples:
  holarchy store copy --from ~/.local/share/holarchy --to 'postgres://holarchy@db.internal/holarchy'
  HOLARCHY_STORE_PASSWORD=... holarchy store copy --from /var/lib/holarchy --to 'host=/run/postgresql dbname=holarchy'";

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The data directory of the daemon to copy (its --data-dir). The
    /// daemon must be stopped.
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
    /// The database to copy into: a URL or key=value string, without its
    /// password. It must hold no holarchy data yet.
    #[arg(long, value_name = "URL")]
    pub to: String,
    /// A file holding the database's password (or set
    /// HOLARCHY_STORE_PASSWORD).
    #[arg(long, value_name = "FILE")]
    pub store_password_file: Option<PathBuf>,
}

pub async fn store_command(
    command: &StoreCommand,
    secrets: Arc<Secrets>,
    out: &Output,
) -> anyhow::Result<()> {
    let StoreCommand::Copy(args) = command;
    let password = super::serve::store_password(args.store_password_file.as_deref(), &secrets)?;
    let database = postgres::database(&args.to, password)?;
    let from = Arc::new(copy::open_source(&args.from)?);
    let to = match PgStore::open(database) {
        Ok(to) => Arc::new(to),
        Err(err) => {
            from.close().await;
            return Err(err).context("cannot open the database named by --to");
        }
    };
    let (source, target) = (from.clone(), to.clone());
    let counter = Counter::new(out.json);
    let shown = counter.clone();
    let copied = tokio::task::spawn_blocking(move || {
        let mut progress = |table: Table, read: u64| shown.show(table.name(), read);
        copy::copy(&source, &target, &mut progress)
    })
    .await;
    counter.clear();
    from.close().await;
    to.close().await;
    let copied = copied.context("the copy's thread failed")??;
    report(&copied, args, out);
    Ok(())
}

fn report(copied: &Copied, args: &CopyArgs, out: &Output) {
    if out.json {
        let tables: serde_json::Map<String, serde_json::Value> = copied
            .tables
            .iter()
            .map(|(table, rows)| (table.name().to_owned(), (*rows).into()))
            .collect();
        let line = serde_json::json!({
            "copied": tables,
            "seconds": copied.took.as_secs_f64(),
        });
        println!("{line}");
        return;
    }
    println!("copied in {:.1} s:", copied.took.as_secs_f64());
    for (table, rows) in &copied.tables {
        println!("  {:>12}  {}", rows, table.name());
    }
    println!(
        "\nserve from the database with:\n  holarchy serve --data-dir {} --store '{}'\n\
         (the data directory still holds the agents' workspaces; its `db` is no longer read, \
         and is the way back until you remove it)",
        args.from.display(),
        args.to
    );
}
