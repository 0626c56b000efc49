//! What every bench binary does at its edges: reading its numeric flags
//! and writing its JSON report.

#![allow(dead_code)]

use std::fmt::Display;
use std::path::{Path, PathBuf};

/// `target/bench-results/NAME.json`, where every bench writes by default.
pub fn report_path(name: &str) -> PathBuf {
    PathBuf::from(format!("target/bench-results/{name}.json"))
}

/// Writes `report` as one line to `path`, making its directory; says
/// where on stderr, so stdout keeps only the table and the JSON line.
pub fn write_report(path: &Path, report: &impl Display) {
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::write(path, format!("{report}\n")) {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(err) => eprintln!("could not write {}: {err}", path.display()),
    }
}

/// The number after `name` in `args`, or `default` when it is absent.
pub fn number(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |n| n.parse().expect("a number"))
}
