// The supervision tree's filter (console.js draws the tree): the rows the
// page has loaded, filtered in place, and the daemon's walk for the rows
// it has not. Classic scripts share their top-level names: this one uses
// console.js's el, api, nodeRow, agentLink and TREE_PAGE, and console.js
// calls applyFilter and scheduleServerFilter.
"use strict";

// The tree's filter: a loaded row stays when its name, id, state, kind
// or visibility holds every word typed, or when a row loaded below it
// does (so a match shows where it hangs); the others are hidden. Rows
// loaded later (an expanded level, "more...") are filtered as they come.
function applyFilter() {
  const input = document.getElementById("tree-filter");
  const tree = document.getElementById("tree");
  if (!input || !tree) return;
  const words = input.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const rows = Array.from(tree.querySelectorAll("li[data-id]"));
  let shown = 0;
  // Children come after their parents in document order: walk backwards
  // so a row knows whether anything below it stayed.
  for (const li of rows.reverse()) {
    const own = words.every((w) => li.dataset.search.includes(w));
    const below = !!li.querySelector(":scope > ul > li[data-id]:not([hidden])");
    li.hidden = !(own || below);
    li.classList.toggle("match", words.length > 0 && own);
    if (own) shown++;
  }
  const count = document.getElementById("tree-filter-count");
  count.textContent = !words.length ? "" : shown + " of " + rows.length + " loaded rows match";
}

// The filter's reach past the loaded rows: after a pause in typing, the
// daemon walks the tree (every level for the operator, the roots without
// the token), a bounded stretch per request, and the matches the page has
// not loaded are listed under the tree; "more matches..." goes on from
// where the walk stopped. A newer filter drops an older one's answer.
let filterTimer = null;
let filterRound = 0;

function scheduleServerFilter() {
  clearTimeout(filterTimer);
  filterRound++;
  filterTimer = setTimeout(() => serverFilter(filterRound, ""), 250);
}

async function serverFilter(round, page) {
  const input = document.getElementById("tree-filter");
  const box = document.getElementById("tree-matches");
  const list = document.getElementById("tree-matches-list");
  if (!input || !box || !list || round !== filterRound) return;
  const text = input.value.trim();
  if (!page) list.replaceChildren();
  if (!text) { box.hidden = true; return; }
  const params = new URLSearchParams({ filter: text, limit: String(TREE_PAGE) });
  if (page) params.set("page", page);
  const { status, body } = await api("/api/tree?" + params);
  if (round !== filterRound) return;
  box.hidden = false;
  if (status !== 200) {
    list.append(el("li", { class: "muted" }, body.error || "could not search the tree"));
    return;
  }
  const tree = document.getElementById("tree");
  for (const node of body.nodes) {
    // A loaded row is filtered where it is.
    if (tree && tree.querySelector('li[data-id="' + CSS.escape(node.id) + '"]')) continue;
    const li = nodeRow(node);
    li.classList.add("match");
    if (node.parent) {
      li.querySelector(".row").append(el("span", { class: "muted" }, "under ", agentLink(node.parent, node.parent)));
    }
    list.append(li);
  }
  if (body.next) {
    const more = el("li", { class: "more" });
    more.append(el("button", {
      type: "button",
      id: "tree-matches-more",
      onclick: async () => { more.remove(); await serverFilter(round, body.next); },
    }, "more matches..."));
    list.append(more);
  }
  const found = list.querySelectorAll("li[data-id]").length;
  // Nothing beyond the loaded rows, and the walk is over: nothing to say.
  box.hidden = !found && !body.next;
  document.getElementById("tree-matches-count").textContent = found + " found" +
    (body.whole_tree ? "" : " among the roots (log in to search every level)") +
    (body.next ? ", the walk goes on" : "");
}
