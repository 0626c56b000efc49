//! Cron schedules as an ingress: when a schedule is next due, and which one
//! slot a daemon that was down fires on start.
