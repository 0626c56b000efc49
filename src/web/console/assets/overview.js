// The console's overview page: live agents by state, turns/s, the longest
// queues, the busiest agents and the recent failures, read every few
// seconds while the page is open. Loaded after console.js, whose helpers
// (api, el, when, agentLink, locked, refreshSession) it uses.
"use strict";

const OVERVIEW_EVERY_MS = 2000;
const FAILURES_KEPT = 20;

// The previous read's turn count and clock, for turns/s; the failures
// shown and the log cursor read up to.
function overviewState() {
  return { last: null, failures: [], cursor: null };
}

function tile(id, label, value, cls) {
  return el("div", { class: "tile " + (cls || "") }, el("div", { class: "muted" }, label),
    el("b", { id: id }, String(value)));
}

function agentsTable(title, rows, extra) {
  if (!rows.length) return el("p", { class: "muted" }, "None now.");
  return el("table", { class: "list" },
    el("tr", {}, el("th", {}, "agent"), el("th", {}, "state"), el("th", {}, title)),
    rows.map((a) => el("tr", { dataset: { id: a.agent_id } },
      el("td", {}, agentLink(a.agent_id, a.name || shortId(a.agent_id))),
      el("td", { class: "state state-" + a.state }, a.state),
      el("td", {}, extra(a)))));
}

function failuresTable(failures) {
  if (!failures.length) return el("p", { class: "muted", id: "ov-no-failures" }, "No failed run or tool error in the recent log.");
  return el("table", { class: "list", id: "ov-failures-list" },
    el("tr", {}, el("th", {}, "when"), el("th", {}, "agent"), el("th", {}, "what went wrong")),
    failures.slice().reverse().map((f) => el("tr", {},
      el("td", {}, when(f.at_ms)),
      el("td", {}, agentLink(f.agent_id, f.agent_name || shortId(f.agent_id))),
      el("td", { class: "problem" }, f.problem))));
}

// One read of /api/overview into the page.
async function overviewRead(parts, state, operator) {
  const params = state.cursor === null ? "" : "?after=" + state.cursor;
  const { status, body } = await api("/api/overview" + params);
  if (status !== 200) {
    parts.status.textContent = body.error || "could not load (" + status + ")";
    return;
  }
  parts.status.textContent = "updated " + new Date().toLocaleTimeString();
  const a = body.agents;
  parts.tiles.replaceChildren(
    tile("ov-public-active", "public active", a.public.active, "state-active"),
    tile("ov-public-paused", "public paused", a.public.paused, "state-paused"),
    tile("ov-private-active", "private active", a.private.active, "state-active"),
    tile("ov-private-paused", "private paused", a.private.paused, "state-paused"),
    tile("ov-busy", "running a turn", a.busy),
    tile("ov-given-up", "given up (since start)", a.given_up, a.given_up ? "state-failed" : ""),
    tile("ov-turns-rate", "turns/s", rate(state, body)),
    tile("ov-turns", "turns since start", body.turns.finished),
    tile("ov-turns-failed", "failed turns", body.turns.failed, body.turns.failed ? "state-failed" : ""),
    tile("ov-queued", "queued messages", body.queued_messages),
    tile("ov-tasks", "running tasks", body.running_tasks),
    tile("ov-waits", "armed waits", body.armed_waits));
  parts.queues.replaceChildren(agentsTable("queue", body.longest_queues, (x) => String(x.queue_length)));
  parts.busiest.replaceChildren(agentsTable("turns in the last minute", body.busiest, (x) => String(x.recent_turns)));
  if (!operator) {
    parts.failures.replaceChildren(locked("failed runs and tool errors"));
    return;
  }
  state.failures.push(...body.failures);
  state.failures = state.failures.slice(-FAILURES_KEPT);
  state.cursor = body.cursor;
  parts.failures.replaceChildren(failuresTable(state.failures));
}

// Turns finished per second between this read and the last, by the
// daemon's own clock.
function rate(state, body) {
  const now = { turns: body.turns.finished, ms: body.uptime_ms };
  const last = state.last;
  state.last = now;
  if (!last || now.ms <= last.ms) return "measuring...";
  return ((now.turns - last.turns) * 1000 / (now.ms - last.ms)).toFixed(1);
}

// The page, and its timer; `render` stops the timer when the page changes.
async function overviewView(view) {
  const operator = await refreshSession();
  const parts = {
    status: el("span", { class: "muted", id: "ov-status" }, "loading..."),
    tiles: el("div", { class: "tiles", id: "ov-tiles" }),
    queues: el("div", { id: "ov-queues" }),
    busiest: el("div", { id: "ov-busiest" }),
    failures: el("div", { id: "ov-failures" }),
  };
  view.replaceChildren(el("div", { id: "overview" },
    el("h1", {}, "Overview ", parts.status), parts.tiles,
    el("h2", {}, "Recent failures"), parts.failures,
    el("h2", {}, "Longest queues"), parts.queues,
    el("h2", {}, "Busiest agents"), parts.busiest));
  const state = overviewState();
  let timer = null;
  let stopped = false;
  // One read at a time, the next due a while after the last ended; a page
  // left (or replaced while this one loaded) reads no more.
  const tick = async () => {
    if (stopped || location.hash !== "#/overview") return;
    try {
      await overviewRead(parts, state, operator);
    } catch (err) {
      parts.status.textContent = "disconnected, retrying: " + err.message;
    }
    if (!stopped) timer = setTimeout(tick, OVERVIEW_EVERY_MS);
  };
  await tick();
  return () => { stopped = true; clearTimeout(timer); };
}
