// The ctxstore viewer. Every piece of stored text reaches the page through
// textContent or an attribute set by the DOM API, never through innerHTML:
// a message holding markup shows it as text. The server's
// Content-Security-Policy forbids inline script besides.
"use strict";

const state = { config: null, es: null, route: null, marks: {} };
window.__ctxstore = state.marks; // paint times, read by the browser tests

// el builds an element: attrs are set as properties (className, title...)
// or, for data-* and aria-*, as attributes; strings among children become
// text nodes.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("data-") || k.startsWith("aria-")) e.setAttribute(k, v);
    else if (k === "onclick" || k === "oninput" || k === "onchange" || k === "onsubmit" || k === "ontoggle") e.addEventListener(k.slice(2), v);
    else if (k === "style") e.style.cssText = v;
    else e[k] = v;
  }
  return put(e, children);
}

// put appends children to e: nested arrays are flattened, null, undefined
// and false left out, strings made text nodes.
function put(e, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// fill replaces e's children, as put appends them.
function fill(e, ...children) {
  e.replaceChildren();
  return put(e, children);
}

async function api(path) {
  const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  const text = await r.text();
  let body;
  try { body = JSON.parse(text); } catch { body = { error: text.trim() || r.status + " " + r.statusText }; }
  if (!r.ok) throw new Error(body.error || (r.status + " " + r.statusText));
  return body;
}

const fmtInt = (n) => Number(n).toLocaleString("en-US");
const fmtTime = (t) => (t && !t.startsWith("0001")) ? new Date(t).toLocaleString() : "";
function ago(t) {
  if (!t || t.startsWith("0001")) return "";
  const s = (Date.now() - new Date(t).getTime()) / 1000;
  if (s < 60) return Math.max(0, Math.round(s)) + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return Math.round(s / 86400) + " d ago";
}
function short(s, n) { s = String(s || "").replace(/\s+/g, " ").trim(); return s.length > n ? s.slice(0, n - 1) + "…" : s; }
function debounce(fn, ms) { let t; return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); }; }

// coalesce returns a function that runs fn, one run at a time: calls that
// come while it runs make one more run after it, at least gap ms later.
// A stream of changes is followed without running fn twice at once.
function coalesce(fn, gap) {
  let running = false, again = false;
  const go = async () => {
    if (running) { again = true; return; }
    running = true;
    try { await fn(); } catch (e) { console.error(e); }
    await new Promise((r) => setTimeout(r, gap));
    running = false;
    if (again) { again = false; go(); }
  };
  return go;
}
function painted(name, since) {
  requestAnimationFrame(() => setTimeout(() => {
    if (state.marks[name] === undefined) {
      state.marks[name] = performance.now();
      if (since !== undefined) state.marks[name + "_since_route"] = performance.now() - since;
      performance.mark("ctxstore-" + name);
    }
  }, 0));
}

function listen(session, onChange) {
  if (state.es) state.es.close();
  const live = document.getElementById("live");
  const es = new EventSource("/api/events" + (session ? "?s=" + encodeURIComponent(session) : ""));
  es.addEventListener("open", () => live.classList.add("on"));
  es.addEventListener("error", () => live.classList.remove("on"));
  es.addEventListener("change", (ev) => onChange(JSON.parse(ev.data)));
  state.es = es;
}

// ---- routing ----

function parseRoute() {
  const h = location.hash || "#/";
  if (h.startsWith("#/s/")) {
    const [path, query] = h.slice(4).split("?");
    const q = new URLSearchParams(query || "");
    return { page: "session", name: decodeURIComponent(path), epoch: Number(q.get("epoch") || 0), seq: Number(q.get("seq") || 0) };
  }
  if (h.startsWith("#/search?")) return { page: "search", q: new URLSearchParams(h.slice(9)).get("q") || "" };
  return { page: "list" };
}
const sessionHref = (name, extra) => "#/s/" + encodeURIComponent(name) + (extra ? "?" + extra : "");

async function render() {
  const route = parseRoute();
  state.route = route;
  const main = document.getElementById("main");
  try {
    if (route.page === "session") await sessionPage(main, route);
    else if (route.page === "search") await searchPage(main, route);
    else await listPage(main);
  } catch (e) {
    fill(main, el("p", { className: "error" }, String(e.message || e)));
  }
}

// ---- the session list ----

const listState = { sort: "updated", asc: false, filter: "" };
const listColumns = [
  ["name", "session", false], ["messages", "messages", true], ["tokens", "tokens", true],
  ["epoch", "epoch", true], ["updated", "last change", false], ["title", "title", false],
];

async function listPage(main) {
  const data = await api("/api/sessions");
  let sessions = data.sessions;
  const filter = el("input", { type: "search", placeholder: "filter by name or title", value: listState.filter, "aria-label": "filter sessions" });
  const count = el("span", { className: "muted" });
  const table = el("table", { id: "sessions" });
  const draw = () => {
    const f = listState.filter.toLowerCase();
    let rows = sessions.filter((s) => !f || s.name.toLowerCase().includes(f) || (s.title || "").toLowerCase().includes(f));
    const k = listState.sort;
    rows.sort((a, b) => {
      const x = a[k], y = b[k];
      const c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
      return listState.asc ? c : -c;
    });
    count.textContent = rows.length + " of " + sessions.length + " sessions";
    const head = el("tr", {}, listColumns.map(([key, label, num]) => el("th", {
      className: [num ? "num" : "", key === k ? "sorted" : "", key === k && listState.asc ? "asc" : ""].join(" "),
      "data-key": key,
      onclick: () => { listState.asc = listState.sort === key ? !listState.asc : !num && key !== "updated"; listState.sort = key; draw(); },
    }, label)));
    const shown = rows.slice(0, 1000);
    const body = shown.map((s) => el("tr", { className: "row", "data-session": s.name, onclick: () => { location.hash = sessionHref(s.name); } },
      el("td", {}, el("a", { href: sessionHref(s.name) }, s.name)),
      el("td", { className: "num" }, fmtInt(s.messages), s.total_messages > s.messages ? el("span", { className: "muted", title: "over every epoch" }, " / " + fmtInt(s.total_messages)) : ""),
      el("td", { className: "num", title: s.mixed_counters ? "counted by several counters" : s.counter }, fmtInt(s.tokens) + (s.mixed_counters ? "*" : "")),
      el("td", { className: "num" }, s.epoch),
      el("td", { title: fmtTime(s.updated) }, ago(s.updated)),
      el("td", { className: "title", title: s.title }, s.importing ? "(import unfinished) " : "", s.title)));
    const more = rows.length > shown.length ? el("tr", {}, el("td", { colSpan: 6, className: "muted" }, (rows.length - shown.length) + " more: filter to narrow")) : null;
    fill(table, el("thead", {}, head), el("tbody", {}, body, more));
  };
  filter.addEventListener("input", () => { listState.filter = filter.value; draw(); });
  fill(main, el("div", { className: "toolbar" }, filter, count), table,
    sessions.length ? null : el("p", { className: "muted" }, "No sessions yet. 'ctxstore demo' makes one."));
  draw();
  painted("list");
  listen("", coalesce(async () => {
    if (state.route.page !== "list") return;
    sessions = (await api("/api/sessions")).sessions;
    draw();
  }, 1000));
}

// ---- search (when the library has it) ----

async function searchPage(main, route) {
  const data = await api("/api/search?q=" + encodeURIComponent(route.q));
  const hits = data.hits || [];
  fill(main, el("h3", {}, "Search: ", route.q),
    hits.length ? null : el("p", { className: "muted" }, "No message matches."),
    el("div", {}, hits.map((h) => el("div", { className: "msg" },
      el("div", { className: "head" }, el("a", { href: sessionHref(h.session, "epoch=" + h.epoch + "&seq=" + h.seq) }, h.session + " #" + h.seq),
        el("span", { className: "role" }, h.role), el("span", {}, fmtTime(h.time))),
      el("div", { className: "text" }, h.snippet)))));
}

// ---- a session ----

// page is the open session: what is loaded and rendered.
let page = null;

// firstPage is how many messages a session page shows first: a screen
// and more, so a 100k-message session paints as fast as a short one.
const firstPage = 30;
const defaultBudget = 8000;

function messagesURL(name, epoch, opts) {
  let q = "/api/messages?s=" + encodeURIComponent(name) + "&epoch=" + (epoch || 0);
  for (const k of ["before", "after", "limit"]) if (opts[k]) q += "&" + k + "=" + opts[k];
  return q;
}

// quiet returns p, marking its failure as handled: the page reports the
// failure where it awaits p, or not at all when it left the page first.
function quiet(p) { p.catch(() => {}); return p; }

async function sessionPage(main, route) {
  const start = performance.now();
  // The session, its newest messages and its view are asked for at once.
  const infoP = quiet(api("/api/session?s=" + encodeURIComponent(route.name)));
  const firstOpts = route.seq ? { before: route.seq + 101 } : { limit: firstPage };
  const firstP = quiet(api(messagesURL(route.name, route.epoch, firstOpts)));
  const viewP = route.epoch ? null : quiet(api(viewURL(route.name, "", "", { budget: defaultBudget })));
  const info = await infoP;
  const epoch = route.epoch || info.epoch;
  page = {
    info, epoch, current: epoch === info.epoch, msgs: new Map(), results: new Map(), calls: new Map(),
    slots: new Map(), rows: new Map(), firstLoaded: 0, lastLoaded: 0, view: null,
  };
  const history = el("div", { id: "history", "data-session": info.name });
  const older = el("button", { id: "older", onclick: () => loadOlder() }, "load older messages");
  const epochs = el("div", { className: "epochs toolbar" }, "epochs: ", info.epochs.map((e) => el("button", {
    className: e.epoch === epoch ? "cur" : "", title: e.purged ? "purged" : fmtInt(e.messages) + " messages",
    onclick: () => { location.hash = sessionHref(info.name, "epoch=" + e.epoch); },
  }, String(e.epoch) + (e.purged ? " (purged)" : ""))));
  const panel = el("aside", { className: "panel", id: "viewpanel" });
  const head = el("div", { className: "toolbar" }, el("a", { href: "#/" }, "← sessions"), el("strong", {}, info.name),
    el("span", { className: "muted", id: "sessionfacts" }), el("span", { className: "muted" }, info.title));
  page.facts = head.querySelector("#sessionfacts");
  page.historyEl = history;
  page.olderEl = older;
  fill(main, head, el("div", { className: "split" }, el("section", {}, epochs, older, history), panel));
  updateFacts();
  const viewDone = buildViewPanel(panel, start, viewP);
  await loadPage(firstOpts, firstP);
  painted("history", start);
  if (route.seq) {
    const row = page.rows.get(route.seq);
    if (row) { row.classList.add("hl"); row.scrollIntoView({ block: "center" }); }
  } else {
    window.scrollTo(0, document.body.scrollHeight);
  }
  const sync = coalesce(syncSession, 100);
  listen(info.name, (c) => { if (page && c.session === page.info.name) sync(); });
  new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && !older.hidden && !page.loading) loadOlder();
  }).observe(older);
  await viewDone;
}

function updateFacts() {
  const i = page.info;
  page.facts.textContent = fmtInt(i.messages) + " messages, " + fmtInt(i.tokens) + " tokens, epoch " + i.epoch + ", changed " + ago(i.updated);
}

async function loadPage(opts, prefetched) {
  const p = page;
  const data = await (prefetched || api(messagesURL(p.info.name, p.epoch, opts)));
  if (p !== page) return;
  const msgs = data.messages;
  for (const m of msgs) index(m);
  const frag = document.createDocumentFragment();
  for (const m of msgs) frag.append(renderMessage(m));
  if (opts.after) {
    p.historyEl.append(frag);
  } else {
    p.historyEl.prepend(frag);
  }
  if (msgs.length) {
    for (const x of p.historyEl.querySelectorAll(".empty")) x.remove();
    if (!p.firstLoaded || msgs[0].seq < p.firstLoaded) p.firstLoaded = msgs[0].seq;
    p.lastLoaded = Math.max(p.lastLoaded, msgs[msgs.length - 1].seq);
  } else if (!opts.after && !p.firstLoaded) {
    p.historyEl.append(el("p", { className: "muted empty" }, data.purged ? "This epoch was purged." : "No messages in this epoch."));
  }
  p.olderEl.hidden = !p.firstLoaded || p.firstLoaded <= data.first_seq;
  p.olderEl.textContent = "load older messages (" + fmtInt(p.firstLoaded - data.first_seq) + " before #" + p.firstLoaded + ")";
}

async function loadOlder() {
  const p = page;
  if (p.loading) return;
  p.loading = true;
  const h = document.documentElement.scrollHeight, y = window.scrollY;
  try {
    await loadPage({ before: p.firstLoaded, limit: 200 });
  } finally {
    p.loading = false;
  }
  window.scrollTo(0, y + document.documentElement.scrollHeight - h);
}

function index(m) {
  page.msgs.set(m.seq, m);
  for (const c of m.calls || []) page.calls.set(c.id, { seq: m.seq, name: c.name });
  for (const id of m.result_ids || []) {
    page.results.set(id, m);
    const slot = page.slots.get(id);
    if (slot) fill(slot, resultBody(id, m));
  }
}

// ---- rendering a message ----

function renderMessage(m) {
  const role = m.role || "?";
  const badge = el("span", { className: "badge form", hidden: true });
  const raw = el("details", { className: "raw" }, el("summary", {}, "raw JSON"));
  raw.addEventListener("toggle", () => {
    if (raw.open && raw.children.length === 1) raw.append(el("pre", {}, m.raw !== undefined ? JSON.stringify(m.raw, null, 2) : m.raw_text));
  });
  const row = el("article", { className: "msg " + role, id: "m" + m.seq, "data-seq": m.seq },
    el("div", { className: "head" }, el("span", {}, "#" + m.seq), el("span", { className: "role" }, role), badge,
      el("span", {}, fmtInt(m.tokens) + " tok"), el("span", { title: m.counter || "" }, fmtTime(m.time))),
    renderBody(m), raw);
  page.rows.set(m.seq, row);
  if (page.view) setBadge(row, m.seq);
  return row;
}

function renderBody(m) {
  const out = el("div", { className: "body" });
  if (m.raw === undefined) {
    out.append(el("p", { className: "error" }, "this record is not valid JSON (damaged?): see its raw bytes"));
    return out;
  }
  const raw = m.raw || {};
  const c = raw.content;
  if (m.result_ids && m.result_ids.length && !Array.isArray(c)) {
    out.append(resultOwnRow(m.result_ids[0], m, el("div", { className: "text" }, typeof c === "string" ? c : m.text)));
  } else if (typeof c === "string") {
    if (c !== "") out.append(el("div", { className: "text" }, c));
  } else if (Array.isArray(c)) {
    put(out, c.map((b) => renderBlock(b, m)));
  } else if (c !== undefined && c !== null) {
    out.append(el("pre", {}, JSON.stringify(c, null, 2)));
  }
  for (const call of m.calls || []) out.append(renderCall(call));
  return out;
}

function renderBlock(b, m) {
  if (!b || typeof b !== "object") return el("pre", {}, JSON.stringify(b));
  switch (b.type) {
    case "text": case "input_text": case "output_text":
      return el("div", { className: "text" }, b.text || "");
    case "image": case "image_url": case "input_image":
      return renderImage(b);
    case "tool_use": case "tool_call":
      return null; // shown with the message's calls
    case "tool_result": {
      const id = b.tool_use_id || b.tool_call_id || "";
      return resultOwnRow(id, m, blockContent(b.content));
    }
    case "thinking": case "redacted_thinking": case "reasoning":
      return el("details", {}, el("summary", { className: "muted" }, b.type), el("div", { className: "text" }, b.thinking || b.text || JSON.stringify(b)));
  }
  return el("details", {}, el("summary", { className: "muted" }, "block: " + b.type), el("pre", {}, JSON.stringify(b, null, 2)));
}

function blockContent(c) {
  if (typeof c === "string") return el("div", { className: "text" }, c);
  if (Array.isArray(c)) return el("div", {}, c.map((x) => renderBlock(x, {})));
  return c === undefined ? null : el("pre", {}, JSON.stringify(c, null, 2));
}

// renderImage shows an image a message carries as data; one that lives
// at a URL is named, not fetched (the page never calls other servers).
function renderImage(b) {
  let url = "";
  if (b.source && b.source.type === "base64") url = "data:" + (b.source.media_type || "image/png") + ";base64," + b.source.data;
  else if (b.source && b.source.url) url = b.source.url;
  else if (typeof b.image_url === "string") url = b.image_url;
  else if (b.image_url && b.image_url.url) url = b.image_url.url;
  if (/^data:image\/(png|jpeg|gif|webp);base64,/i.test(url)) return el("img", { className: "msgimg", src: url, alt: "image" });
  return el("div", { className: "muted" }, "[image: " + short(url, 120) + "]");
}

function renderCall(call) {
  const slot = el("div", { className: "slot" });
  page.slots.set(call.id, slot);
  const res = page.results.get(call.id);
  slot.append(res ? resultBody(call.id, res) : el("div", { className: "muted" }, "no result loaded yet"));
  let args = call.arguments;
  try { args = JSON.stringify(JSON.parse(args), null, 2); } catch { /* shown as stored */ }
  return el("details", { className: "call", "data-call": call.id },
    el("summary", {}, "⚙ " + call.name + "(" + short(call.arguments, 80) + ")"),
    el("pre", {}, args), el("div", { className: "muted" }, "call " + call.id + " → result:"), slot);
}

function resultBody(id, res) {
  return el("div", {}, el("a", { href: "#m" + res.seq, onclick: (e) => { e.preventDefault(); jump(res.seq); } }, "#" + res.seq),
    el("div", { className: "text" }, short(resultText(id, res), 2000)));
}

// resultText is the text of the result to call id that message m holds:
// its tool_result block's content (Anthropic, Amplifier), else its text.
function resultText(id, m) {
  const c = m.raw && m.raw.content;
  if (Array.isArray(c)) {
    const b = c.find((x) => x && (x.tool_use_id === id || x.tool_call_id === id));
    if (b) {
      const v = b.content !== undefined ? b.content : b.output;
      if (typeof v === "string") return v;
      if (Array.isArray(v)) return v.filter((x) => x && x.type === "text").map((x) => x.text).join("\n") || JSON.stringify(v);
      return JSON.stringify(v);
    }
  }
  return m.text || (c === undefined ? "" : JSON.stringify(c));
}

function resultOwnRow(id, m, body) {
  const call = page.calls.get(id);
  const what = call ? call.name + " (call in #" + call.seq + ")" : "call " + id;
  return el("details", { className: "result", "data-result": id }, el("summary", {}, "↳ result of " + what + ": " + short(resultText(id, m), 80)), body);
}

function jump(seq) {
  const row = page.rows.get(seq);
  if (row) { row.scrollIntoView({ block: "center" }); row.classList.add("hl"); setTimeout(() => row.classList.remove("hl"), 1500); }
}

// syncSession brings the open session up to date after a change: new
// messages appended at the bottom (all of them, page by page), a new
// epoch shown after a Clear, the view computed again.
async function syncSession() {
  const p = page;
  const info = await api("/api/session?s=" + encodeURIComponent(p.info.name)).catch(() => null);
  if (p !== page) return;
  if (!info) { document.getElementById("main").prepend(el("p", { className: "error" }, "This session was purged.")); return; }
  const wasCurrent = page.current;
  page.info = info;
  updateFacts();
  if (wasCurrent && info.epoch !== page.epoch) { render(); return; } // cleared: show the new epoch
  const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  while (p === page && p.current && info.last_seq > p.lastLoaded) {
    const before = p.lastLoaded;
    await loadPage({ after: p.lastLoaded || info.epoch_start_seq - 1, limit: 500 });
    if (p.lastLoaded === before) break; // nothing more readable yet
  }
  if (atBottom) window.scrollTo(0, document.body.scrollHeight);
  if (p === page && p.refreshView) p.refreshView();
}

// ---- the view panel ----

function viewURL(name, strategy, preset, opts) {
  let q = "/api/view?s=" + encodeURIComponent(name) + "&strategy=" + strategy;
  if (preset) return q + "&window=" + preset.context_window + "&out=" + preset.max_output;
  return q + "&budget=" + Math.max(1, Math.floor(Number(opts.budget) || 1));
}

async function buildViewPanel(panel, start, first) {
  const p0 = page;
  const config = await state.configP;
  if (p0 !== page) return;
  const presets = config.presets;
  const preset = el("select", { id: "preset", "aria-label": "model" }, el("option", { value: "" }, "budget (tokens)"),
    presets.map((p, i) => el("option", { value: String(i) }, p.name)));
  const budget = el("input", { id: "budget", type: "number", min: 1, step: 1, value: defaultBudget, "aria-label": "budget" });
  const range = el("input", { id: "budget-range", type: "range", min: 1, step: 1, "aria-label": "budget slider" });
  const strategy = el("select", { id: "strategy", "aria-label": "strategy" }, el("option", { value: "" }, "progressive"), el("option", { value: "truncate" }, "truncate"));
  const out = el("div", { id: "view" }, el("p", { className: "muted" }, "computing the view…"));
  const maxRange = () => Math.max(16000, Math.ceil(page.info.tokens * 1.1));
  range.max = maxRange();
  range.value = defaultBudget;
  fill(panel, el("h3", {}, "What the model is sent"),
    el("div", { className: "controls" }, el("label", {}, "model"), preset, el("label", {}, "budget"), budget, el("span"), range, el("label", {}, "strategy"), strategy),
    page.current ? out : el("p", { className: "muted" }, "Views are of the current epoch (" + page.info.epoch + ")."));
  if (!page.current) return;
  let seq = 0;
  const refresh = async () => {
    const my = ++seq;
    const q = viewURL(page.info.name, strategy.value, preset.value !== "" ? presets[Number(preset.value)] : null, { budget: budget.value });
    try {
      const v = await (first || api(q));
      first = null;
      if (my !== seq || !page) return;
      page.view = v;
      drawView(out, v);
      for (const [s, row] of page.rows) setBadge(row, s);
      painted("view", start);
      requestAnimationFrame(() => setTimeout(() => { state.marks.view_painted = performance.now(); state.marks.view_painted_budget = v.budget; }, 0));
    } catch (e) {
      if (my === seq) fill(out, el("p", { className: "error" }, String(e.message || e)));
    }
  };
  const later = debounce(refresh, 40);
  budget.addEventListener("input", () => { preset.value = ""; range.value = budget.value; later(); });
  range.addEventListener("input", () => { preset.value = ""; budget.value = range.value; later(); });
  preset.addEventListener("change", refresh);
  strategy.addEventListener("change", refresh);
  page.refreshView = coalesce(() => { range.max = maxRange(); return refresh(); }, 200);
  await refresh();
}

const forms = ["whole", "truncated", "stubbed", "summary", "notice", "memory", "repair"];

function drawView(out, v) {
  const byForm = {};
  for (const m of v.messages || []) byForm[m.form] = (byForm[m.form] || 0) + m.tokens;
  const denom = Math.max(v.budget, v.view.tokens, 1);
  const bar = el("div", { className: "bar" + (v.over_budget ? " over" : ""), id: "tokenbar", title: fmtInt(v.view.tokens) + " of " + fmtInt(v.budget) + " tokens" },
    forms.filter((f) => byForm[f]).map((f) => el("span", { className: f, title: f + ": " + fmtInt(byForm[f]) + " tokens", style: "width:" + (100 * byForm[f] / denom) + "%" })));
  if (v.stable_prefix > 0) {
    let t = 0;
    for (const m of v.messages.slice(0, v.stable_prefix)) t += m.tokens;
    bar.append(el("span", { className: "prefix", title: "stable prefix: " + v.stable_prefix + " messages", style: "left:" + (100 * t / denom) + "%" }));
  }
  const fits = v.over_budget ? "OVER BUDGET: the floor alone does not fit" : v.level === 0 ? "fits: nothing compacted" : "compaction level " + v.level;
  const facts = el("dl", { className: "facts", id: "viewfacts" },
    fact("budget", fmtInt(v.budget) + " tokens (" + v.budget_source + (v.capped ? ", capped" : "") + ")"),
    fact("view", fmtInt(v.view.messages) + " messages, " + fmtInt(v.view.tokens) + " tokens (" + Math.round(100 * v.view.tokens / Math.max(1, v.budget)) + "%)"),
    fact("history", fmtInt(v.history.messages) + " messages, " + fmtInt(v.history.tokens) + " tokens"),
    fact("result", fits),
    fact("removed", fmtInt(v.removed)), fact("truncated", fmtInt(v.truncated)), fact("stubbed", fmtInt(v.stubbed)), fact("summarized", fmtInt(v.summarized)),
    fact("stable prefix", v.stable_prefix + " messages" + (v.stable_prefix ? " (kept from the previous view at this budget)" : "")),
    v.escalated ? fact("escalated", "this request compacted further") : null,
    v.reused_decisions ? fact("decisions", "saved decisions reused") : null,
    v.tripped ? fact("breaker", "the runaway breaker stopped escalation") : null,
    fact("counter", v.counter), fact("computed in", v.millis.toFixed(1) + " ms"));
  const notice = (v.messages || []).find((m) => m.form === "notice");
  const noticeText = notice ? messageText(notice.message) : "";
  const notSent = (v.not_sent_verbatim || []).map(([a, b]) => a === b ? "#" + a : "#" + a + "–#" + b);
  const rows = el("div", { id: "viewrows" });
  const drawRows = (n) => fill(rows, ...(v.messages || []).slice(0, n).map((m) => el("div", { className: "vrow", "data-form": m.form, onclick: () => m.seq && jump(m.seq) },
    el("span", { className: "seq" }, m.seq ? "#" + m.seq : "–"), el("span", { className: "badge " + m.form }, m.form),
    el("span", {}, m.message.role), el("span", { className: "muted" }, fmtInt(m.tokens)), el("span", { className: "line" }, short(lineOf(m.message), 120)))),
  (v.messages || []).length > n ? el("button", { className: "link", onclick: () => drawRows(n + 500) }, "show " + Math.min(500, v.messages.length - n) + " more") : "");
  drawRows(50);
  fill(out, bar, legend(byForm), facts,
    (v.warnings || []).map((w) => el("p", { className: "error" }, "warning: " + w)),
    notice ? el("div", {}, el("h4", {}, "The notice the model reads"), el("div", { className: "text notice-text", id: "notice" }, noticeText)) : null,
    notSent.length ? el("p", { id: "notsent" }, "Not sent as stored: ", notSent.slice(0, 40).join(", "), notSent.length > 40 ? ", …" : "") : null,
    el("h4", {}, "The view, in order"), rows,
    el("details", {}, el("summary", {}, "as 'ctxstore view' prints it"), el("pre", { id: "report" }, v.report)));
}

function fact(k, v) { return [el("dt", {}, k), el("dd", { "data-fact": k }, v)]; }
function legend(byForm) {
  return el("div", { className: "muted" }, forms.filter((f) => byForm[f]).map((f) => el("span", {}, el("span", { className: "badge " + f }, f), " " + fmtInt(byForm[f]) + "  ")));
}
function messageText(raw) {
  if (!raw) return "";
  if (typeof raw.content === "string") return raw.content;
  if (Array.isArray(raw.content)) return raw.content.filter((b) => b && b.type === "text").map((b) => b.text).join("\n");
  return "";
}
function lineOf(raw) {
  const t = messageText(raw);
  if (t) return t;
  const calls = raw.tool_calls || (Array.isArray(raw.content) ? raw.content.filter((b) => b && (b.type === "tool_use" || b.type === "tool_call")) : []);
  return calls.map((c) => (c.function ? c.function.name : c.name) + "()").join(" ");
}

// setBadge marks a history message with what the view did to it, read
// from the view's origins: its form there, "summarized" inside a
// summary's span, "removed" when the view leaves it out.
function setBadge(row, seq) {
  const v = page.view, b = row.querySelector(".badge.form");
  if (!v || !b || !page.current) return;
  if (!page.originOf || page.originView !== v) {
    page.originView = v;
    page.originOf = new Map();
    page.summaries = [];
    for (const m of v.messages || []) {
      if (!m.seq) continue;
      if (m.form === "summary") page.summaries.push([m.from_seq || m.seq, m.seq]);
      else page.originOf.set(m.seq, m.form);
    }
  }
  let form = page.originOf.get(seq);
  if (!form && page.summaries.some(([a, z]) => seq >= a && seq <= z)) form = "summarized";
  if (!form && seq >= v.first_seq && seq <= v.last_seq) form = "removed";
  b.hidden = !form;
  b.className = "badge form " + (form || "");
  b.textContent = form || "";
}

// ---- start ----

async function start() {
  state.configP = quiet(api("/api/config"));
  window.addEventListener("hashchange", () => { if (!location.hash.startsWith("#m")) render(); });
  render(); // while the configuration comes
  try {
    state.config = await state.configP;
  } catch (e) {
    fill(document.getElementById("main"), el("p", { className: "error" }, String(e.message || e)));
    return;
  }
  document.getElementById("location").textContent = state.config.location + " · read-only";
  const search = document.getElementById("search");
  if (state.config.search) {
    search.hidden = false;
    search.addEventListener("submit", (e) => { e.preventDefault(); location.hash = "#/search?q=" + encodeURIComponent(document.getElementById("search-q").value); });
  }
}
start();
