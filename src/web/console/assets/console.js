// The holarchy web console: the supervision tree, expanded one level at a
// time and filtered as it is, and an agent's page, from which an operator
// sends it a message or its tasks input (the overview page is
// overview.js, the tree's filter tree_filter.js, the replays page
// replays.js). Plain script, no
// framework; every string from the daemon goes into the page as text,
// never as markup.
"use strict";

const TOKEN_KEY = "holarchy.token";
const TREE_PAGE = 200;
// The daemon's bound on a message or a task's input, in UTF-8 bytes; it
// refuses longer ones too, this only says so before the text is sent.
const MAX_TEXT_BYTES = 65536;

// Stops the agent page's event stream when the page changes.
let following = null;
// Stops the current page's timers when the page changes.
let leaving = null;

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function headers() {
  const t = token();
  return t ? { Authorization: "Bearer " + t } : {};
}

// One call of the console's API: { status, body }. `payload`, when
// given, is sent as a JSON body.
async function api(path, method, payload) {
  const init = { method: method || "GET", headers: headers(), cache: "no-store" };
  if (payload !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(payload);
  }
  const res = await fetch(path, init);
  let body = null;
  try { body = await res.json(); } catch (_) { body = null; }
  return { status: res.status, body: body || {} };
}

// A DOM element: el("a", { href: "#/" }, "text", child, ...).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function notice(text, isError) {
  const box = document.getElementById("notice");
  box.textContent = text || "";
  box.className = isError ? "error" : "";
  box.hidden = !text;
}

function when(ms) {
  return ms ? new Date(Number(ms)).toLocaleString() : "";
}

function agentLink(id, label) {
  return id ? el("a", { href: "#/agent/" + encodeURIComponent(id), class: "mono", title: id }, label || id) : "";
}

// An id's kind and its tail, for agents with no name: the whole id is the
// link's title.
function shortId(id) {
  const cut = id.indexOf("_");
  return id.length > cut + 9 ? id.slice(0, cut + 1) + "\u2026" + id.slice(-8) : id;
}

// An agent as people know it: its name, else "private" and the id's tail.
function agentNamed(id, name) {
  if (!id) return "";
  return agentLink(id, name || "unnamed " + shortId(id));
}

// The UTF-8 size of `text` over the daemon's bound, as a sentence; "" if
// it fits.
function tooLong(text) {
  const size = new TextEncoder().encode(text).length;
  return size > MAX_TEXT_BYTES ? "the text is " + size + " bytes; at most " + MAX_TEXT_BYTES : "";
}

// --- session ----------------------------------------------------------

// Whether the token given may write (an operator's or an admin's, not a
// viewer's): the controls and the send form are open only then.
let mayWrite = false;

async function refreshSession() {
  const { status, body } = await api("/api/session");
  const operator = status === 200 && body.operator;
  mayWrite = operator && body.writes !== false;
  if (status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    notice("That token is not the daemon's: still read-only.", true);
  }
  const who = document.getElementById("who");
  who.textContent = operator ? (body.role || "operator") : "read-only";
  who.className = operator ? "who operator" : "who";
  document.getElementById("login-form").hidden = operator;
  document.getElementById("logout").hidden = !operator;
  return operator;
}

async function logIn(event) {
  event.preventDefault();
  const input = document.getElementById("token");
  const given = input.value.trim();
  input.value = "";
  if (!given) return;
  sessionStorage.setItem(TOKEN_KEY, given);
  if (await refreshSession()) notice("");
  render();
}

function logOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  refreshSession();
  render();
}

// --- search -----------------------------------------------------------

async function search(event) {
  event.preventDefault();
  const text = document.getElementById("search").value.trim();
  const box = document.getElementById("results");
  if (!text) { box.hidden = true; return; }
  const { status, body } = await api("/api/search?q=" + encodeURIComponent(text));
  box.replaceChildren();
  box.hidden = false;
  if (status !== 200) {
    box.append(el("p", { class: "muted" }, body.error || "search failed"));
    return;
  }
  if (!body.agents.length) {
    box.append(el("p", { class: "muted" }, "No agent is called that."));
    return;
  }
  box.append(el("ul", { id: "search-results" }, body.agents.map((a) =>
    el("li", {}, agentLink(a.agent_id, a.name || a.agent_id), " ",
      el("span", { class: "state state-" + a.state }, a.state), " ",
      a.visibility === "private" ? el("span", { class: "badge private" }, "private") : ""))));
}

// --- the tree ---------------------------------------------------------

function nodeRow(node) {
  const isAgent = node.type === "agent";
  const li = el("li", {
    class: [node.type, node.visibility === "private" ? "private" : "", node.state,
      node.actor_alive ? "" : "dormant"].filter(Boolean).join(" "),
    dataset: { id: node.id, type: node.type, state: node.state,
      search: [node.name, node.id, node.state, node.kind, node.visibility, node.type].join(" ").toLowerCase() },
  });
  const toggle = el("button", {
    type: "button",
    class: isAgent ? "toggle" : "toggle leaf",
    "aria-label": "expand",
    "aria-expanded": "false",
  }, isAgent ? "\u25B8" : "");
  const label = isAgent
    ? agentLink(node.id, node.name || node.id)
    : el("span", { class: "mono" }, node.id);
  const row = el("div", { class: "row" }, toggle, label,
    el("span", { class: "state state-" + node.state }, node.state),
    node.kind ? el("span", { class: "muted" }, node.kind) : "",
    node.visibility === "private" ? el("span", { class: "badge private", title: "private: no operator ingress" }, "private") : "",
    node.type === "task" ? el("span", { class: "badge task", title: "a task handle" }, "task") : "",
    node.type === "wait" ? el("span", { class: "badge wait" }, "wait") : "",
    !isAgent && node.name ? el("span", { class: "muted" }, node.name) : "",
    node.child_agent_id ? el("span", { class: "muted" }, "holds ", agentLink(node.child_agent_id, node.child_agent_id)) : "",
    node.actor_alive ? "" : el("span", { class: "badge down", title: "stored as live, but no actor runs" }, "no actor"));
  li.append(row);
  if (isAgent) {
    const children = el("ul", { hidden: true });
    li.append(children);
    toggle.addEventListener("click", () => expand(node.id, toggle, children));
  }
  return li;
}

async function expand(id, toggle, children) {
  const open = toggle.getAttribute("aria-expanded") === "true";
  if (open) {
    toggle.setAttribute("aria-expanded", "false");
    toggle.textContent = "\u25B8";
    children.hidden = true;
    return;
  }
  toggle.setAttribute("aria-expanded", "true");
  toggle.textContent = "\u25BE";
  children.hidden = false;
  if (!children.dataset.loaded) {
    children.dataset.loaded = "1";
    await loadLevel(children, id, "");
  }
}

// One page of one level of the tree into `list`, with a "more" row when
// the level goes on.
async function loadLevel(list, agentId, page) {
  const started = performance.now();
  const params = new URLSearchParams({ limit: String(TREE_PAGE) });
  if (agentId) params.set("agent", agentId);
  if (page) params.set("page", page);
  const { status, body } = await api("/api/tree?" + params);
  if (status !== 200) {
    list.append(el("li", { class: "muted" }, body.error || "could not load"));
    return null;
  }
  for (const node of body.nodes) list.append(nodeRow(node));
  if (!body.nodes.length && agentId) list.append(el("li", { class: "muted empty" }, "nothing below"));
  if (body.next) {
    const more = el("li", { class: "more" });
    more.append(el("button", {
      type: "button",
      onclick: async () => { more.remove(); await loadLevel(list, agentId, body.next); },
    }, "more..."));
    list.append(more);
  }
  list.dataset.loadedMs = String(Math.round(performance.now() - started));
  showCheck(body.mismatches);
  applyFilter();
  return body;
}

// The live-vs-stored check: mismatches found in what was walked so far.
function showCheck(mismatches) {
  const box = document.getElementById("check");
  if (!box) return;
  const seen = box.mismatches || [];
  for (const m of mismatches || []) if (!seen.includes(m)) seen.push(m);
  box.mismatches = seen;
  box.replaceChildren();
  if (!seen.length) {
    box.className = "check ok";
    box.append("Live actors match the stored tree for everything shown.");
  } else {
    box.className = "check bad";
    box.append(seen.length + " mismatch(es) between live actors and the stored tree:",
      el("ul", {}, seen.map((m) => el("li", { class: "mono" }, m))));
  }
}

// The whole runtime's check, page after page of the full walk.
async function checkAll(button, out) {
  button.disabled = true;
  const mismatches = [];
  let page = "";
  let last = null;
  for (;;) {
    out.textContent = "checking" + (last ? " (" + last.agents + " agents so far)" : "") + "...";
    const { status, body } = await api("/api/check" + (page ? "?page=" + encodeURIComponent(page) : ""));
    if (status !== 200) { out.textContent = body.error || "the check failed"; button.disabled = false; return; }
    mismatches.push(...body.mismatches);
    last = body;
    if (!body.next) break;
    page = body.next;
  }
  button.disabled = false;
  out.replaceChildren(
    el("span", { id: "check-all-result" }, last.agents + " agents, " + last.tasks + " running tasks, " + last.waits +
      " waits: " + (mismatches.length ? mismatches.length + " mismatch(es)" : "every actor matches the store")),
    mismatches.length ? el("ul", {}, mismatches.slice(0, 200).map((m) => el("li", { class: "mono" }, m))) : "");
}

async function treeView(view) {
  const list = el("ul", { class: "tree", id: "tree" });
  const counts = el("div", { class: "counts" });
  const whole = el("span", { class: "muted" });
  const checkButton = el("button", { type: "button", id: "check-all" }, "Check every actor");
  checkButton.addEventListener("click", () => checkAll(checkButton, whole));
  const filter = el("input", { type: "search", id: "tree-filter", maxlength: "64", autocomplete: "off",
    placeholder: "filter: name, id, state, kind", "aria-label": "filter the tree" });
  filter.addEventListener("input", () => { applyFilter(); scheduleServerFilter(); });
  const matches = el("section", { id: "tree-matches", hidden: true },
    el("h2", {}, "Matches not loaded above ", el("span", { class: "muted", id: "tree-matches-count" })),
    el("ul", { class: "tree", id: "tree-matches-list" }));
  view.replaceChildren(el("h1", {}, "Supervision tree"), counts, el("div", { id: "check", class: "check ok" }),
    el("div", { class: "controls" }, checkButton, whole),
    el("div", { class: "controls" }, filter, el("span", { class: "muted", id: "tree-filter-count" })), list, matches);
  const body = await loadLevel(list, "", "");
  if (body) {
    counts.replaceChildren(
      el("span", {}, el("b", {}, String(body.nodes.length)), body.next ? "+ roots" : " roots"),
      el("span", {}, el("b", {}, String(body.partitions)), " partitions"),
      el("span", { class: "muted" }, "expand an agent to see its tasks, waits and children"));
  }
}

// --- an agent's page ---------------------------------------------------

function props(rows) {
  return el("table", { class: "props" }, rows.filter((r) => r).map(([k, v]) =>
    el("tr", {}, el("th", {}, k), el("td", {}, v === "" || v === null || v === undefined ? "-" : v))));
}

function locked(what) {
  return el("div", { class: "locked" }, "Log in with the daemon's token to see " + what + ".");
}

async function control(id, action, name) {
  if (action === "archive" && !confirm("Archive " + name + " and every private agent below it?")) return;
  const { status, body } = await api("/api/agents/" + encodeURIComponent(id) + "/" + action, "POST");
  if (status === 200) notice(action + ": now " + body.state);
  else notice(action + " refused (" + status + "): " + (body.error || ""), true);
  render();
}

function controls(agent, operator) {
  const isPublic = agent.visibility === "public";
  const live = agent.state !== "archived";
  const why = !operator ? "log in to act" : !mayWrite ? "a viewer's token reads only"
    : !isPublic ? "private: reach it through its parent's task" : "";
  const button = (action, label, enabled, cls) => el("button", {
    type: "button", id: "action-" + action, class: cls || "",
    disabled: !(operator && mayWrite && isPublic && live && enabled), title: why,
    onclick: () => control(agent.agent_id, action, agent.name || agent.agent_id),
  }, label);
  return el("div", { class: "controls" },
    button("pause", "Pause", agent.state === "active"),
    button("resume", "Resume", agent.state === "paused"),
    button("abort", "Abort run", !!agent.current_run_id),
    button("archive", "Archive", true, "danger"),
    why ? el("span", { class: "muted" }, why) : "");
}

async function section(parent, title, path, draw, id) {
  const box = el("div", { id: id || null }, el("p", { class: "muted" }, "Loading..."));
  parent.append(el("h2", {}, title), box);
  const { status, body } = await api(path);
  box.replaceChildren(status === 200 ? draw(body) : el("p", { class: "muted" }, body.error || "could not load"));
}

function listTable(head, rows) {
  if (!rows.length) return el("p", { class: "muted" }, "None.");
  return el("table", { class: "list" }, el("tr", {}, head.map((h) => el("th", {}, h))), rows);
}

function messagesTable(body) {
  return el("div", {}, listTable(["when", "from", "status", "message", "reply"], body.messages.map((m) =>
    el("tr", {}, el("td", {}, when(m.created_at_ms)),
      el("td", {}, m.provenance, m.provenance_agent_id ? el("div", {}, agentNamed(m.provenance_agent_id, m.provenance_agent_name)) : ""),
      el("td", { class: "state state-" + m.status }, m.status),
      el("td", {}, el("pre", {}, m.text)),
      el("td", {}, el("pre", {}, m.reply), (m.problems || []).map((p) => el("div", { class: "problem" }, "! " + p)))))),
  body.next ? el("p", { class: "muted" }, "More messages follow (the API pages with ?page=" + body.next + ").") : "");
}

function tasksTable(body) {
  return listTable(["task", "kind", "status", "label / command", "child", ""], body.tasks.map((t) => {
    const out = el("div", {});
    return el("tr", { dataset: { task: t.task_id } }, el("td", { class: "mono" }, t.task_id), el("td", {}, t.kind),
      el("td", { class: "state state-" + t.status }, t.status),
      el("td", {}, t.command || t.label, t.output ? el("pre", {}, t.output) : "", out,
        t.status === "running" ? taskInputForm(t) : ""),
      el("td", {}, agentLink(t.child_agent_id)),
      el("td", {}, el("button", { type: "button", onclick: () => taskOutput(t.task_id, out) }, "output")));
  }));
}

// Input for a running task: the child's next message (as `holarchy task
// input`), or a line on a command's stdin.
function taskInputForm(task) {
  const text = el("textarea", { class: "task-input-text", rows: "2", "aria-label": "input for task " + task.task_id,
    disabled: !mayWrite, title: mayWrite ? "" : "a viewer's token reads only",
    placeholder: task.kind === "command" ? "a line for its stdin" : "a message for the child" });
  const result = el("span", { class: "muted task-input-result" });
  const send = async (event) => {
    event.preventDefault();
    const why = text.value.trim() ? tooLong(text.value) : "the text is empty";
    if (why) { result.textContent = "not sent: " + why; return; }
    const { status, body } = await api("/api/tasks/" + encodeURIComponent(task.task_id) + "/input", "POST", { text: text.value });
    result.textContent = status === 200 ? "sent" + (body.message_id ? " as " + body.message_id : "")
      : "refused (" + status + "): " + (body.error || "");
    if (status === 200) text.value = "";
  };
  return el("form", { class: "task-input", onsubmit: send }, text,
    el("button", { type: "submit", class: "task-input-send", disabled: !mayWrite }, "Send input"), result);
}

// A message for a public agent, as `holarchy agent send`: on disk when
// the daemon answers; a dedupe key makes a retry the same message.
function sendForm(agent, operator) {
  const isPublic = agent.visibility === "public";
  const open = operator && mayWrite && isPublic && agent.state !== "archived";
  const why = !operator ? "log in to send" : !mayWrite ? "a viewer's token reads only" : !isPublic ? "private: send input to its parent's task instead"
    : !open ? "archived" : "";
  const text = el("textarea", { id: "send-text", rows: "3", disabled: !open, "aria-label": "message",
    placeholder: "a message, or a scripted turn as JSON" });
  const key = el("input", { id: "send-dedupe", maxlength: "128", disabled: !open, autocomplete: "off",
    placeholder: "dedupe key (optional)", "aria-label": "dedupe key" });
  const result = el("span", { class: "muted", id: "send-result" }, why);
  const send = async (event) => {
    event.preventDefault();
    const why = text.value.trim() ? tooLong(text.value) : "the text is empty";
    if (why) { result.textContent = "not sent: " + why; result.className = "error"; return; }
    const payload = { text: text.value };
    if (key.value.trim()) payload.dedupe_key = key.value.trim();
    const { status, body } = await api("/api/agents/" + encodeURIComponent(agent.agent_id) + "/messages", "POST", payload);
    if (status !== 200) {
      result.textContent = "refused (" + status + "): " + (body.error || "");
      result.className = "error";
      return;
    }
    result.className = "muted";
    result.textContent = (body.duplicate ? "already sent as " : "sent as ") + body.message_id;
    text.value = "";
    const messages = document.getElementById("messages");
    if (messages) await refreshMessages(agent.agent_id, messages);
  };
  return el("form", { id: "send-form", class: "send", onsubmit: send }, text,
    el("div", { class: "controls" }, key, el("button", { type: "submit", id: "send", disabled: !open }, "Send"), result));
}

async function refreshMessages(id, box) {
  const { status, body } = await api("/api/agents/" + encodeURIComponent(id) + "/messages?limit=100");
  box.replaceChildren(status === 200 ? messagesTable(body) : el("p", { class: "muted" }, body.error || "could not load"));
}

async function taskOutput(taskId, box) {
  const { status, body } = await api("/api/tasks/" + encodeURIComponent(taskId) + "/output");
  box.replaceChildren(status === 200
    ? el("pre", { class: "output" }, body.output || "(no output)",
      body.dropped_bytes ? "\n[" + body.dropped_bytes + " bytes dropped]" : "")
    : el("span", { class: "muted" }, body.error || "could not load"));
}

function workTable(body) {
  return listTable(["objective", "status", "plan", "waiting on", "updated"], body.work_items.map((w) =>
    el("tr", {}, el("td", {}, w.objective), el("td", {}, w.status),
      el("td", {}, w.plan.map((s) => el("div", {}, "[" + s.status + "] " + s.title))),
      el("td", {}, w.waiting_on.join("; ")), el("td", {}, when(w.updated_at_ms)))));
}

function workspacesTable(body) {
  return el("div", {}, el("p", {}, "Commands run in ", el("code", {}, body.active_dir || "-")),
    listTable(["workspace", "root", ""], body.workspaces.map((w) =>
      el("tr", {}, el("td", {}, w.workspace_id), el("td", { class: "mono" }, w.root), el("td", {}, w.active ? "active" : "")))));
}

// Follows the agent's events (server-sent events read through fetch, so
// the token goes in a header, never in the URL).
async function followEvents(id, box) {
  const stop = new AbortController();
  following = stop;
  let res;
  try {
    res = await fetch("/api/agents/" + encodeURIComponent(id) + "/events", { headers: headers(), signal: stop.signal });
  } catch (_) { return; }
  if (!res.ok || !res.body) {
    box.replaceChildren(el("div", { class: "muted" }, "events unavailable (" + res.status + ")"));
    return;
  }
  box.replaceChildren();
  const reader = res.body.getReader();
  const text = new TextDecoder();
  let pending = "";
  for (;;) {
    let chunk;
    try { chunk = await reader.read(); } catch (_) { return; }
    if (chunk.done) break;
    pending += text.decode(chunk.value, { stream: true });
    let end;
    while ((end = pending.indexOf("\n\n")) >= 0) {
      const block = pending.slice(0, end);
      pending = pending.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (!data) continue;
      if (block.startsWith("event: error")) { box.append(el("div", { class: "muted" }, "stream ended: " + data)); continue; }
      const e = JSON.parse(data);
      box.append(el("div", { class: e.problem ? "event failed" : "event" },
        el("span", { class: "muted" }, "#" + e.cursor + " " + when(e.at_ms) + " "),
        el("b", {}, e.kind), " ", e.text || "", e.problem ? el("div", { class: "problem" }, "! " + e.problem) : ""));
      box.scrollTop = box.scrollHeight;
    }
  }
  box.append(el("div", { class: "muted" }, "stream ended"));
}

async function agentView(view, id) {
  const operator = await refreshSession();
  const { status, body } = await api("/api/agents/" + encodeURIComponent(id));
  if (status !== 200) {
    view.replaceChildren(el("h1", {}, "Agent"), el("p", { class: "muted" }, body.error || "could not load"));
    return;
  }
  const a = body;
  const page = el("div", { id: "agent", dataset: { id: a.agent_id, state: a.state } });
  view.replaceChildren(page);
  page.append(
    el("h1", {}, a.name || a.agent_id, " ", el("span", { class: "state state-" + a.state, id: "agent-state" }, a.state),
      a.visibility === "private" ? el("span", { class: "badge private" }, "private") : ""),
    controls(a, operator),
    props([
      ["id", el("span", { class: "mono" }, a.agent_id)],
      ["profile", a.preset + " (" + a.visibility + ", " + a.ownership + ")"],
      ["supervisor", a.supervisor_agent_id ? el("span", { id: "supervisor" }, agentNamed(a.supervisor_agent_id, a.supervisor_name)) : "none (self-owned)"],
      ["created by", a.lineage_parent_agent_id ? el("span", { id: "creator" }, agentNamed(a.lineage_parent_agent_id, a.lineage_parent_name)) : "an operator"],
      ["created", when(a.created_at_ms)],
      ["activity", a.activity],
      ["queue", String(a.queue_length)],
      ["current run", a.current_run_id ? el("span", { class: "mono" }, a.current_run_id) : "none"],
      ["turns", String(a.turns_completed)],
      ["brain", a.brain.kind + (a.brain.model ? " " + a.brain.model : "") + (a.brain.program ? " " + a.brain.program + " " + (a.brain.args || []).join(" ") : "")],
      a.instance ? ["instance", a.instance] : null,
      ["waits", a.full ? (a.waiting_on.length ? el("div", {}, a.waiting_on.map((w) => el("div", {}, w))) : "none") : String(a.waits)],
      a.full && a.current_work_item ? ["working on", a.current_work_item.objective] : null,
      a.full && a.usage ? ["tokens", a.usage.prompt_tokens + " in, " + a.usage.completion_tokens + " out over " + a.usage.turns + " turns"] : null,
      a.full && a.memory ? ["memory", a.memory.notes + " notes, " + a.memory.entries + " entries"] : null,
    ]));
  if (!operator) {
    page.append(el("h2", {}, "Messages, tasks, work, workspaces, events"), locked("what this agent holds"));
    return;
  }
  const base = "/api/agents/" + encodeURIComponent(id);
  const events = el("div", { class: "events", id: "events" }, el("div", { class: "muted" }, "connecting..."));
  page.append(el("h2", {}, "Send a message"), sendForm(a, operator));
  await Promise.all([
    section(page, "Messages and replies", base + "/messages?limit=100", messagesTable, "messages"),
    section(page, "Tasks", base + "/tasks?limit=100", tasksTable),
    section(page, "Work items", base + "/work?limit=100", workTable),
    section(page, "Workspaces", base + "/workspaces", workspacesTable),
  ]);
  page.append(el("h2", {}, "Events (live)"), events);
  followEvents(id, events);
}

// --- routing -----------------------------------------------------------

async function render() {
  if (following) { following.abort(); following = null; }
  if (leaving) { leaving(); leaving = null; }
  const view = document.getElementById("view");
  const hash = location.hash || "#/";
  const agent = hash.match(/^#\/agent\/([^/]+)$/);
  const replay = hash.match(/^#\/replay\/([^/]+)(\/all)?$/);
  try {
    if (agent) await agentView(view, decodeURIComponent(agent[1]));
    else if (hash === "#/overview") leaving = await overviewView(view);
    else if (hash === "#/replays") await replaysView(view);
    else if (replay) await replayView(view, decodeURIComponent(replay[1]), !!replay[2]);
    else await treeView(view);
  } catch (err) {
    notice("The console could not reach the daemon: " + err.message, true);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login-form").addEventListener("submit", logIn);
  document.getElementById("logout").addEventListener("click", logOut);
  document.getElementById("search-form").addEventListener("submit", search);
  window.addEventListener("hashchange", () => { notice(""); window.scrollTo(0, 0); render(); });
  refreshSession().then(render);
});
