//! The `holarchy` daemon a bench talks to: the built binary on a data
//! directory of the bench's, reached over its Unix socket, and stopped
//! with SIGTERM (and waited for) however the bench ends.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use holarchy::api::pb;
use holarchy::client::{self, Clients, Target};

const HOLARCHY: &str = env!("CARGO_BIN_EXE_holarchy");

pub struct Daemon {
    child: Child,
    data_dir: PathBuf,
}

impl Daemon {
    /// Starts `holarchy serve` on `data_dir` with `args` after it; its log
    /// goes to `log`.
    pub fn start(data_dir: &Path, args: &[&str], log: &Path) -> Self {
        let child = Command::new(HOLARCHY)
            .args(["serve", "--data-dir"])
            .arg(data_dir)
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).expect("the daemon's log"))
            .spawn()
            .expect("the daemon starts");
        Self {
            child,
            data_dir: data_dir.to_owned(),
        }
    }

    /// Clients on the daemon's socket, once it answers.
    pub async fn clients(&self) -> Clients {
        let socket = self.data_dir.join("holarchy.sock");
        let started = Instant::now();
        loop {
            if let Ok(mut clients) = client::connect(&Target::Unix(socket.clone())).await {
                if clients
                    .runtime
                    .get_status(pb::GetStatusRequest {})
                    .await
                    .is_ok()
                {
                    return clients;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the daemon never answered"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, and waits for the process to end.
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
