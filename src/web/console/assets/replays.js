// The console's replays: an agent's recorded turns run through a
// candidate (`holarchy replay`). The list of the namespace's replays,
// and one replay: its summary and its turns, the recorded decision and
// the candidate's side by side, the rows where they part marked. Loaded
// after console.js, whose helpers (api, el, when, agentNamed, shortId,
// props, listTable, locked, refreshSession) it uses. What agents said and
// the inputs of their calls are hostile text: they go into the page as
// text only, as everything from the daemon does.
"use strict";

// The classes of a turn, as the daemon names them and as people read them.
const REPLAY_CLASSES = {
  same: "same",
  same_tools_different_text: "same tools, other text",
  different_tools: "other tools",
  error: "error",
};

function replayLink(id, label) {
  return el("a", { href: "#/replay/" + encodeURIComponent(id), class: "mono", title: id }, label || id);
}

function replayClass(name) {
  return el("span", { class: "badge class-" + name }, REPLAY_CLASSES[name] || name);
}

function replayCandidate(r) {
  return r.candidate_label ? el("span", {}, el("b", {}, r.candidate_label), ": ", r.candidate) : r.candidate;
}

// The counts by class, each one shown only when it is not zero (same is
// always shown).
function replayCounts(r) {
  return el("span", { class: "replay-counts" },
    el("span", {}, replayClass("same"), " " + r.same),
    r.same_tools_different_text ? el("span", {}, replayClass("same_tools_different_text"), " " + r.same_tools_different_text) : "",
    r.different_tools ? el("span", {}, replayClass("different_tools"), " " + r.different_tools) : "",
    r.errors ? el("span", {}, replayClass("error"), " " + r.errors) : "");
}

async function replaysView(view) {
  const operator = await refreshSession();
  const page = el("div", { id: "replays" }, el("h1", {}, "Replays"));
  view.replaceChildren(page);
  if (!operator) {
    page.append(locked("replays: what agents decided, and what a candidate would have"));
    return;
  }
  page.append(el("p", { class: "muted" }, "An agent's recorded turns, run again through a candidate (another brain, role, skills or constraints) without side effects. Start one with ",
    el("code", {}, "holarchy replay start AGENT"), "."));
  const { status, body } = await api("/api/replays");
  if (status !== 200) {
    page.append(el("p", { class: "muted" }, body.error || "could not load (" + status + ")"));
    return;
  }
  page.append(listTable(["replay", "agent", "status", "replayed", "by class", "candidate", "reason", "started"],
    body.replays.map((r) => el("tr", { dataset: { id: r.replay_id, status: r.status } },
      el("td", {}, replayLink(r.replay_id, shortId(r.replay_id))),
      el("td", {}, agentNamed(r.agent_id, r.agent_name)),
      el("td", { class: "state state-" + r.status }, r.status),
      el("td", {}, r.replayed + " / " + r.selected),
      el("td", {}, replayCounts(r)),
      el("td", {}, replayCandidate(r)),
      el("td", { class: r.reason ? "problem" : "" }, r.reason),
      el("td", {}, when(r.created_at_ms))))));
}

// One line of a side: a step's reply, a call and its input, the decision,
// done, failed.
function replayLine(line) {
  if (!line) return null;
  const step = line.step ? el("span", { class: "muted" }, "step " + line.step + " ") : "";
  switch (line.kind) {
    case "reply": return el("div", {}, step, "says", el("pre", {}, line.text));
    case "call": return el("div", {}, step, "calls ", el("b", { class: "mono" }, line.tool), el("pre", {}, line.text));
    case "failed": return el("div", { class: "problem" }, "failed: ", line.text);
    default: return el("div", {}, line.kind + ": ", el("span", { class: "mono" }, line.text));
  }
}

// "1 call" or "N calls" answered "not recorded".
function unrecorded(n) {
  return n + (n === 1 ? " call" : " calls") + " answered \u201cnot recorded\u201d";
}

function replayTokens(t) {
  return t ? " (" + t.prompt + " in, " + t.completion + " out)" : "";
}

function replayTurn(t) {
  const head = el("h2", {}, "Turn " + t.index + " ", el("span", { class: "mono muted" }, t.run_id), " ",
    replayClass(t.class), " ", el("span", { class: "muted" }, when(t.at_ms)));
  const box = el("section", { class: "replay-turn", dataset: { index: String(t.index), class: t.class } }, head);
  if (t.error) box.append(el("p", { class: "problem" }, "not replayed: " + t.error));
  if (t.unrecorded_calls) box.append(el("p", { class: "muted" }, unrecorded(t.unrecorded_calls)));
  const rows = t.rows.map((r) => el("tr", { class: r.same ? "" : "differs" },
    el("td", { class: "recorded" }, replayLine(r.recorded)),
    el("td", { class: "candidate" }, replayLine(r.candidate))));
  if (!rows.length) rows.push(el("tr", {}, el("td", { class: "muted", colspan: "2" }, "neither side decided anything")));
  const cut = (n) => n ? el("div", { class: "muted" }, n + " more lines not shown") : "";
  box.append(el("table", { class: "list diff" },
    el("tr", {}, el("th", {}, "recorded" + replayTokens(t.recorded_tokens)),
      el("th", {}, "candidate" + replayTokens(t.candidate_tokens))),
    rows,
    t.recorded_lines_cut || t.candidate_lines_cut
      ? el("tr", {}, el("td", {}, cut(t.recorded_lines_cut)), el("td", {}, cut(t.candidate_lines_cut))) : ""));
  return box;
}

// One page of turns into `list`, with a "more turns..." button while the
// replay's turns go on.
async function replayTurns(list, id, all, page) {
  const params = new URLSearchParams();
  if (all) params.set("all", "1");
  if (page) params.set("page", page);
  const { status, body } = await api("/api/replays/" + encodeURIComponent(id) + "?" + params);
  if (status !== 200) {
    list.append(el("p", { class: "muted" }, body.error || "could not load (" + status + ")"));
    return null;
  }
  list.append(...body.turns.map(replayTurn));
  if (body.next) {
    const more = el("div", { class: "more" }, el("button", {
      type: "button", id: "replay-more",
      onclick: async () => { more.remove(); await replayTurns(list, id, all, body.next); },
    }, "more turns..."));
    list.append(more);
  }
  return body;
}

async function replayView(view, id, all) {
  const operator = await refreshSession();
  const page = el("div", { id: "replay", dataset: { id: id } });
  view.replaceChildren(page);
  if (!operator) {
    page.append(el("h1", {}, "Replay"), locked("this replay"));
    return;
  }
  const list = el("div", { id: "replay-turns" });
  const body = await replayTurns(list, id, all, "");
  if (!body) {
    page.append(el("h1", {}, "Replay"), list);
    return;
  }
  const r = body.replay;
  const base = "#/replay/" + encodeURIComponent(r.replay_id);
  page.append(
    el("h1", {}, "Replay ", el("span", { class: "mono" }, r.replay_id), " ",
      el("span", { class: "state state-" + r.status, id: "replay-status" }, r.status)),
    el("p", {}, el("a", { href: "#/replays" }, "\u2190 every replay")),
    props([
      ["agent", agentNamed(r.agent_id, r.agent_name)],
      ["candidate", replayCandidate(r)],
      ["turns", r.replayed + " of " + r.selected + " replayed"],
      ["by class", replayCounts(r)],
      r.reason ? ["reason", el("span", { class: "problem" }, r.reason)] : null,
      ["not recorded", unrecorded(r.unrecorded_calls)],
      ["tokens", r.recorded_tokens + " recorded, " + r.candidate_tokens + " candidate"],
      ["started", when(r.created_at_ms)],
      ["updated", when(r.updated_at_ms)],
    ]),
    el("div", { class: "controls" },
      all ? el("a", { href: base, id: "replay-differences" }, "show only the turns that differ")
        : el("a", { href: base + "/all", id: "replay-all" }, "show every turn"),
      el("span", { class: "muted" }, all ? "every turn" : "the turns that differ")),
    list);
  if (!body.turns.length) {
    list.append(el("p", { class: "muted", id: "replay-none" },
      all ? "No turn was replayed yet." : "No turn differs."));
  }
}
