//! Hostile agents: messages that amplify themselves, and messages that crash the daemon.
