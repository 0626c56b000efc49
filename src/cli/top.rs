//! `holarchy top`: a live terminal view of the daemon, refreshed from
//! `RuntimeService.GetActivity` over the CLI's usual connection (the Unix
//! socket, or TCP with the token). Interactive on a terminal; one plain
//! frame (`--once`, or stdout not a terminal) or one JSON object
//! (`--json`) otherwise. Interactive keys act on the selected agent
//! (k9s-style: p pause, r resume, a abort, enter its messages and events,
//! t its subtree, / filter); a daemon that goes away is said to be, and
//! retried at every tick until it answers again.

mod app;
mod pane;
mod plain;
mod rows;
mod view;

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossterm::event::{self, Event, KeyEvent, KeyEventKind};
use ratatui::DefaultTerminal;

use super::output::emit;
use crate::api::pb;
use crate::client::{self, Clients, Target};
use app::{Action, App, Pane, PaneKind};

/// Nodes of a subtree the pane shows at most (a page of GetTree holds at
/// most 5,000): the rest is counted, not drawn.
const MAX_SUBTREE_NODES: usize = 20_000;

#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Seconds between refreshes (0.2 to 3600).
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Print one plain-text frame and exit (what happens anyway when
    /// stdout is not a terminal).
    #[arg(long)]
    pub once: bool,
    /// Entries per list (1 to 100).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: u32,
}

/// Runs the view on `clients`; `target` is where a lost connection is
/// made again.
pub async fn run(
    mut clients: Clients,
    target: Target,
    args: &TopArgs,
    json: bool,
) -> anyhow::Result<()> {
    if !(0.2..=3600.0).contains(&args.interval) {
        anyhow::bail!("--interval must be between 0.2 and 3600 seconds");
    }
    let interval = Duration::from_secs_f64(args.interval);
    if args.once || json || !std::io::stdout().is_terminal() {
        let activity = read(&mut clients, args.limit, interval).await?;
        if json {
            emit(plain::json(&activity));
        } else {
            let mut app = App::default();
            app.update(activity, Instant::now());
            emit(plain::frame(&app));
        }
        return Ok(());
    }
    let mut terminal = ratatui::try_init().context("cannot take over the terminal")?;
    let result = interactive(&mut terminal, clients, &target, args.limit, interval).await;
    ratatui::restore();
    result
}

/// One read, bounded in time so a daemon that stops answering leaves the
/// view responsive (the error is shown, the next tick tries again).
async fn read(
    clients: &mut Clients,
    limit: u32,
    interval: Duration,
) -> anyhow::Result<pb::GetActivityResponse> {
    let call = clients
        .runtime
        .get_activity(pb::GetActivityRequest { limit });
    let answer = tokio::time::timeout(interval.max(Duration::from_secs(5)), call)
        .await
        .context("the daemon did not answer in time")??;
    Ok(answer.into_inner())
}

/// The subtree of `agent_id`, drawn as `holarchy tree` draws it.
async fn subtree(clients: &mut Clients, agent_id: &str) -> anyhow::Result<Vec<String>> {
    let mut nodes = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = clients
            .supervision
            .get_tree(pb::GetTreeRequest {
                agent_id: agent_id.to_owned(),
                page_token,
                max_nodes: 0,
                max_depth: None,
            })
            .await?
            .into_inner();
        nodes.extend(page.nodes);
        page_token = page.next_page_token;
        if page_token.is_empty() || nodes.len() >= MAX_SUBTREE_NODES {
            break;
        }
    }
    let mut lines = Vec::with_capacity(nodes.len() + 1);
    // The pane is drawn only on a terminal, and the nodes are already
    // bounded: every line, with box drawing.
    super::tree_view::render(
        &nodes,
        super::tree_view::Branches::Boxes,
        usize::MAX,
        |line| lines.push(line),
    );
    if !page_token.is_empty() {
        lines.push(format!(
            "... more nodes (the first {} shown); `holarchy tree {agent_id}` lists them all",
            nodes.len()
        ));
    }
    Ok(lines)
}

/// What the terminal reader hands the loop.
enum Input {
    Key(KeyEvent),
    Resized,
}

/// Tells the reader thread to end when the view ends, however it ends.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Reads the terminal on a thread of its own (crossterm's reads block),
/// polling so it notices the view has ended.
fn read_terminal(input: tokio::sync::mpsc::Sender<Input>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match event::poll(Duration::from_millis(100)) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(_) => return,
        }
        let sent = match event::read() {
            Ok(Event::Key(key)) if key.kind == KeyEventKind::Press => {
                input.blocking_send(Input::Key(key))
            }
            Ok(Event::Resize(..)) => input.blocking_send(Input::Resized),
            Ok(_) => Ok(()),
            Err(_) => return,
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Whether a failed read means the daemon cannot be reached (gone,
/// restarting, not answering), rather than that it refused the call.
fn unreachable(err: &anyhow::Error) -> bool {
    err.downcast_ref::<tonic::Status>().is_none_or(|status| {
        matches!(
            status.code(),
            tonic::Code::Unavailable
                | tonic::Code::Unknown
                | tonic::Code::Cancelled
                | tonic::Code::DeadlineExceeded
        )
    })
}

/// The lines of `kind`'s pane for `agent_id`.
async fn pane_lines(
    clients: &mut Clients,
    kind: PaneKind,
    agent_id: &str,
) -> anyhow::Result<Vec<String>> {
    match kind {
        PaneKind::Agent => pane::agent_lines(clients, agent_id).await,
        PaneKind::Subtree => subtree(clients, agent_id).await,
    }
}

async fn interactive(
    terminal: &mut DefaultTerminal,
    mut clients: Clients,
    target: &Target,
    limit: u32,
    interval: Duration,
) -> anyhow::Result<()> {
    let (sender, mut inputs) = tokio::sync::mpsc::channel(64);
    let stop = Arc::new(AtomicBool::new(false));
    let _stop = StopOnDrop(stop.clone());
    std::thread::Builder::new()
        .name("top-keys".into())
        .spawn(move || read_terminal(sender, stop))
        .context("cannot start the key reader")?;

    let mut app = App::default();
    let mut down_since: Option<Instant> = None;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                match read(&mut clients, limit, interval).await {
                    Ok(activity) => {
                        app.update(activity, Instant::now());
                        app.disconnected = None;
                        down_since = None;
                    }
                    Err(err) if unreachable(&err) => {
                        let since = *down_since.get_or_insert_with(Instant::now);
                        app.disconnected = Some(format!(
                            "{} (for {}s; every {:.1}s)",
                            rows::one_line(&format!("{err:#}")),
                            since.elapsed().as_secs(),
                            interval.as_secs_f64()
                        ));
                        // A new connection for the next tick: the daemon
                        // may be back, on a new socket.
                        if let Ok(Ok(fresh)) =
                            tokio::time::timeout(interval, client::connect(target)).await
                        {
                            clients = fresh;
                        }
                    }
                    Err(err) => app.error = Some(format!("{err:#}")),
                }
                // An open pane is live too: read again, the scroll kept.
                let open = app.pane.as_ref().map(|p| (p.kind, p.agent.id.clone()));
                if let (Some((kind, agent_id)), None) = (open, &app.disconnected) {
                    match pane_lines(&mut clients, kind, &agent_id).await {
                        Ok(lines) => app.refresh_pane(lines),
                        Err(err) => app.error = Some(format!("{err:#}")),
                    }
                }
            }
            input = inputs.recv() => match input {
                None => break,
                Some(Input::Resized) => {}
                Some(Input::Key(key)) => match app.on_key(key) {
                    Action::Quit => break,
                    Action::None => {}
                    Action::Open(kind, agent) => {
                        match pane_lines(&mut clients, kind, &agent.id).await {
                            Ok(lines) => {
                                app.pane = Some(Pane { kind, agent, lines, scroll: 0 });
                            }
                            Err(err) => app.error = Some(format!("{err:#}")),
                        }
                    }
                    action @ (Action::Pause(_) | Action::Resume(_) | Action::Abort(_)) => {
                        match pane::control(&mut clients, &action).await {
                            Ok(done) => app.notice = Some(done),
                            Err(err) => app.error = Some(format!("{err:#}")),
                        }
                    }
                },
            },
        }
        terminal.draw(|frame| view::draw(frame, &app))?;
    }
    Ok(())
}
