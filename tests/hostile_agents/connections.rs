//! Hostile agents: connections that never authenticate.
