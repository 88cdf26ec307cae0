// flotilla's web UI: rollouts, one rollout as waves x clusters with its
// timeline, an application's history and status, and the fleet as a map of
// clusters x applications. It reads /api/v1 and stays live on the Server-Sent
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
  app: null, // the application shown: {name, rollouts (newest first), next, status, statusError}
  me: null, // who is logged in: GET /api/v1/whoami, {name, via: token|session|anonymous, permissions: {project: [permission]}, applications: {application: project}}
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
  Succeeded: "ok", Reverted: "warn", RolledBack: "warn", Initialized: "ok",
  Failed: "bad", RevertFailed: "bad", RollbackFailed: "bad", Aborted: "bad", Superseded: "idle",
  Progressing: "run", Applying: "run", Promoting: "run", Finalising: "run", Reverting: "warn",
  RollingBack: "warn", WaitingPromotion: "warn", Waiting: "warn", Pending: "idle", Queued: "idle", Removed: "idle",
};

function badge(phase) {
  return h("span", { class: "badge " + (tone[phase] || "idle") }, phase || "-");
}

function done(r) {
  return ["Succeeded", "RolledBack", "Superseded"].includes(r.phase);
}

// appLink links to an application's page.
function appLink(name, attrs) {
  return h("a", Object.assign({ href: "#/applications/" + encodeURIComponent(name) }, attrs || {}), name);
}

// compareVersions orders version strings newest first: numbers by value
// (1.10 after 1.9), the rest as text.
function compareVersions(a, b) {
  const pa = String(a).replace(/^v/, "").split(/[.+-]/), pb = String(b).replace(/^v/, "").split(/[.+-]/);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i], y = pb[i];
    if (x === undefined) return 1;
    if (y === undefined) return -1;
    const nx = /^\d+$/.test(x), ny = /^\d+$/.test(y);
    const c = nx && ny ? Number(y) - Number(x) : String(y).localeCompare(String(x));
    if (c) return c;
  }
  return 0;
}

// palette gives each version of a set a colour, newest first: the
// newest is the strongest; a version keeps its colour within a page.
const swatches = 8;
function palette(versions) {
  const out = new Map();
  [...new Set(versions.filter((v) => v && v !== "?"))].sort(compareVersions).forEach((v, i) => out.set(v, "v" + Math.min(i, swatches - 1)));
  return out;
}

function legend(colours, id) {
  return h("ul", { class: "legend", id, "aria-label": "Versions, newest first" },
    [...colours].map(([v, c]) => h("li", { dataset: { version: v } }, h("span", { class: "swatch " + c, "aria-hidden": "true" }), v)));
}

async function getPage(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" } });
  if (resp.status === 401) toLogin();
  if (!resp.ok) {
    let msg = resp.status + " " + resp.statusText;
    try { msg = (await resp.json()).error || msg; } catch (_) { /* not JSON */ }
    throw new Error(msg);
  }
  const m = /<([^>]+)>;\s*rel="next"/.exec(resp.headers.get("Link") || "");
  return { body: await resp.json(), next: m ? m[1] : "" };
}

// loginURL is the login page, coming back to the page shown.
function loginURL() {
  return "/ui/login?next=" + encodeURIComponent(location.pathname + location.search + location.hash);
}

// toLogin leaves for the login page: the session ended (401), or there is
// none where reads are closed.
function toLogin() {
  if (toLogin.gone) return;
  toLogin.gone = true;
  location.assign(loginURL());
}

// loggedIn says whether the controls may be offered: a session (or a
// token), not an anonymous reader.
function loggedIn() {
  return !!state.me && state.me.via !== "anonymous";
}

// can says whether the principal's roles let it do perm (pause, approve,
// ...) to application app: the permissions whoami lists for the app's
// project. The API refuses what they do not (403) anyway; the UI only
// leaves out the buttons that would be refused.
function can(perm, app) {
  if (!loggedIn()) return false;
  const project = (state.me.applications || {})[app] || "default";
  return ((state.me.permissions || {})[project] || []).includes(perm);
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
  if (resp.status === 401) toLogin();
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
    // The session's cookie goes along; the header shows it is this page
    // asking, not a form of another site (CSRF).
    headers: { "Content-Type": "application/json", "X-Flotilla-CSRF": "1" },
    body: JSON.stringify(body || {}),
  });
  if (resp.status === 401) toLogin();
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
  if (parts[0] === "applications" && parts[1]) return { page: "application", app: decodeURIComponent(parts[1]), params };
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
    if (a.dataset.nav === (r.page === "rollout" || r.page === "application" ? "rollouts" : r.page)) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const main = document.getElementById("main");
  const view = r.page === "rollout" ? rolloutPage(r.id) : r.page === "fleet" ? fleetPage()
    : r.page === "application" ? applicationPage(r.app) : rolloutsPage(r.params);
  // Keep the focused control (a filter, a button) across redraws.
  const focused = document.activeElement && document.activeElement.id;
  main.replaceChildren(view);
  if (focused) {
    const el = document.getElementById(focused);
    if (el && main.contains(el)) {
      el.focus();
      if (el.type === "search") el.setSelectionRange(el.value.length, el.value.length); // keep typing at the end
    }
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
          h("td", {}, appLink(r.application)),
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
  const set = r.versions && r.versions.length; // a release set of image members: each entry its own signer
  return h("section", { "aria-labelledby": "title", dataset: { rollout: r.id } },
    h("p", {}, h("a", { href: "#/", id: "back" }, "← Rollouts")),
    h("h1", { id: "title" }, appLink(r.application, { id: "application-link" }), " " + r.tag + " ", h("span", { id: "phase", dataset: { phase: r.phase } }, badge(r.phase))),
    r.reason ? h("p", { id: "reason", class: "reason" }, r.reason) : null,
    why ? h("p", { id: "waiting", class: "waiting" }, why) : null,
    h("dl", { class: "facts" },
      fact("Rollout", h("span", { class: "mono" }, r.id)),
      fact("Image", h("span", { class: "mono" }, r.image + ":" + r.tag)),
      fact("Digest", h("span", { class: "mono" }, r.digest)),
      r.previousTag ? fact("Previous", r.previousTag + " (" + short(r.previousDigest) + ")") : null,
      r.source && !r.kind ? fact("Pushed by", h("span", { id: "pushed-by" }, r.pushedBy || "unknown (the sender named no one: separation of duties refuses no approver)")) : null,
      !set && r.signedBy ? fact("Signed by", r.signedBy) : null,
      !set && r.unsigned ? fact("Unsigned", r.unsigned) : null,
      r.members && r.members.length ? fact("Members", h("span", { id: "members" }, r.members.join(" → "))) : null,
      set ? fact("Versions", h("span", { id: "versions", class: "mono" }, memberVersions(r.versions))) : null,
      set && r.versions.some((v) => v.signedBy || v.unsigned) ? fact("Signatures", memberSignatures(r.versions)) : null,
      r.stopsBefore ? fact("Stops before", h("span", { id: "stops-before" }, r.stopsBefore + " (the first wave requiring a signature)")) : null,
      r.previousVersions && r.previousVersions.length ? fact("Previous versions", h("span", { id: "previous-versions", class: "mono" }, memberVersions(r.previousVersions))) : null,
      r.rollbackOf ? fact("Rolls back", h("a", { href: "#/rollouts/" + r.rollbackOf }, r.rollbackOf)) : null,
      fact("Started", [new Date(r.created).toLocaleString() + " (", h("span", { dataset: { since: r.created } }, ago(r.created)), " ago)"]),
      fact("Updated", clock(r.updated))),
    controls(r),
    h("h2", {}, "Waves"),
    h("div", { id: "grid" }, (r.waves || []).map((w, i) => wave(r, w, i))),
    failures(r),
    timeline());
}

// memberVersions prints a release set's version of image members: each
// member's tag and digest, as `flotilla describe rollout` does.
function memberVersions(vs) {
  return vs.map((v) => v.application + " " + v.tag + " (" + short(v.digest) + ")").join(", ");
}

// memberSignatures lists what each member's verify found of its entry,
// as `flotilla describe rollout` does: its signer, or why it is unsigned.
function memberSignatures(vs) {
  return h("ul", { id: "signatures", class: "signatures" }, vs.map((v) =>
    h("li", { dataset: { member: v.application, signed: v.unsigned ? "false" : v.signedBy ? "true" : "" } },
      v.application + " " + v.tag + ": " + (v.unsigned ? "unsigned: " + v.unsigned : v.signedBy ? "signed by " + v.signedBy : "no signer recorded"))));
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
      !done(r) && i >= r.wave && w.approvals && (w.approvers || []).length < w.approvals && can("approve", r.application)
        ? h("button", { type: "button", id: "approve-wave-" + (i + 1), onclick: () => act("Approve wave " + (i + 1), "/api/v1/rollouts/" + r.id + "/waves/" + (i + 1) + "/approval", {}) }, "Approve wave " + (i + 1))
        : null),
    h("ul", { class: "clusters" }, (w.clusters || []).map((c) => cluster(c, culprits(r)))));
}

// culprits names the clusters whose own result failed r.
function culprits(r) {
  return (r.waves || []).flatMap((w) => (w.clusters || []).filter((c) => c.failure).map((c) => c.name));
}

// outcome tells a cluster a failure touched: "failed" (its own result
// failed the wave; it may since be reverted) or "reverted" (put back
// because another cluster failed); "" otherwise.
function outcome(c) {
  if (c.failure || c.phase === "Failed") return "failed";
  if (c.phase === "Reverted" || c.phase === "Reverting") return "reverted";
  return "";
}

function cluster(c, failed) {
  const weight = c.canaryWeight || 0;
  const o = outcome(c);
  const others = (failed || []).filter((n) => n !== c.name);
  return h("li", { class: "cluster" + (o ? " " + o : ""), dataset: { cluster: c.name, phase: c.phase, canary: c.canaryPhase || "", outcome: o } },
    h("div", {}, h("span", { class: "name" }, c.name),
      o === "failed" && c.phase !== "Failed" ? [h("span", { class: "badge bad", dataset: { failed: "true" } }, "✕ Failed"), " "] : null,
      badge(c.phase)),
    o === "failed" && c.failure ? h("div", { class: "why bad-text" }, "failed the wave: " + c.failure) : null,
    o === "reverted" && !c.failure && others.length ? h("div", { class: "why" }, "↺ put back because " + others.join(", ") + " failed") : null,
    h("div", { class: "line" }, h("span", { class: "muted" }, "Flagger"), h("span", {}, c.canaryPhase || "-")),
    c.workloads ? h("div", { class: "line workloads" }, h("span", { class: "muted" }, "workloads"),
      h("span", {}, Object.keys(c.workloads).sort().map((n) => n + " " + c.workloads[n]).join(", "))) : null,
    c.jobs ? h("div", { class: "line jobs" }, h("span", { class: "muted" }, "jobs"),
      h("span", {}, Object.keys(c.jobs).sort().map((n) => n + " " + c.jobs[n]).join(", "))) : null,
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
  if (e.type === "dev.flotilla.audit.recorded.v1") return describeAudit(d);
  const parts = [];
  for (const k of ["phase", "canaryPhase", "status", "reason", "message", "error", "outcome", "tag", "by"]) {
    if (typeof d[k] === "string" && d[k]) parts.push(d[k]);
  }
  if (typeof d.weight === "number" && d.weight) parts.push(d.weight + "%");
  if (typeof d.canaryWeight === "number" && d.canaryWeight) parts.push(d.canaryWeight + "%");
  return parts.join(" · ");
}

// describeAudit says who asked for what, why, and whether it was allowed
// (an audit record, #31).
function describeAudit(d) {
  const p = d.principal || {};
  const what = [d.action, d.detail, d.cluster].filter(Boolean).join(" ");
  const parts = [(p.name || "?") + " " + what + ": " + (d.decision || "")];
  if (d.why) parts.push(d.why);
  if (d.reason) parts.push("reason: " + d.reason);
  if (d.remoteAddr) parts.push("from " + d.remoteAddr);
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
        h("span", {}, d.cluster || (typeof d.wave === "number" ? "wave " + (d.wave + 1) : d.waveNumber ? "wave " + d.waveNumber : "")),
        h("span", {}, describe(e)));
    }))];
}

function controls(r) {
  if (!loggedIn()) {
    return h("p", { class: "muted", id: "controls-hint" }, "Log in (top right) to pause, resume, abort, roll back or retry this rollout.");
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
  // Only what the principal's roles allow (the button's id is its permission).
  const allowed = buttons.filter(([id]) => can(id, r.application));
  if (buttons.length && !allowed.length) {
    const project = (state.me.applications || {})[r.application] || "default";
    return h("p", { class: "muted", id: "controls-hint" }, state.me.name + "'s roles grant no control of this rollout in project " + project + ".");
  }
  return h("div", { class: "controls", id: "controls", role: "group", "aria-label": "Controls" },
    allowed.map(([id, label, path, cls]) => h("button", {
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

// ---- the fleet: a map of clusters x applications ----------------------------

// cellState is what a cell shows besides the version: a rollout in flight
// (rolling, waiting; catching up or reverting a drift: a rollout no push
// started), drifted (its primary changed by hand), failed, reverted,
// unknown.
function cellState(v) {
  if (!v) return "none";
  if (v.unknown) return "unknown";
  if (v.rollingOut && v.kind === "catch-up") return "catching-up";
  if (v.rollingOut && v.kind === "drift-revert") return "reverting";
  if (v.rollingOut) return v.phase === "Pending" ? "waiting" : "rolling";
  if (v.drift && v.drift.state === "drifted") return "drifted";
  if (v.drift && v.drift.state === "catch-up") return "behind";
  return v.state || "ok";
}

const stateMark = { rolling: "→", failed: "✕", reverted: "↺", unknown: "?", drifted: "⚠", behind: "+", "catching-up": "+", reverting: "↻" };
const stateWord = {
  ok: "runs", waiting: "waiting for", rolling: "rolling out", failed: "failed", reverted: "reverted", unknown: "unknown",
  drifted: "drifted", behind: "to catch up", "catching-up": "catching up to", reverting: "reverting drift to", none: "",
};

// imageName is an image reference without its registry and path, its
// digest cut short: what a cell has room for.
function imageName(ref) {
  const last = (ref || "").split("/").pop();
  const at = last.indexOf("@");
  return at < 0 ? last : last.slice(0, at + 1) + short(last.slice(at + 1));
}

function fleetPage() {
  const apps = [...new Set(state.clusters.flatMap((c) => Object.keys(c.applications || {})))].sort();
  const f = state.fleet || {};
  const colours = {};
  // Ranked with the versions of the application's latest rollouts, as
  // its page ranks them: a version has one colour on both pages.
  const recent = [...state.rollouts.values()];
  for (const a of apps) {
    colours[a] = palette(state.clusters.map((c) => (c.applications[a] || {}).tag)
      .concat(recent.filter((r) => r.application === a).flatMap((r) => [r.tag, r.previousTag])));
  }
  const q = (route().params.get("cluster") || "").toLowerCase();
  const shown = state.clusters.filter((c) => !q || c.name.toLowerCase().includes(q) ||
    Object.entries(c.labels || {}).some(([k, v]) => (k + "=" + v).toLowerCase().includes(q)));
  const healthy = state.clusters.filter((c) => !c.health || (c.health.reachable && c.health.flagger === "Ready")).length;
  return h("section", { "aria-labelledby": "title", class: "fleet" },
    h("h1", { id: "title" }, "Fleet"),
    f.stopped
      ? h("p", { class: "reason", id: "line" }, "The line is stopped" + (f.by ? " by " + f.by : "") + (f.reason ? ": " + f.reason : "") + ". No cluster starts a rollout until it is started again.")
      : h("p", { class: "muted", id: "line" }, "The line is running."),
    h("div", { class: "summary", id: "fleet-summary" },
      h("span", { id: "health-summary", class: healthy === state.clusters.length ? "" : "bad-text" },
        healthy + " of " + state.clusters.length + " clusters healthy"),
      apps.map((a) => spread(a, colours[a]))),
    h("div", { class: "filters" },
      h("label", {}, "Filter clusters ",
        h("input", { id: "filter-cluster", type: "search", value: q, placeholder: "name or label",
          oninput: (e) => { const p = route().params; if (e.target.value) p.set("cluster", e.target.value); else p.delete("cluster"); history.replaceState(null, "", "#/fleet" + (p.toString() ? "?" + p : "")); render(); } })),
      h("span", { class: "muted" }, shown.length + " of " + state.clusters.length),
      h("ul", { class: "legend states", id: "states-legend", "aria-label": "States" },
        ["rolling", "failed", "reverted", "unknown", "drifted", "catching-up", "reverting"].map((s) => h("li", { dataset: { state: s } },
          h("span", { class: "mark " + s, "aria-hidden": "true" }, stateMark[s]), s === "drifted" ? "drifted (changed by hand)" : stateWord[s].replace(/ to$/, ""))))),
    h("div", { class: "map-wrap" },
      h("table", { id: "clusters", class: "map" },
        h("caption", { class: "sr" }, "Clusters x applications: the version each cluster runs and its state"),
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Cluster"), h("th", { scope: "col" }, "Health"),
          apps.map((a) => h("th", { scope: "col", dataset: { app: a } }, appLink(a, { id: "fleet-app-" + a }))))),
        h("tbody", {}, shown.map((c) => h("tr", { dataset: { cluster: c.name } },
          h("th", { scope: "row", title: Object.entries(c.labels || {}).map(([k, v]) => k + "=" + v).join(" ") }, c.name,
            Object.keys(c.labels || {}).length ? h("span", { class: "labels" }, Object.entries(c.labels).map(([k, v]) => k + "=" + v).join(" ")) : null),
          health(c),
          apps.map((a) => runs(a, c.applications[a] && Object.assign({ cluster: c.name }, c.applications[a]), colours[a]))))))));
}

// spread draws how an application's versions spread over the clusters.
function spread(app, colours) {
  const count = new Map();
  let total = 0;
  for (const c of state.clusters) {
    const v = c.applications[app];
    if (!v) continue;
    const key = v.unknown ? "?" : cellState(v) === "drifted" ? "drifted" : v.tag || "?";
    count.set(key, (count.get(key) || 0) + 1);
    total++;
  }
  // Versions newest first, then the drifted and the unknown.
  const odd = (v) => (v === "drifted" ? 1 : v === "?" ? 2 : 0);
  const parts = [...count].sort((a, b) => odd(a[0]) - odd(b[0]) || compareVersions(a[0], b[0]));
  return h("div", { class: "spread", dataset: { app }, role: "img",
    "aria-label": app + ": " + parts.map(([v, n]) => n + (v === "drifted" ? " drifted" : " on " + v)).join(", ") },
    h("span", { class: "spread-name" }, app),
    h("span", { class: "bar" }, parts.map(([v, n]) => {
      const seg = h("span", { class: "seg " + (v === "drifted" ? "drifted" : colours.get(v) || "vx"), title: n + " " + (v === "drifted" ? "drifted" : "on " + v) }, n > 0 ? v + " ×" + n : "");
      seg.style.flexGrow = String(n); // CSSOM: allowed by the CSP
      return seg;
    })),
    total === 0 ? h("span", { class: "muted" }, "not rolled out yet") : null);
}

function health(c) {
  const hl = c.health;
  if (!hl) return h("td", { class: "health muted" }, "-");
  const api = hl.reachable, fl = hl.flagger === "Ready";
  return h("td", { class: "health", dataset: { reachable: String(api), flagger: hl.flagger }, title: hl.detail || "" },
    h("span", { class: "dot " + (api ? "ok" : "bad") }, api ? "API" : "unreachable"),
    " ",
    api ? h("span", { class: "dot " + (fl ? "ok" : "bad") }, fl ? "Flagger" : "Flagger " + hl.flagger.replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase()) : null);
}

function runs(app, v, colours) {
  const st = cellState(v);
  if (!v) return h("td", { class: "cell none", dataset: { app, state: st } }, h("span", { class: "muted" }, "-"));
  const d = v.drift;
  const drifted = st === "drifted";
  // What the check found besides a drift: a cluster to catch up, no
  // workload, not read.
  const note = d && !drifted && !v.rollingOut ? (d.state === "catch-up" ? "to catch up to " + d.tag : d.state === "no-workload" ? "no workload" : d.state) : "";
  const what = (drifted ? "drifted: runs " + d.image + ", not the validated " + d.tag : (v.tag || (v.unknown ? "unknown" : "?")) +
    (st !== "ok" && st !== "behind" ? ", " + stateWord[st] : "")) +
    (v.rollingOut ? " " + v.rollingOut + " (" + v.phase + ")" : "") + (v.failure ? ": " + v.failure : "") + (v.unknown ? ": " + v.unknown : "") +
    (drifted && v.rollingOut ? "; it drifted: runs " + d.image : "") + (note ? "; " + note : "") +
    (d ? " (found " + new Date(d.since).toLocaleString() + (d.reason ? ": " + d.reason : "") + ")" : "");
  const link = v.inFlight || v.rollout;
  const next = { waiting: "next ", "catching-up": "+ catching up to ", reverting: "↻ reverting drift to " }[st] || "→ ";
  return h("td", { class: "cell " + (drifted ? "drifted" : colours.get(v.tag) || "vx") + " " + st,
    dataset: { app, tag: v.tag || "", next: v.rollingOut || "", state: st, image: d && d.image || "", check: d ? d.state : "" }, title: what },
    h("a", { href: link ? "#/rollouts/" + link : "#/applications/" + encodeURIComponent(app), id: "fleet-" + (v.inFlight || v.rollout || app) + "-" + v.cluster + (v.inFlight ? "-next" : ""),
      "aria-label": v.cluster + " " + app + ": " + what },
    stateMark[st] && !["rolling", "catching-up", "reverting"].includes(st) ? h("span", { class: "mark " + st, "aria-hidden": "true" }, stateMark[st]) : null,
    drifted
      ? h("span", { class: "drift" }, "drifted: runs ", h("span", { class: "ver" }, imageName(d.image)))
      : h("span", { class: "ver" }, v.tag || (v.unknown ? "?" : "")),
    v.rollingOut ? h("span", { class: st === "waiting" ? "muted" : "next" }, next + v.rollingOut) : null,
    note ? h("span", { class: "muted note" }, note) : null));
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

// ---- an application: its history and status -------------------------------

function applicationPage(name) {
  const a = state.app;
  if (!a || a.name !== name) {
    loadApplication(name);
    return h("section", {}, h("h1", {}, name), h("p", { class: "muted" }, "Loading…"));
  }
  const st = a.status;
  return h("section", { "aria-labelledby": "title", dataset: { application: name } },
    h("p", {}, h("a", { href: "#/", id: "back" }, "← Rollouts"), " · ", h("a", { href: "#/fleet" }, "Fleet")),
    h("h1", { id: "title" }, "Application " + name, " ",
      st && st.webhookSilent ? h("span", { class: "badge bad", id: "silent" }, "webhook silent") : null),
    appStatus(a),
    h("h2", {}, "History"),
    history(a),
    h("h2", {}, "Rollouts"),
    appRollouts(a),
    a.next ? h("p", {}, h("button", { type: "button", id: "older", onclick: () => loadOlder(name) }, "Older rollouts")) : null);
}

function seenText(s) {
  return [h("span", { class: "mono" }, s.tag), " brought by ", h("strong", { dataset: { source: s.source || "" } }, s.source === "poll" ? "a poll" : "a webhook"),
    " · ", new Date(s.at).toLocaleString(), " (", h("span", { dataset: { since: s.at } }, ago(s.at)), " ago)",
    s.error ? h("div", { class: "bad-text" }, "not verified yet: " + s.error) : null];
}

function appStatus(a) {
  const st = a.status;
  if (!st) return h("p", { class: "muted", id: "app-status" }, a.statusError ? "Status not available: " + a.statusError : "Reading its status…");
  return h("dl", { class: "facts", id: "app-status" },
    fact("Runs", st.deployed ? h("span", { id: "deployed" }, h("span", { class: "mono" }, st.deployed.tag), st.deployed.rollout ? [" (", h("a", { href: "#/rollouts/" + st.deployed.rollout }, st.deployed.rollout), ")"] : null,
      st.deployed.at ? " since " + new Date(st.deployed.at).toLocaleString() : null) : h("span", { class: "muted", id: "deployed" }, "nothing rolled out yet")),
    st.latest && (!st.deployed || st.latest.tag !== st.deployed.tag) ? fact("Latest started", [h("span", { class: "mono" }, st.latest.tag), st.latest.rollout ? [" (", h("a", { href: "#/rollouts/" + st.latest.rollout }, st.latest.rollout), ")"] : null]) : null,
    st.queued ? fact("Queued", h("a", { href: "#/rollouts/" + st.queued }, st.queued)) : null,
    fact("Last seen push", st.lastSeen ? h("span", { id: "last-seen" }, seenText(st.lastSeen)) : h("span", { class: "muted", id: "last-seen" }, "none yet")),
    fact("Last skipped", st.lastSkipped
      ? h("span", { id: "last-skipped", class: "skipped", dataset: { tag: st.lastSkipped.tag, outcome: st.lastSkipped.outcome } },
        h("span", { class: "badge " + (st.lastSkipped.outcome === "rejected" ? "bad" : "warn") }, st.lastSkipped.outcome), " ",
        h("span", { class: "mono" }, st.lastSkipped.tag), ": ", h("span", { class: "why-skipped" }, st.lastSkipped.reason),
        h("span", { class: "muted" }, " · " + new Date(st.lastSkipped.at).toLocaleString()))
      : h("span", { class: "muted", id: "last-skipped" }, "none")),
    fact("Webhook", st.webhookSilent
      ? h("span", { id: "webhook", class: "bad-text", dataset: { silent: "true" } }, "silent: a poll found " + (st.silence ? st.silence.tag + " at " + new Date(st.silence.found).toLocaleString() : "a version") + " that no webhook announced" +
        (st.silence && st.silence.lastWebhook ? "; the last webhook brought " + st.silence.lastWebhook.tag + " " + ago(st.silence.lastWebhook.at) + " ago" : "; no webhook was ever heard"))
      : h("span", { id: "webhook", dataset: { silent: "false" } }, st.lastWebhook ? "heard: " + st.lastWebhook.tag + ", " + ago(st.lastWebhook.at) + " ago" : "no webhook heard yet")),
    st.pollInterval ? fact("Polled", "every " + st.pollInterval) : null,
    (st.quarantined || []).length ? fact("Quarantined", st.quarantined.map((q) => (q.tag || short(q.digest)) + " by " + q.by + ": " + q.reason).join("; ")) : null);
}

// lanes turns an application's rollouts into what each cluster ran and
// when: segments [{version, from, kind, rollout}] and marks (a failure).
function lanes(rollouts, took) {
  const asc = rollouts.slice().sort((a, b) => (a.created || "").localeCompare(b.created || ""));
  const by = new Map();
  const lane = (name) => { if (!by.has(name)) by.set(name, { name, segs: [], marks: [] }); return by.get(name); };
  const t = (x) => (x && !x.startsWith("0001") ? Date.parse(x) : 0);
  // What a cluster ran before r: the fleet's version, or its own image's
  // tag or digest where it ran something else.
  const prevOf = (r, c) => {
    const img = c.previousImage || "";
    if (r.previousTag && (!img || img.endsWith("@" + r.previousDigest))) return r.previousTag;
    if (img.includes("@")) return short(img.slice(img.indexOf("@") + 1));
    const last = img.split("/").pop();
    return last.includes(":") ? last.slice(last.lastIndexOf(":") + 1) : last;
  };
  for (const r of asc) {
    const start = t(r.created);
    for (const w of r.waves || []) {
      for (const c of w.clusters || []) {
        const l = lane(c.name);
        const prev = prevOf(r, c);
        if (!l.segs.length && prev) l.segs.push({ version: prev, from: start, kind: "before", rollout: "" });
        const at = t(c.updated) || t(r.updated) || start;
        const applied = t(c.applied) || at;
        switch (c.phase) {
          case "Succeeded":
            l.segs.push({ version: r.tag, from: at, kind: "ok", rollout: r.id });
            break;
          case "Reverted": case "Reverting": case "RevertFailed": case "Failed":
            if (c.failure || c.phase === "Failed") {
              // Flagger kept the primary on what it ran: a failed canary.
              l.marks.push({ at: applied, kind: "failed", rollout: r.id, version: r.tag, why: c.failure || c.message || "" });
              if (c.phase === "RevertFailed") l.segs.push({ version: "?", from: at, kind: "unknown", rollout: r.id });
            } else {
              // From when it took the version (its timeline says), else
              // from its last apply.
              l.segs.push({ version: r.tag, from: ((took || {})[r.id] || {})[c.name] || applied, kind: "reverted", rollout: r.id });
              l.segs.push({ version: c.phase === "RevertFailed" ? "?" : prev, from: at, kind: c.phase === "RevertFailed" ? "unknown" : "restored", rollout: r.id });
            }
            break;
          case "Applying": case "Progressing":
            if (r.phase === "Progressing") l.marks.push({ at: applied, kind: "rolling", rollout: r.id, version: r.tag, why: c.canaryPhase || c.phase });
            break;
        }
      }
    }
  }
  for (const l of by.values()) l.segs.sort((a, b) => a.from - b.from);
  return [...by.values()];
}

// versionsOf is what a lane's cluster ran, in order, each once in a row.
function versionsOf(l) {
  const out = [];
  for (const sg of l.segs) if (out[out.length - 1] !== sg.version) out.push(sg.version);
  return out;
}

// grouped folds lanes that tell the same story (the same versions, the
// same failures, each change within a minute of the first's) into one,
// so fifty clusters that did the same read as one line.
function grouped(ls) {
  const out = [];
  const story = (l) => versionsOf(l).join(",") + "|" + l.segs.map((s) => s.kind).join(",") + "|" + l.marks.map((m) => m.kind + m.version).join(",");
  for (const l of ls) {
    const g = out.find((o) => story(o) === story(l) && o.segs.every((s, i) => Math.abs(s.from - l.segs[i].from) < 60000));
    if (g) g.clusters.push(l.name);
    else out.push(Object.assign({}, l, { clusters: [l.name] }));
  }
  return out;
}

// laneName names a lane's clusters: a run of lanes in a row as "first …
// last (n)", others by name or as "first, second +n".
function laneName(cs, order) {
  if (cs.length <= 3) return cs.join(", ");
  const i = order.indexOf(cs[0]);
  if (cs.every((c, k) => order[i + k] === c)) return cs[0] + " … " + cs[cs.length - 1] + " (" + cs.length + ")";
  return cs[0] + ", " + cs[1] + " +" + (cs.length - 2);
}

function took(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return s + "s";
  if (s < 7200) return Math.floor(s / 60) + "m" + (s % 60 ? (s % 60) + "s" : "");
  return Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
}

function history(a) {
  if (!a.rollouts.length) return h("p", { class: "muted", id: "history" }, a.loading ? "Loading…" : "No rollouts of " + a.name + " yet.");
  const now = Date.now();
  const ls = lanes(a.rollouts, a.took);
  const times = a.rollouts.map((r) => Date.parse(r.created)).filter((x) => x > 0);
  const t0 = Math.min(...times), span = Math.max(now - t0, 1000);
  const x = (t) => Math.max(0, Math.min(100, ((t - t0) / span) * 100));
  const place = (el, from, to) => {
    el.style.left = x(from) + "%"; // CSSOM: allowed by the CSP, unlike style attributes
    if (to !== undefined) el.style.width = Math.max(x(to) - x(from), 0.4) + "%";
    return el;
  };
  const colours = palette(a.rollouts.flatMap((r) => [r.tag, r.previousTag]).concat(ls.flatMap((l) => l.segs.map((s) => s.version))));
  const rolloutBars = a.rollouts.slice().reverse().map((r) => { // the newest drawn last, on top
    const end = done(r) ? Date.parse(r.updated) || now : now;
    return place(h("a", { class: "bar-rollout " + (tone[r.phase] || "idle"), href: "#/rollouts/" + r.id,
      dataset: { rollout: r.id, phase: r.phase, tag: r.tag }, title: r.tag + " " + r.phase + (r.reason ? ": " + r.reason : ""),
      "aria-label": "rollout of " + r.tag + ", " + r.phase }, r.tag), Date.parse(r.created), end);
  });
  const axis = [0, 0.25, 0.5, 0.75, 1].map((f) => place(h("span", { class: "tick" }, clock(new Date(t0 + f * span).toISOString())), t0 + f * span));
  return h("div", { class: "history", id: "history", role: "group", "aria-label": "What each cluster of " + a.name + " ran, and when" },
    legend(colours, "history-legend"),
    h("ol", { class: "lanes" },
      h("li", { class: "lane rollouts" }, h("span", { class: "lane-name" }, "rollouts"), h("span", { class: "track" }, rolloutBars)),
      grouped(ls).map((l) => {
        const versions = versionsOf(l);
        const last = l.segs[l.segs.length - 1];
        const said = l.clusters.join(", ") + ": " + versions.join(", then ") + (l.marks.some((m) => m.kind === "failed") ? "; failed " + l.marks.filter((m) => m.kind === "failed").map((m) => m.version).join(", ") : "");
        return h("li", { class: "lane", dataset: { clusters: l.clusters.join(","), versions: versions.join(","), now: last ? last.version : "" }, "aria-label": said },
          h("span", { class: "lane-name", title: l.clusters.join(", ") }, laneName(l.clusters, ls.map((x) => x.name))),
          h("span", { class: "track" },
            l.segs.map((sg, i) => {
              const to = i + 1 < l.segs.length ? l.segs[i + 1].from : now;
              return place(h("span", { class: "seg " + (colours.get(sg.version) || "vx") + " " + sg.kind, dataset: { version: sg.version, kind: sg.kind },
                title: l.name + " ran " + sg.version + " from " + new Date(sg.from).toLocaleString() + (sg.kind === "reverted" ? " (put back)" : "") }, sg.version), sg.from, to);
            }),
            l.marks.map((m) => place(h("span", { class: "pin " + m.kind, dataset: { kind: m.kind, version: m.version }, title: l.name + ": " + m.version + " " + m.kind + (m.why ? ": " + m.why : "") }, m.kind === "failed" ? "✕" : "→"), m.at))));
      })),
    h("div", { class: "axis", "aria-hidden": "true" }, h("span", { class: "lane-name" }), h("span", { class: "track" }, axis)));
}

function appRollouts(a) {
  return h("table", { id: "app-rollouts" },
    h("thead", {}, h("tr", {}, ["Rollout", "Version", "Outcome", "Source", "Started", "Took", "Clusters"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, a.rollouts.map((r) => {
      const failed = culprits(r);
      const lasted = done(r) ? took(Date.parse(r.updated) - Date.parse(r.created)) : "…";
      return h("tr", { dataset: { rollout: r.id, phase: r.phase } },
        h("td", {}, h("a", { href: "#/rollouts/" + encodeURIComponent(r.id), class: "mono" }, r.id)),
        h("td", {}, r.tag, r.previousTag ? h("span", { class: "muted" }, " ← " + r.previousTag) : null),
        h("td", {}, badge(r.phase), r.reason ? h("div", { class: "msg" }, r.reason) : null),
        h("td", { dataset: { kind: r.kind || "" } }, r.kind || r.source || "-"), // a catch-up or a drift's revert: no push brought it
        h("td", {}, new Date(r.created).toLocaleString()),
        h("td", {}, lasted),
        h("td", {}, outcomes(r, failed)));
    })));
}

// outcomes sums up a rollout's clusters: how many took it, and by name
// those that failed it and those put back because of them.
function outcomes(r, failed) {
  const cs = (r.waves || []).flatMap((w) => w.clusters || []);
  const groups = [
    ["failed", "bad", "✕ ", cs.filter((c) => outcome(c) === "failed"), (c) => "failed: " + (c.failure || c.message || "")],
    ["reverted", "warn", "↺ ", cs.filter((c) => outcome(c) === "reverted"), () => failed.length ? "put back because " + failed.join(", ") + " failed" : "put back"],
  ];
  const ok = cs.filter((c) => c.phase === "Succeeded").length;
  const other = cs.length - ok - groups.reduce((n, g) => n + g[3].length, 0);
  return h("ul", { class: "chips" },
    ok ? h("li", { class: "chip ok" }, "✓ " + ok + " took it") : null,
    groups.map(([o, cls, mark, list, why]) => list.map((c) => h("li", { class: "chip " + cls, dataset: { cluster: c.name, outcome: o }, title: why(c) }, mark + c.name))),
    other ? h("li", { class: "chip idle" }, other + (done(r) || r.phase === "RollbackFailed" ? " not reached" : " to go")) : null);
}

async function loadApplication(name) {
  // Read again (the stream reopened): what is shown stays until the answer.
  if (!state.app || state.app.name !== name) state.app = { name, rollouts: [], next: "", status: null, statusError: "", loading: true, took: {} };
  const base = "/api/v1/rollouts?limit=50&application=" + encodeURIComponent(name);
  const [page, status] = await Promise.allSettled([getPage(base), getJSON("/api/v1/applications/" + encodeURIComponent(name))]);
  if (!state.app || state.app.name !== name) return;
  state.app.loading = false;
  if (page.status === "fulfilled") {
    state.app.rollouts = page.value.body;
    state.app.next = page.value.next;
  } else notice("Application " + name + ": " + page.reason.message);
  if (status.status === "fulfilled") state.app.status = status.value;
  else state.app.statusError = status.reason.message;
  render();
  loadTook(state.app.rollouts);
}

// rolledBack: a rollout whose clusters were put back.
function rolledBack(r) {
  return ["RolledBack", "RollbackFailed"].includes(r.phase);
}

// loadTook reads, from the timelines of rollouts rolled back (a few at a
// time), when each cluster took the version before it was put back: the
// rollout says only when it was put back.
async function loadTook(rollouts) {
  const a = state.app;
  if (!a) return;
  const todo = rollouts.filter((r) => rolledBack(r) && !a.took[r.id]).slice(0, 10);
  if (!todo.length) return;
  await Promise.all(todo.map(async (r) => {
    try {
      const tl = await getJSON("/api/v1/rollouts/" + encodeURIComponent(r.id) + "/events");
      const at = {};
      for (const e of tl.events || []) {
        if (shortType(e.type) === "cluster.succeeded" && e.data && e.data.cluster) at[e.data.cluster] = Date.parse(e.time);
      }
      a.took[r.id] = at;
    } catch (_) { /* drawn from the rollout alone */ }
  }));
  render();
}

async function loadOlder(name) {
  const a = state.app;
  if (!a || a.name !== name || !a.next) return;
  try {
    const page = await getPage(a.next);
    const seen = new Set(a.rollouts.map((r) => r.id));
    a.rollouts = a.rollouts.concat(page.body.filter((r) => !seen.has(r.id)));
    a.next = page.next;
    loadTook(page.body);
  } catch (err) {
    notice("Older rollouts: " + err.message);
  }
  render();
}

let statusTimer = 0;
async function reloadStatus() {
  const a = state.app;
  if (!a) return;
  try {
    a.status = await getJSON("/api/v1/applications/" + encodeURIComponent(a.name));
    a.statusError = "";
  } catch (err) {
    a.statusError = err.message;
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
  if (r.page === "application") loadApplication(r.app);
}

// streamURL is what the page shown needs of the watch stream: one
// rollout's events and states, every rollout's states, or everything (the
// fleet page also follows the line's stops and starts).
function streamURL() {
  const r = route();
  if (r.page === "rollout") return "/api/v1/watch?rollout=" + encodeURIComponent(r.id);
  if (r.page === "fleet" || r.page === "application") return "/api/v1/watch";
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
  es.addEventListener("error", (e) => {
    if (e.target === es && es.readyState === EventSource.CLOSED) {
      // Refused (401: the session ended; or 5xx): the browser gives up.
      // Ask who we are (a 401 leads to the login page), then again.
      es = null;
      esURL = "";
      setTimeout(() => { loadMe(); connect(); }, 3000);
    }
    state.live = false;
    document.body.dataset.live = "false";
    live.textContent = "reconnecting…";
    live.classList.remove("on");
  });
  es.addEventListener("rollout", (m) => {
    const r = JSON.parse(m.data);
    state.rollouts.set(r.id, r);
    if (state.app && r.application === state.app.name && route().page === "application") {
      const i = state.app.rollouts.findIndex((x) => x.id === r.id);
      if (i >= 0) state.app.rollouts[i] = r;
      else state.app.rollouts.unshift(r);
      if (rolledBack(r)) loadTook([r]);
    }
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
    if (route().page === "application") { // a push seen, skipped, a webhook heard
      clearTimeout(statusTimer);
      statusTimer = setTimeout(reloadStatus, 300);
    }
  });
}

// loadMe reads who is logged in and shows it in the header: the name and
// a logout button, or, for an anonymous reader, a link to log in.
async function loadMe() {
  try {
    state.me = await getJSON("/api/v1/whoami");
  } catch (err) {
    notice("Who am I: " + err.message);
    return;
  }
  const who = document.getElementById("whoami");
  const anonymous = state.me.via === "anonymous";
  who.textContent = anonymous ? "not logged in" : state.me.name;
  who.dataset.via = state.me.via;
  document.getElementById("logout-form").hidden = anonymous || state.me.via !== "session";
  document.getElementById("login-link").hidden = !anonymous;
  render();
}

document.getElementById("login-link").addEventListener("click", (e) => {
  e.currentTarget.href = loginURL(); // back to the page shown now
});

window.addEventListener("hashchange", () => {
  const r = route();
  if (r.page === "fleet") loadFleet();
  connect(); // the stream this page needs; its open reloads the page's data
  render();
  document.getElementById("main").focus({ preventScroll: true });
});
// The clusters' health changes without an event: the fleet page reads it
// again as often as the API reads the clusters (every 10 s).
setInterval(() => {
  if (route().page === "fleet" && document.visibilityState === "visible") loadFleet();
}, 10000);
// Ages tick in place: a redraw would move the keyboard's focus.
setInterval(() => {
  for (const el of document.querySelectorAll("[data-since]")) el.textContent = ago(el.dataset.since);
}, 5000);
loadMe();
connect();
reload();
