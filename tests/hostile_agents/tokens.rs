//! Hostile agents: weak tokens and unsafe data directories.
