// flotilla's web UI: rollouts, one rollout as waves x clusters with its
// timeline, and the fleet. It reads /api/v1 and stays live on the Server-Sent
// Events of /api/v1/watch; it loads nothing from anywhere else.
"use strict";

const state = {
  rollouts: new Map(), // id -> rollout, from the list and the stream
  timeline: [], // the events of the rollout shown
  timelineOf: "",
  truncated: false,
  clusters: [],
  fleet: {},
  live: false,
};

// ---- small helpers -------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

function short(digest) {
  const i = (digest || "").indexOf(":");
  return i < 0 ? digest || "" : digest.slice(0, i + 13);
}

function ago(t) {
  if (!t || t.startsWith("0001")) return "-";
  let s = Math.max(0, Math.round((Date.now() - Date.parse(t)) / 1000));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60) + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d";
}

function clock(t) {
  if (!t || t.startsWith("0001")) return "-";
  return new Date(t).toLocaleTimeString();
}

const tone = {
  Succeeded: "ok", Reverted: "ok", RolledBack: "warn", Initialized: "ok",
  Failed: "bad", RevertFailed: "bad", RollbackFailed: "bad", Aborted: "bad", Superseded: "idle",
  Progressing: "run", Applying: "run", Promoting: "run", Finalising: "run", Reverting: "warn",
  RollingBack: "warn", WaitingPromotion: "warn", Waiting: "warn", Pending: "idle", Queued: "idle",
};

function badge(phase) {
  return h("span", { class: "badge " + (tone[phase] || "idle") }, phase || "-");
}

function done(r) {
  return ["Succeeded", "RolledBack", "Superseded"].includes(r.phase);
}

function token() {
  return sessionStorage.getItem("flotilla-token") || "";
}

function notice(text) {
  const n = document.getElementById("notice");
  n.textContent = text;
  n.hidden = false;
  clearTimeout(notice.timer);
  notice.timer = setTimeout(() => (n.hidden = true), 6000);
}

async function getJSON(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" } });
  if (!resp.ok) {
    let msg = resp.status + " " + resp.statusText;
    try { msg = (await resp.json()).error || msg; } catch (_) { /* not JSON */ }
    throw new Error(msg);
  }
  return resp.json();
}

async function control(path, body) {
  const resp = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + token() },
    body: JSON.stringify(Object.assign({ by: "web UI" }, body || {})),
  });
  let answer = {};
  try { answer = await resp.json(); } catch (_) { /* empty */ }
  if (!resp.ok) throw new Error(answer.error || resp.status + " " + resp.statusText);
  return answer;
}

// ---- routing -------------------------------------------------------------

function route() {
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const parts = (path || "/").split("/").filter(Boolean);
  const params = new URLSearchParams(query || "");
  if (parts[0] === "rollouts" && parts[1]) return { page: "rollout", id: decodeURIComponent(parts[1]), params };
  if (parts[0] === "fleet") return { page: "fleet", params };
  return { page: "rollouts", params };
}

let renderQueued = false;
function render() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    draw();
  });
}

function draw() {
  const r = route();
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === (r.page === "rollout" ? "rollouts" : r.page)) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const main = document.getElementById("main");
  const view = r.page === "rollout" ? rolloutPage(r.id) : r.page === "fleet" ? fleetPage() : rolloutsPage(r.params);
  // Keep the focused control (a filter, a button) across redraws.
  const focused = document.activeElement && document.activeElement.id;
  main.replaceChildren(view);
  if (focused) {
    const el = document.getElementById(focused);
    if (el && main.contains(el)) el.focus();
  }
}

// ---- the rollouts --------------------------------------------------------

function sorted() {
  return [...state.rollouts.values()].sort((a, b) => {
    if (done(a) !== done(b)) return done(a) ? 1 : -1;
    return (b.created || "").localeCompare(a.created || "");
  });
}

function counts(r) {
  let finished = 0, total = 0;
  for (const w of r.waves || []) {
    for (const c of w.clusters || []) {
      total++;
      if (c.phase === "Succeeded" || c.phase === "Reverted") finished++;
    }
  }
  return finished + "/" + total;
}

function waiting(r) {
  if (done(r)) return "";
  if (r.paused) return "paused by " + r.paused;
  if (r.waiting) return r.waiting;
  const w = (r.waves || [])[r.wave];
  if (w && w.bakingUntil && !w.baked) return "wave " + (r.wave + 1) + " (" + w.name + ") bakes until " + clock(w.bakingUntil);
  return "";
}

function setParam(key, value) {
  const r = route();
  if (value) r.params.set(key, value);
  else r.params.delete(key);
  const q = r.params.toString();
  location.hash = "#/" + (q ? "?" + q : "");
}

function rolloutsPage(params) {
  const app = params.get("application") || "";
  const phase = params.get("phase") || "";
  const all = sorted();
  const apps = [...new Set(all.map((r) => r.application))].sort();
  const phases = [...new Set(all.map((r) => r.phase))].sort();
  const shown = all.filter((r) => (!app || r.application === app) && (!phase || r.phase === phase));
  const select = (id, label, value, options, key) =>
    h("label", {}, label + " ",
      h("select", { id, onchange: (e) => setParam(key, e.target.value) },
        h("option", { value: "" }, "all"),
        options.map((o) => h("option", { value: o, selected: o === value }, o))));
  return h("section", { "aria-labelledby": "title" },
    h("h1", { id: "title" }, "Rollouts"),
    h("div", { class: "filters" },
      select("filter-application", "Application", app, apps, "application"),
      select("filter-phase", "Phase", phase, phases, "phase"),
      h("span", { class: "muted" }, shown.length + " of " + all.length)),
    h("table", { id: "rollouts" },
      h("thead", {}, h("tr", {}, ["Rollout", "Application", "Version", "Digest", "Phase", "Wave", "Clusters done", "Age", "Waiting / reason"]
        .map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, shown.length === 0
        ? h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No rollouts yet: push an image a configured application tracks."))
        : shown.map((r) => h("tr", { dataset: { rollout: r.id, phase: r.phase } },
          h("td", {}, h("a", { href: "#/rollouts/" + encodeURIComponent(r.id), class: "mono", id: "open-" + r.id }, r.id)),
          h("td", {}, r.application),
          h("td", {}, r.tag),
          h("td", { class: "mono" }, short(r.digest)),
          h("td", {}, badge(r.phase)),
          h("td", {}, Math.min(r.wave + 1, (r.waves || []).length) + "/" + (r.waves || []).length),
          h("td", {}, counts(r)),
          h("td", { dataset: { since: r.created } }, ago(r.created)),
          h("td", {}, waiting(r) || r.reason || "")))))
  );
}

// ---- one rollout -----------------------------------------------------------

function rolloutPage(id) {
  const r = state.rollouts.get(id);
  if (state.timelineOf !== id) loadRollout(id);
  if (!r) return h("section", {}, h("h1", {}, "Rollout " + id), h("p", { class: "muted" }, "Loading…"));
  const why = waiting(r);
  return h("section", { "aria-labelledby": "title", dataset: { rollout: r.id } },
    h("p", {}, h("a", { href: "#/", id: "back" }, "← Rollouts")),
    h("h1", { id: "title" }, r.application + " " + r.tag + " ", h("span", { id: "phase", dataset: { phase: r.phase } }, badge(r.phase))),
    r.reason ? h("p", { id: "reason", class: "reason" }, r.reason) : null,
    why ? h("p", { id: "waiting", class: "waiting" }, why) : null,
    h("dl", { class: "facts" },
      fact("Rollout", h("span", { class: "mono" }, r.id)),
      fact("Image", h("span", { class: "mono" }, r.image + ":" + r.tag)),
      fact("Digest", h("span", { class: "mono" }, r.digest)),
      r.previousTag ? fact("Previous", r.previousTag + " (" + short(r.previousDigest) + ")") : null,
      r.signedBy ? fact("Signed by", r.signedBy) : null,
      r.unsigned ? fact("Unsigned", r.unsigned) : null,
      r.rollbackOf ? fact("Rolls back", h("a", { href: "#/rollouts/" + r.rollbackOf }, r.rollbackOf)) : null,
      fact("Started", [new Date(r.created).toLocaleString() + " (", h("span", { dataset: { since: r.created } }, ago(r.created)), " ago)"]),
      fact("Updated", clock(r.updated))),
    controls(r),
    h("h2", {}, "Waves"),
    h("div", { id: "grid" }, (r.waves || []).map((w, i) => wave(r, w, i))),
    failures(r),
    timeline());
}

function fact(name, value) {
  return [h("dt", {}, name), h("dd", {}, value)];
}

function wave(r, w, i) {
  const current = i === r.wave && !done(r);
  const notes = [];
  if (w.maxParallel) notes.push(w.maxParallel + " at a time");
  if (w.maxFailures) notes.push("up to " + w.maxFailures + " may fail");
  if (w.bakeTime) notes.push(w.baked ? "baked" : w.bakingUntil ? "bakes until " + clock(w.bakingUntil) : "bakes " + w.bakeTime / 1e9 + "s");
  if (w.approvals) notes.push((w.approvers || []).length + "/" + w.approvals + " approvals" + ((w.approvers || []).length ? " (" + w.approvers.join(", ") + ")" : ""));
  if (w.freezeOverride) notes.push("freeze overridden: " + w.freezeOverride);
  if (w.signatureRequired) notes.push("signed images only");
  if (w.pullRequest) notes.push("pull request " + w.pullRequest.state + (w.pullRequest.url ? " " + w.pullRequest.url : ""));
  return h("section", { class: "wave" + (current ? " current" : ""), dataset: { wave: i + 1 }, "aria-label": "Wave " + (i + 1) + " " + w.name },
    h("h3", {}, (current ? "▶ " : "") + "Wave " + (i + 1) + ": " + w.name,
      notes.length ? h("span", { class: "muted" }, "· " + notes.join(" · ")) : null,
      !done(r) && i >= r.wave && w.approvals && (w.approvers || []).length < w.approvals && token()
        ? h("button", { type: "button", id: "approve-wave-" + (i + 1), onclick: () => act("Approve wave " + (i + 1), "/api/v1/rollouts/" + r.id + "/waves/" + (i + 1) + "/approval", {}) }, "Approve wave " + (i + 1))
        : null),
    h("ul", { class: "clusters" }, (w.clusters || []).map((c) => cluster(c))));
}

function cluster(c) {
  const weight = c.canaryWeight || 0;
  return h("li", { class: "cluster", dataset: { cluster: c.name, phase: c.phase, canary: c.canaryPhase || "" } },
    h("div", {}, h("span", { class: "name" }, c.name), badge(c.phase)),
    h("div", { class: "line" }, h("span", { class: "muted" }, "Flagger"), h("span", {}, c.canaryPhase || "-")),
    h("div", { class: "line" }, h("span", { class: "muted" }, "canary weight"), h("span", {}, weight + "%")),
    h("progress", { max: 100, value: weight, "aria-label": c.name + " canary weight " + weight + "%" }),
    c.previousImage ? h("div", { class: "line" }, h("span", { class: "muted" }, "before"), h("span", { class: "mono" }, c.previousImage.split("/").pop().replace(/@sha256:(.{8}).*/, "@$1"))) : null,
    c.deadline && c.run ? h("div", { class: "line" }, h("span", { class: "muted" }, c.run + " deadline"), h("span", {}, clock(c.deadline))) : null,
    c.message ? h("div", { class: "msg" }, c.message) : null);
}

function failures(r) {
  if (!(r.failures || []).length) return null;
  return [h("h2", {}, "Failures"),
    h("table", { id: "failures" },
      h("thead", {}, h("tr", {}, ["At", "Function", "Event", "Cluster", "Retried", "Error"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, r.failures.map((f) => h("tr", {},
        h("td", {}, clock(f.at)), h("td", {}, f.function), h("td", { class: "mono" }, shortType(f.eventType)),
        h("td", {}, f.cluster || "-"), h("td", {}, f.retried ? "yes" : "no"), h("td", {}, f.error)))))];
}

function shortType(t) {
  return (t || "").replace(/^dev\.flotilla\./, "").replace(/\.v\d+$/, "");
}

// describe says what an event's payload tells, in a few words.
function describe(e) {
  const d = e.data || {};
  const parts = [];
  for (const k of ["phase", "canaryPhase", "status", "reason", "message", "error", "outcome", "tag", "by"]) {
    if (typeof d[k] === "string" && d[k]) parts.push(d[k]);
  }
  if (typeof d.weight === "number" && d.weight) parts.push(d.weight + "%");
  if (typeof d.canaryWeight === "number" && d.canaryWeight) parts.push(d.canaryWeight + "%");
  return parts.join(" · ");
}

function timeline() {
  const items = state.timeline.slice().sort((a, b) => a.seq - b.seq);
  return [h("h2", {}, "Timeline"),
    state.truncated ? h("p", { class: "muted" }, "Only part of this rollout's events is shown (the journal's retention or the timeline's size).") : null,
    h("ol", { class: "timeline", id: "timeline", "aria-live": "off" }, items.map((e) => {
      const d = e.data || {};
      return h("li", { dataset: { type: shortType(e.type), cluster: d.cluster || "" } },
        h("span", { class: "muted" }, clock(e.time)),
        h("span", { class: "mono" }, shortType(e.type)),
        h("span", {}, d.cluster || (typeof d.wave === "number" ? "wave " + (d.wave + 1) : "")),
        h("span", {}, describe(e)));
    }))];
}

function controls(r) {
  if (!token()) {
    return h("p", { class: "muted", id: "controls-hint" }, "Enter an API token (top right) to pause, resume, abort, roll back or retry this rollout.");
  }
  const base = "/api/v1/rollouts/" + encodeURIComponent(r.id);
  const buttons = [];
  if (!done(r)) {
    if (r.paused) buttons.push(["resume", "Resume", base + "/resume"]);
    else buttons.push(["pause", "Pause", base + "/pause"]);
    buttons.push(["abort", "Abort", base + "/abort", "danger"]);
  }
  if (r.phase === "Succeeded") buttons.push(["rollback", "Roll back", base + "/rollback", "danger"]);
  const retriable = (r.failures || []).some((f) => !f.retried) ||
    (r.waves || []).some((w) => (w.clusters || []).some((c) => c.phase === "Failed" || c.phase === "RevertFailed"));
  if (retriable) buttons.push(["retry", "Retry", base + "/retry"]);
  return h("div", { class: "controls", id: "controls", role: "group", "aria-label": "Controls" },
    buttons.map(([id, label, path, cls]) => h("button", {
      type: "button", id: "control-" + id, class: cls,
      onclick: () => act(label, path, cls === "danger" ? { reason: prompt(label + " " + r.id + ": why?") || "" } : {}),
    }, label)));
}

async function act(label, path, body) {
  if (body.reason === "") return; // the prompt was cancelled or left empty
  try {
    const answer = await control(path, body);
    notice(label + ": recorded" + (answer.by ? " as " + answer.by : "") + ".");
  } catch (err) {
    notice(label + " failed: " + err.message);
  }
}

async function loadRollout(id) {
  state.timelineOf = id;
  state.timeline = [];
  state.truncated = false;
  try {
    const [r, tl] = await Promise.all([
      getJSON("/api/v1/rollouts/" + encodeURIComponent(id)),
      getJSON("/api/v1/rollouts/" + encodeURIComponent(id) + "/events"),
    ]);
    state.rollouts.set(r.id, r);
    if (state.timelineOf === id) {
      const seen = new Set(state.timeline.map((e) => e.seq));
      state.timeline = state.timeline.concat(tl.events.filter((e) => !seen.has(e.seq)));
      state.truncated = !!tl.truncated;
    }
  } catch (err) {
    notice("Rollout " + id + ": " + err.message);
  }
  render();
}

// ---- the fleet -------------------------------------------------------------

function fleetPage() {
  const apps = [...new Set(state.clusters.flatMap((c) => Object.keys(c.applications || {})))].sort();
  const f = state.fleet || {};
  return h("section", { "aria-labelledby": "title" },
    h("h1", { id: "title" }, "Fleet"),
    f.stopped
      ? h("p", { class: "reason", id: "line" }, "The line is stopped" + (f.by ? " by " + f.by : "") + (f.reason ? ": " + f.reason : "") + ". No cluster starts a rollout until it is started again.")
      : h("p", { class: "muted", id: "line" }, "The line is running."),
    h("table", { id: "clusters" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Cluster"), h("th", { scope: "col" }, "Labels"),
        apps.map((a) => h("th", { scope: "col" }, a)))),
      h("tbody", {}, state.clusters.map((c) => h("tr", { dataset: { cluster: c.name } },
        h("th", { scope: "row" }, c.name),
        h("td", {}, Object.entries(c.labels || {}).map(([k, v]) => h("span", { class: "chip" }, k + "=" + v))),
        apps.map((a) => runs(c.applications[a] && Object.assign({ cluster: c.name }, c.applications[a]))))))));
}

function runs(v) {
  if (!v) return h("td", { class: "muted" }, "-");
  return h("td", { dataset: { tag: v.tag || "" } },
    v.unknown ? h("span", { class: "badge bad" }, "unknown") : null,
    v.tag ? h("span", { class: "mono", title: v.digest }, v.tag) : null,
    v.rollout ? [" ", h("a", { href: "#/rollouts/" + v.rollout, class: "muted", id: "fleet-" + v.rollout + "-" + v.cluster }, "rollout")] : null,
    v.rollingOut ? h("div", {}, "→ ", h("a", { href: "#/rollouts/" + v.inFlight, id: "fleet-" + v.inFlight + "-" + v.cluster + "-next" }, v.rollingOut), " ", badge(v.phase)) : null,
    v.unknown ? h("div", { class: "msg" }, v.unknown) : null);
}

async function loadFleet() {
  try {
    const [clusters, fleet] = await Promise.all([getJSON("/api/v1/clusters"), getJSON("/api/v1/fleet")]);
    state.clusters = clusters;
    state.fleet = fleet;
  } catch (err) {
    notice("Fleet: " + err.message);
  }
  render();
}

// ---- loading and the live stream ------------------------------------------

async function loadRollouts() {
  try {
    const list = await getJSON("/api/v1/rollouts?limit=200");
    for (const r of list) state.rollouts.set(r.id, r);
  } catch (err) {
    notice("Rollouts: " + err.message);
  }
  render();
}

function reload() {
  const r = route();
  loadRollouts();
  if (r.page === "rollout") loadRollout(r.id);
  if (r.page === "fleet") loadFleet();
}

// streamURL is what the page shown needs of the watch stream: one
// rollout's events and states, every rollout's states, or everything (the
// fleet page also follows the line's stops and starts).
function streamURL() {
  const r = route();
  if (r.page === "rollout") return "/api/v1/watch?rollout=" + encodeURIComponent(r.id);
  if (r.page === "fleet") return "/api/v1/watch";
  return "/api/v1/watch?only=rollouts";
}

let fleetTimer = 0;
let es = null;
let esURL = "";
function connect() {
  const url = streamURL();
  if (es && esURL === url) return;
  if (es) es.close();
  esURL = url;
  const live = document.getElementById("live");
  es = new EventSource(url);
  es.addEventListener("open", () => {
    state.live = true;
    document.body.dataset.live = "true";
    live.textContent = "live";
    live.classList.add("on");
    reload(); // what changed while the stream was closed
  });
  es.addEventListener("error", () => {
    state.live = false;
    document.body.dataset.live = "false";
    live.textContent = "reconnecting…";
    live.classList.remove("on");
  });
  es.addEventListener("rollout", (m) => {
    const r = JSON.parse(m.data);
    state.rollouts.set(r.id, r);
    if (route().page === "fleet") {
      clearTimeout(fleetTimer);
      fleetTimer = setTimeout(loadFleet, 300);
    }
    render();
  });
  es.addEventListener("event", (m) => {
    const e = JSON.parse(m.data);
    if (e.rollout && e.rollout === state.timelineOf && !state.timeline.some((x) => x.seq === e.seq)) {
      state.timeline.push(e);
      render();
    }
    if (!e.rollout && route().page === "fleet") {
      clearTimeout(fleetTimer);
      fleetTimer = setTimeout(loadFleet, 300);
    }
  });
}

function tokenDialog() {
  const dialog = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  document.getElementById("token-button").addEventListener("click", () => {
    input.value = token();
    dialog.showModal();
  });
  dialog.addEventListener("close", () => {
    if (dialog.returnValue === "save") sessionStorage.setItem("flotilla-token", input.value.trim());
    if (dialog.returnValue === "forget") sessionStorage.removeItem("flotilla-token");
    input.value = "";
    render();
  });
}

window.addEventListener("hashchange", () => {
  const r = route();
  if (r.page === "fleet") loadFleet();
  connect(); // the stream this page needs; its open reloads the page's data
  render();
  document.getElementById("main").focus({ preventScroll: true });
});
// Ages tick in place: a redraw would move the keyboard's focus.
setInterval(() => {
  for (const el of document.querySelectorAll("[data-since]")) el.textContent = ago(el.dataset.since);
}, 5000);
tokenDialog();
connect();
reload();
