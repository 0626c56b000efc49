//! Hostile agents: commands that print without end or escape their task.
