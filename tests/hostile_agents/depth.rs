//! Hostile agents: trees grown deep or wide by agents.
