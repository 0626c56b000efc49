//! Hostile agents: commands that go after the daemon's secrets.
