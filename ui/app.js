/* Starcloud dashboard. Plain JS, no framework.
 *
 * Data: everything comes from the server's API with the token the user
 * typed (sessionStorage, sent as Authorization: Bearer on every call).
 * Nodes, jobs and events are listed once and then followed with the watch
 * API (?watch=1&resourceVersion=N, a streaming fetch of NDJSON); queues and
 * deployments, which change rarely, are listed every few seconds, so the
 * page never holds more than three of the browser's six connections.
 *
 * Rendering: changes only mark parts of the page dirty; one
 * requestAnimationFrame callback redraws what is dirty, and each redraw is
 * bounded by what is on screen (the GPU canvas draws only visible rows, the
 * running-job list only visible rows, at most EVENTS_PER_FRAME new event
 * lines per frame), so 10,000 nodes stay responsive. Derived figures (GPU
 * use per node, queue sums) are recomputed at most every DERIVE_MS. */
"use strict";

const TOKEN_KEY = "starcloud.token";
const API = "/api/v1/";
const DERIVE_MS = 250;
const POLL_MS = 3000;
const EVENTS_MAX = 300;
const EVENTS_PER_FRAME = 50;
const EXPLAIN_MAX = 30; /* explain calls kept for the first N pending jobs */
const CELL_GAP = 1, NODE_GAP = 6, ROW_GAP = 5, ROW_PX = 22;

const $ = (id) => document.getElementById(id);

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  who: null,
  objs: { nodes: new Map(), jobs: new Map(), events: new Map(), queues: new Map(),
          deployments: new Map(), nodepools: new Map() },
  poolHistory: new Map(), /* pool name -> [{t, members, requested}] since the page opened */
  derived: null,          /* see derive() */
  derivedAt: 0,
  dirty: new Set(),
  pendingEvents: [],      /* feed lines not yet on the page */
  eventCount: 0,
  explain: new Map(),     /* job name -> {rv, text} */
  explainBusy: 0,
  sched: null,            /* GET /api/v1/scheduler/status: the last cycle's figures */
  devUse: null,           /* node -> milli per device held by anyone (tenants only) */
  groupBy: "zone/rack",   /* the GPU map's grouping (gpumap.js) */
  filter: { text: "", queue: "", status: "" }, /* the search box and filters */
  rollouts: new Map(),    /* deployment name -> rollout status from the API */
  aborts: [],
  generation: 0,          /* bumps at logout so old streams stop */
  connErrors: 0,
  hover: -1,
  selected: -1,
};
window.starcloud = state; /* for the browser console and the UI tests */

/* ------------------------------------------------------------------ API */

async function api(path, opts = {}) {
  const headers = Object.assign({ Authorization: "Bearer " + state.token }, opts.headers || {});
  const res = await fetch(API + path, Object.assign({}, opts, { headers }));
  if (res.status === 401) {
    logout("token rejected by the server (401)");
    throw new Error("unauthorized");
  }
  return res;
}

async function apiJSON(path) {
  const res = await api(path);
  if (!res.ok) {
    const err = new Error(path + ": HTTP " + res.status);
    err.status = res.status;
    throw err;
  }
  return res.json();
}

function setConn(ok, text) {
  const el = $("conn");
  el.textContent = text;
  el.classList.toggle("bad", !ok);
}

/* Lists a kind, page by page (the server pages lists by default), replaces
 * what we hold, and returns the first page's revision: a watch from there
 * sees every change made while the later pages were read. */
async function list(kind) {
  const m = new Map();
  let rv = null, cont = "";
  do {
    const doc = await apiJSON(kind + "?limit=500" + (cont ? "&continue=" + encodeURIComponent(cont) : ""));
    for (const o of doc.items || []) m.set(o.metadata.name, o);
    const md = doc.metadata || {};
    if (rv === null) rv = md.resourceVersion || "0";
    cont = md.continue || "";
  } while (cont);
  state.objs[kind] = m;
  markDirty(kind);
  return rv;
}

/* Follows a kind: list, then watch from the list's revision; on any break
 * the watch resumes from the last revision seen, or lists again after a
 * 410 (the change log moved on). */
async function follow(kind, gen) {
  let rv = null, delay = 500;
  while (gen === state.generation) {
    try {
      if (rv === null) rv = await list(kind);
      const ctrl = new AbortController();
      state.aborts.push(ctrl);
      const res = await api(kind + "?watch=1&resourceVersion=" + encodeURIComponent(rv),
                            { signal: ctrl.signal });
      if (res.status === 410) { rv = null; continue; }
      if (!res.ok) throw new Error(kind + " watch: HTTP " + res.status);
      setConn(true, "live");
      delay = 500;
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done || gen !== state.generation) break;
        buf += dec.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (!line.trim()) continue;
          const ev = JSON.parse(line);
          if (ev.type === "ERROR") {
            /* Cut off (too slow, 410): resume from the last event seen,
             * or list again when there was none. */
            if (rv === "0") rv = null;
            break;
          }
          const orv = ev.object && ev.object.metadata && ev.object.metadata.resourceVersion;
          if (orv) rv = orv;
          onWatchEvent(kind, ev);
        }
      }
    } catch (e) {
      if (gen !== state.generation || e.message === "unauthorized") return;
      setConn(false, "reconnecting (" + e.message + ")");
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 10000);
  }
}

async function poll(kind, gen) {
  while (gen === state.generation) {
    try {
      await list(kind);
    } catch (e) {
      if (e.message === "unauthorized") return;
    }
    if (kind === "deployments") await pollRollouts(gen);
    if (kind === "nodepools") recordPools();
    await sleep(POLL_MS);
  }
}

/* Rollout status of each deployment, when the server has the endpoint. */
async function pollRollouts(gen) {
  for (const name of state.objs.deployments.keys()) {
    if (gen !== state.generation) return;
    try {
      const res = await api("deployments/" + encodeURIComponent(name) + "/rollout");
      if (res.ok) state.rollouts.set(name, await res.json());
      else state.rollouts.delete(name);
    } catch (e) { return; }
  }
  markDirty("deployments");
}

/* The scheduler's own figures (GET /api/v1/scheduler/status: every queue
 * the token may see, parents included, as the last cycle decided), and for
 * a tenant the devices other queues hold (/scheduler/devices, no names). */
async function pollScheduler(gen) {
  while (gen === state.generation) {
    try {
      state.sched = await apiJSON("scheduler/status");
      markDirty("queuesView");
      if (state.who && state.who.role === "tenant") {
        state.devUse = (await apiJSON("scheduler/devices")).nodes || {};
        markDirty("nodes");
      }
    } catch (e) { /* the figures stay as they were */ }
    await sleep(POLL_MS);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function onWatchEvent(kind, ev) {
  const o = ev.object;
  if (!o || !o.metadata) return;
  const m = state.objs[kind];
  if (ev.type === "DELETED") m.delete(o.metadata.name);
  else m.set(o.metadata.name, o);
  markDirty(kind);
  state.pendingEvents.push({ kind, type: ev.type, obj: o, at: new Date() });
  if (state.pendingEvents.length > EVENTS_MAX) state.pendingEvents.shift();
  schedule();
}

/* ------------------------------------------------------------ login */

async function login(token) {
  state.token = token;
  try {
    state.who = await apiJSON("tokens/self");
  } catch (e) {
    if (e.message === "unauthorized") return; /* logout() said why */
    state.token = "";
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin(e.status ? "the server refused this token (HTTP " + e.status + ")"
                       : "cannot reach the server: " + e.message);
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("login").hidden = true;
  $("app").hidden = false;
  $("logout").hidden = false;
  const w = state.who;
  $("whoami").textContent = "role " + (w.role || "?") +
    (w.queues && w.queues.length ? " · queues " + w.queues.join(", ") : "");
  const gen = ++state.generation;
  for (const k of ["nodes", "jobs", "events"]) follow(k, gen);
  for (const k of ["queues", "deployments", "nodepools"]) poll(k, gen);
  pollScheduler(gen);
  pollHistory(gen); /* history.js */
  openJobPage(); /* jobpage.js: a #job/NAME link opened directly */
  resizeCanvas();
  schedule();
}

function logout(why) {
  state.generation++;
  for (const c of state.aborts) c.abort();
  state.aborts = [];
  state.token = "";
  sessionStorage.removeItem(TOKEN_KEY);
  for (const k in state.objs) state.objs[k] = new Map();
  state.explain.clear();
  state.rollouts.clear();
  state.sched = state.devUse = null;
  historyReset(); /* history.js */
  $("events").textContent = "";
  state.eventCount = 0;
  showLogin(why || "");
}

function showLogin(msg) {
  $("app").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("whoami").textContent = "";
  $("login-error").textContent = msg || "";
}

/* ------------------------------------------------------- derived data */

const num = (v) => (typeof v === "number" && isFinite(v) ? v : null);
const get = (o, ...path) => path.reduce((x, k) => (x == null ? undefined : x[k]), o);

function parseBytes(q) {
  if (typeof q === "number") return q;
  if (typeof q !== "string") return null;
  const m = /^([0-9.]+)\s*([KMGTPE]i?)?$/.exec(q.trim());
  if (!m) return null;
  const pow = { K: 1, M: 2, G: 3, T: 4, P: 5, E: 6 };
  const u = m[2];
  if (!u) return parseFloat(m[1]);
  return parseFloat(m[1]) * Math.pow(u.endsWith("i") ? 1024 : 1000, pow[u[0]]);
}

/* GPU devices a running pod holds, for queue sums: whole devices count 1,
 * shares their fraction, MIG slices their compute slices out of 7. */
function podGpus(p, devMem) {
  if (p.mig) {
    const g = /^(\d+)g\./.exec(p.mig.profile || "");
    return g ? +g[1] / 7 : 0;
  }
  if (num(p.gpuShare) !== null) return p.gpuShare / 1000 * Math.max(1, (p.gpus || []).length);
  if (p.gpuMemory != null && devMem) return Math.min(1, parseBytes(p.gpuMemory) / devMem);
  return (p.gpus || []).length;
}

/* What one task replica asks for, in devices (for "requested"). */
function taskGpus(res) {
  if (!res) return 0;
  if (num(res.gpu) !== null) return res.gpu;
  if (typeof res.gpu === "string") return parseFloat(res.gpu) || 0;
  if (num(res.gpuFraction) !== null) return res.gpuFraction;
  if (res.mig) { const g = /^(\d+)g\./.exec(res.mig); return g ? +g[1] / 7 : 0; }
  if (res.gpuMemory != null) return 0; /* a share of a device whose size is not yet known */
  return 0;
}

const HOLDING = new Set(["Running", "Releasing"]);
const FINISHED = new Set(["Succeeded", "Failed"]);

function jobPods(j) { return get(j, "status", "pods") || []; }
function jobReplicas(j) {
  if (!get(j, "spec", "tasks")) return get(j, "spec", "replicas") ?? 1; /* a deployment */
  let n = 0;
  for (const t of get(j, "spec", "tasks") || []) n += t.replicas == null ? 1 : t.replicas;
  return n;
}

/* Recomputes device use per node (flat typed arrays, one slot per device)
 * and the per-queue sums and job lists: O(nodes + pods), at most once
 * every DERIVE_MS. */
function derive() {
  const T = topology(state.derived);
  const ndev = T.off[T.nodes.length];
  const whole = new Uint8Array(ndev);   /* 1 = held whole */
  const share = new Uint16Array(ndev);  /* milli in use by shares */
  const mig = new Uint8Array(ndev);     /* bit s = compute slice s in use */
  const rel = new Uint8Array(ndev);     /* something on it is releasing */
  const reserved = new Uint8Array(T.nodes.length);
  const others = new Uint16Array(ndev); /* milli held by pods this token cannot list */
  const match = new Uint8Array(T.nodes.length);
  const queues = new Map();
  const q = (name) => {
    if (!queues.has(name)) queues.set(name, { allocated: 0, requested: 0, pending: 0 });
    return queues.get(name);
  };
  const running = [], pending = [];
  /* Jobs and deployments both hold devices (a deployment's replicas are
   * pods in its status too); only jobs go into the job lists. */
  const account = (j, isJob) => {
    const pods = jobPods(j);
    const qn = get(j, "spec", "queue") || "";
    let holding = 0, done = 0, gpus = 0;
    const onNodes = new Set();
    for (const p of pods) {
      if (FINISHED.has(p.phase)) { done++; continue; }
      if (!HOLDING.has(p.phase) || !p.node) continue;
      holding++;
      onNodes.add(p.node);
      const ni = T.index.get(p.node);
      gpus += podGpus(p, ni === undefined ? 0 : T.mem[ni]);
      if (ni === undefined) continue;
      const base = T.off[ni], count = T.off[ni + 1] - base;
      const isRel = p.phase === "Releasing" ? 1 : 0;
      if (p.mig) {
        const d = p.mig.gpu | 0;
        if (d < 0 || d >= count) continue;
        const g = /^(\d+)g\./.exec(p.mig.profile || "");
        const size = g ? +g[1] : 1, start = p.mig.start | 0;
        for (let s = start; s < Math.min(7, start + size); s++) mig[base + d] |= 1 << s;
        rel[base + d] |= isRel;
        continue;
      }
      for (const gi of p.gpus || []) {
        if (gi < 0 || gi >= count) continue;
        rel[base + gi] |= isRel;
        if (num(p.gpuShare) !== null) share[base + gi] = Math.min(1000, share[base + gi] + p.gpuShare);
        else if (p.gpuMemory != null && T.mem[ni])
          share[base + gi] = Math.min(1000, share[base + gi] + Math.round(1000 * parseBytes(p.gpuMemory) / T.mem[ni]));
        else whole[base + gi] = 1;
      }
    }
    /* A reservation the server reports for a waiting job. */
    for (const rn of [].concat(get(j, "status", "reservation", "nodes") || [])) {
      const ni = T.index.get(rn);
      if (ni !== undefined) reserved[ni] = 1;
    }
    const total = jobReplicas(j);
    const minMember = get(j, "spec", "minMember") || total;
    let req = 0;
    for (const t of get(j, "spec", "tasks") || [])
      req += (t.replicas == null ? 1 : t.replicas) * taskGpus(t.resources);
    if (!isJob) req = total * taskGpus(get(j, "spec", "template", "resources"));
    const qs = q(qn);
    qs.allocated += gpus;
    if (done < total) qs.requested += Math.max(gpus, req * (total - done) / Math.max(1, total));
    if (!isJob) return;
    const info = { job: j, name: j.metadata.name, queue: qn, holding, total, gpus, nodes: [...onNodes] };
    if (holding > 0) running.push(info);
    if (done < total && holding < minMember) {
      info.created = created(j);
      pending.push(info);
      qs.pending++;
    }
  };
  for (const j of state.objs.jobs.values()) account(j, true);
  for (const d of state.objs.deployments.values()) account(d, false);
  running.sort((a, b) => (a.name < b.name ? -1 : 1));
  pending.sort((a, b) => a.created - b.created);
  const sum = { nodes: T.nodes.length, notReady: 0, cordoned: 0, reserved: 0, gpus: ndev,
                whole: 0, shared: 0, mig: 0, free: 0, releasing: 0, others: 0, matching: 0 };
  const text = state.filter.text.toLowerCase();
  T.nodes.forEach((n, i) => {
    if (get(n, "status", "ready") === false) sum.notReady++;
    if (get(n, "spec", "unschedulable")) sum.cordoned++;
    sum.reserved += reserved[i];
    match[i] = !text || nodeText(n).includes(text) ? 1 : 0;
    sum.matching += match[i];
    /* What the server says is held on this node beyond what this token's
     * own pods hold: other queues' pods, drawn as "in use". */
    const use = state.devUse && state.devUse[n.metadata.name];
    if (!use) return;
    for (let k = 0; k < T.off[i + 1] - T.off[i] && k < use.length; k++) {
      const dv = T.off[i] + k;
      let mine = whole[dv] ? 1000 : share[dv];
      for (let b = 0; b < 7; b++) if (mig[dv] & (1 << b)) mine += 1000 / 7;
      others[dv] = Math.max(0, Math.min(1000, Math.round(use[k] - mine)));
      if (others[dv] < 5) others[dv] = 0; /* rounding of MIG slices */
    }
  });
  for (let k = 0; k < ndev; k++) {
    sum.releasing += rel[k];
    if (whole[k]) sum.whole++;
    else if (mig[k]) sum.mig++;
    else if (share[k]) sum.shared++;
    else if (others[k]) sum.others++;
    else sum.free++;
  }
  state.derived = Object.assign(T, { whole, share, mig, rel, reserved, others, match, queues,
                                     running, pending, sum, rows: null });
  state.derivedAt = performance.now();
  state.podsOn = null; /* describeNode's cache */
}

/* What the search box matches a node on: name, labels, model. */
function nodeText(n) {
  const l = get(n, "metadata", "labels") || {};
  return (n.metadata.name + " " + Object.entries(l).map(([k, v]) => k + "=" + v).join(" ") + " " +
          (get(n, "spec", "gpus", "model") || "")).toLowerCase();
}

/* The search box and filters on a job (or deployment) of the lists. */
function jobShown(info) {
  const f = state.filter;
  if (f.queue && info.queue !== f.queue) return false;
  if (f.status && (get(info.job, "status", "phase") || "Pending") !== f.status) return false;
  const t = f.text.toLowerCase();
  return !t || info.name.toLowerCase().includes(t) || info.queue.toLowerCase().includes(t);
}

function created(j) {
  const t = Date.parse(get(j, "metadata", "creationTimestamp") || "");
  return isNaN(t) ? 0 : t;
}

/* ------------------------------------------------------------ render */

let frameQueued = false;
function markDirty(kind) { state.dirty.add(kind); schedule(); }
function schedule() {
  if (!frameQueued) { frameQueued = true; requestAnimationFrame(frame); }
}

function frame() {
  frameQueued = false;
  if ($("app").hidden) return;
  const d = state.dirty;
  let derived = false;
  if (d.has("nodes") || d.has("jobs") || d.has("queues") || d.has("deployments") || !state.derived) {
    const wait = DERIVE_MS - (performance.now() - state.derivedAt);
    if (wait > 0 && state.derived) setTimeout(schedule, wait);
    else { derive(); derived = true; }
  }
  /* Work on a copy: drawing may mark things dirty again (a resize), and
   * those marks must survive for the next frame. */
  const todo = new Set(d);
  d.clear();
  if (derived) for (const k of ["gpu", "queuesView", "pending", "running"]) todo.add(k);
  else for (const k of ["nodes", "jobs", "queues", "deployments"]) if (todo.has(k)) d.add(k);
  if (todo.has("gpu")) drawGpus();
  if (todo.has("queuesView") || (derived && todo.has("queues"))) { renderQueues(); fillQueueFilter(); }
  if (todo.has("pending")) renderPending();
  if (todo.has("running")) renderRunning();
  if (todo.has("deployments")) renderDeployments();
  if (todo.has("nodepools")) renderPools();
  if (todo.has("history")) drawHistory(); /* history.js */
  if (todo.has("jobPage") || (derived && jobPageOpen())) renderJobPage(); /* jobpage.js */
  drainEvents();
}

/* ---- GPU map (canvas) ---- */

const canvas = $("gpu-canvas");
const ctx = canvas.getContext("2d");
const scroller = $("gpu-scroll");
const COLORS = {};
function colors() {
  const cs = getComputedStyle(document.documentElement);
  for (const k of ["free", "whole", "shared", "mig", "releasing", "reserved", "notready", "cordoned",
                   "others", "dimmed", "text", "dimText"])
    COLORS[k] = cs.getPropertyValue("--" + k).trim();
}

function resizeCanvas() {
  const dpr = window.devicePixelRatio || 1;
  const w = scroller.clientWidth || 800, h = scroller.clientHeight || 360;
  canvas.width = Math.floor(w * dpr);
  canvas.height = Math.floor(h * dpr);
  canvas.style.width = w + "px";
  canvas.style.height = h + "px";
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  /* Resizing cleared the canvas: draw again now, not a frame later. */
  if (state.derived && !$("app").hidden) drawGpus();
}

function describeNode(i) {
  const D = state.derived;
  const n = D.nodes[i];
  const name = n.metadata.name;
  /* Pods on this node, by device: one pass over the pods, cached per node. */
  if (!state.podsOn || state.podsOn.node !== name) {
    const byDev = new Map();
    for (const j of [...state.objs.jobs.values(), ...state.objs.deployments.values()])
      for (const p of jobPods(j)) {
        if (p.node !== name || !HOLDING.has(p.phase)) continue;
        const devs = p.mig ? [p.mig.gpu] : p.gpus || [];
        for (const d of devs) {
          if (!byDev.has(d)) byDev.set(d, []);
          let s = p.name;
          if (p.mig) s += " (MIG " + p.mig.profile + "@" + p.mig.start + ")";
          else if (num(p.gpuShare) !== null) s += " (" + (p.gpuShare / 10).toFixed(0) + "%)";
          if (p.phase === "Releasing") s += " releasing";
          byDev.get(d).push(s);
        }
      }
    state.podsOn = { node: name, byDev };
  }
  const g = get(n, "spec", "gpus") || {};
  const labels = Object.entries(get(n, "metadata", "labels") || {}).map(([k, v]) => k + "=" + v).join(",");
  const lines = [`${name}  ${g.count || 0}× ${g.model || "no GPU"}` +
    (g.mig ? " (MIG " + (typeof g.mig === "string" ? g.mig : "layout") + ")" : "") +
    (labels ? "  " + labels : "") +
    (get(n, "status", "ready") === false ? "  NOT READY" : "") +
    (get(n, "spec", "unschedulable") ? "  cordoned" : "") +
    (D.reserved[i] ? "  reserved" : "")];
  const base = D.off[i], count = D.off[i + 1] - base;
  for (let k = 0; k < count; k++) {
    const dv = base + k;
    const pods = (state.podsOn.byDev.get(k) || []).join(", ");
    let s = "free";
    if (D.whole[dv]) s = "whole: " + pods;
    else if (D.mig[dv]) s = "MIG: " + pods;
    else if (D.share[dv]) s = "shared " + (D.share[dv] / 10).toFixed(0) + "%: " + pods;
    lines.push(`  gpu ${k}: ${s}`);
  }
  return lines.join("\n");
}

canvas.addEventListener("mousemove", (ev) => {
  const i = nodeAt(ev), tip = $("tooltip");
  if (i !== state.hover) { state.hover = i; markDirty("gpu"); }
  if (i < 0) { tip.hidden = true; return; }
  tip.textContent = describeNode(i);
  tip.style.left = ev.clientX + 14 + "px";
  tip.style.top = ev.clientY + 14 + "px";
  tip.hidden = false;
});
canvas.addEventListener("mouseleave", () => { $("tooltip").hidden = true; state.hover = -1; markDirty("gpu"); });
canvas.addEventListener("click", (ev) => {
  state.selected = nodeAt(ev);
  $("node-detail").textContent = state.selected >= 0 ? describeNode(state.selected) : "";
  markDirty("gpu");
});
scroller.addEventListener("scroll", () => markDirty("gpu"), { passive: true });
window.addEventListener("resize", resizeCanvas);
/* The search box filters the job lists and deployments (name, queue) and
 * dims nodes that do not match (name, labels, model); Enter on an exact
 * node name jumps to it. */
$("search").addEventListener("input", (ev) => {
  state.filter.text = ev.target.value.trim();
  state.derived = state.derived && Object.assign(state.derived, { rows: null });
  for (const k of ["nodes", "pending", "running", "deployments"]) markDirty(k);
});
$("search").addEventListener("change", (ev) => {
  const D = state.derived, name = ev.target.value.trim();
  const i = D && D.index.get(name);
  if (i === undefined || i === null) return;
  scrollToNode(i);
  state.selected = i;
  $("node-detail").textContent = describeNode(i);
  markDirty("gpu");
});
for (const [id, key] of [["queue-filter", "queue"], ["status-filter", "status"]])
  $(id).addEventListener("change", (ev) => {
    state.filter[key] = ev.target.value;
    for (const k of ["pending", "running", "deployments"]) markDirty(k);
  });
$("group-by").addEventListener("change", (ev) => {
  state.groupBy = ev.target.value;
  markDirty("nodes");
});

/* The queue filter lists the queues this token sees. */
function fillQueueFilter() {
  const sel = $("queue-filter"), have = [...sel.options].slice(1).map((o) => o.value).join(",");
  const names = [...state.objs.queues.keys()].sort();
  if (names.join(",") === have) return;
  const cur = sel.value;
  sel.replaceChildren(new Option("all queues", ""), ...names.map((n) => new Option(n, n)));
  sel.value = names.includes(cur) ? cur : "";
}

/* ---- queues ---- */

function fmt(v) {
  if (v == null) return "–";
  if (v < 0) return "∞";
  return Number.isInteger(v) ? String(v) : v.toFixed(2);
}

/* The last cycle's figures for a queue (GPU devices), or null. */
function schedQueue(name) {
  for (const q of (state.sched && state.sched.queues) || []) if (q.name === name) return q;
  return null;
}

/* The scheduler's figures when it has reported the queue; otherwise quota
 * from the spec and allocated/requested summed from the jobs, fair share
 * unknown (the panel header says which). */
function queueFigures(qo, sums) {
  const q = schedQueue(qo.metadata.name);
  const g = (x) => (x && num(x.gpu) !== null ? x.gpu : x && x.gpu === null ? -1 : null);
  const specQuota = get(qo, "spec", "resources", "gpu", "quota");
  return {
    fromServer: !!q,
    quota: q ? g(q.quota) : num(specQuota),
    limit: q ? g(q.limit) : null,
    fair: q ? g(q.fairShare) : null,
    allocated: q ? g(q.allocated) : (sums ? sums.allocated : 0),
    requested: q ? g(q.requested) : (sums ? sums.requested : 0),
    pending: q ? q.pendingJobs : (sums ? sums.pending : 0),
    parent: get(qo, "spec", "parentQueue") || (q && q.parent) || null,
  };
}

/* One bar per queue, all on one scale (the largest figure of any queue),
 * in one grid so every bar is the same width: a bar's length compares
 * across rows. The tree is depth-first with indented names. */
function renderQueues() {
  const D = state.derived;
  const box = $("queues");
  const qs = [...state.objs.queues.values()];
  const figs = qs.map((qo) => [qo.metadata.name, queueFigures(qo, D && D.queues.get(qo.metadata.name))]);
  const byName = new Map(figs);
  const depth = (name, seen = 0) => {
    const f = byName.get(name);
    return f && f.parent && byName.has(f.parent) && seen < 16 ? 1 + depth(f.parent, seen + 1) : 0;
  };
  const path = (name, seen = 0) => {
    const f = byName.get(name);
    return (f && f.parent && byName.has(f.parent) && seen < 16 ? path(f.parent, seen + 1) + "\u0000" : "") + name;
  };
  figs.sort((a, b) => (path(a[0]) < path(b[0]) ? -1 : 1));
  let max = 0;
  for (const [, f] of figs)
    for (const v of [f.quota, f.fair, f.allocated, f.requested]) if (v != null && v > max) max = v;
  max = max || 1;
  const server = figs.some(([, f]) => f.fromServer);
  $("queue-source").textContent = !figs.length ? "no queues visible to this token" :
    server ? "the scheduler's last cycle · one scale: " + fmt(max) + " GPUs is a full bar"
           : "no scheduler figures yet: quota from the spec, allocated/requested summed from jobs, fair share unknown";
  box.dataset.scale = max;
  const frag = document.createDocumentFragment();
  for (const [name, f] of figs) {
    const row = document.createElement("div");
    row.className = "qrow";
    row.dataset.queue = name;
    const nm = document.createElement("span");
    nm.className = "qname";
    nm.style.paddingLeft = depth(name) * 12 + "px";
    nm.textContent = name;
    nm.title = name;
    const bar = document.createElement("div");
    bar.className = "qbar";
    const pct = (v) => Math.max(0, Math.min(100, (100 * v) / max)) + "%";
    const add = (cls, style) => { const e = document.createElement("div"); e.className = cls; Object.assign(e.style, style); bar.appendChild(e); };
    add("req", { width: pct(f.requested || 0) });
    add("alloc", { width: pct(f.allocated || 0) });
    if (f.quota != null && f.quota >= 0) add("quota", { left: pct(f.quota) });
    if (f.fair != null && f.fair >= 0) add("fair", { left: pct(f.fair) });
    const nums = document.createElement("span");
    nums.className = "qnums";
    nums.textContent = `alloc ${fmt(f.allocated)} / req ${fmt(f.requested)} · quota ${fmt(f.quota)}` +
      (f.limit != null && f.limit >= 0 ? ` · limit ${fmt(f.limit)}` : "") + ` · fair ${fmt(f.fair)}` +
      (f.pending ? ` · ${f.pending} pending` : "");
    row.append(nm, bar, nums);
    frag.appendChild(row);
  }
  box.replaceChildren(frag);
}

/* ---- pending jobs ---- */

function statusReason(j) {
  const st = j.status || {};
  for (const k of ["pendingReason", "reason", "message"]) if (typeof st[k] === "string" && st[k]) return st[k];
  for (const c of st.conditions || []) if (c && c.message) return c.message;
  return null;
}

/* Asks /explain for the first EXPLAIN_MAX pending jobs (one call at a time,
 * again only when the job's resourceVersion changed). */
function explainSome(pending) {
  for (const p of pending.slice(0, EXPLAIN_MAX)) {
    if (state.explainBusy >= 1) return;
    const rv = p.job.metadata.resourceVersion;
    const have = state.explain.get(p.name);
    if (have && (have.rv === rv || performance.now() - have.at < 5000)) continue;
    state.explainBusy++;
    const gen = state.generation;
    api("jobs/" + encodeURIComponent(p.name) + "/explain")
      .then(async (res) => {
        let text = null;
        if (res.ok) {
          const ct = res.headers.get("content-type") || "";
          if (ct.includes("json")) {
            const doc = await res.json();
            text = doc.reason || doc.message || get(doc, "status", "reason") || JSON.stringify(doc);
          } else text = (await res.text()).trim();
        }
        if (gen === state.generation) state.explain.set(p.name, { rv, text, at: performance.now() });
      })
      .catch(() => {})
      .finally(() => { state.explainBusy--; markDirty("pending"); });
  }
}

function renderPending() {
  const D = state.derived;
  const box = $("pending");
  const all = D ? D.pending : [];
  const pending = all.filter(jobShown);
  $("pending-count").textContent = pending.length + " pending" +
    (pending.length !== all.length ? ` (of ${all.length})` : "");
  explainSome(pending);
  const frag = document.createDocumentFragment();
  for (const p of pending.slice(0, 200)) {
    const row = document.createElement("div");
    row.className = "pjob";
    row.dataset.job = p.name;
    const ex = state.explain.get(p.name);
    const reason = (ex && ex.text) || statusReason(p.job);
    const head = document.createElement("div");
    const link = document.createElement("a");
    link.href = "#job/" + encodeURIComponent(p.name);
    link.textContent = p.name;
    head.append(link, `  · queue ${p.queue} · ${p.holding}/${p.total} pods running`);
    const r = document.createElement("div");
    r.className = "reason";
    r.textContent = reason || "no reason reported by the server yet";
    if (!reason) r.classList.add("muted");
    row.append(head, r);
    frag.appendChild(row);
  }
  if (pending.length > 200) {
    const more = document.createElement("div");
    more.className = "muted";
    more.textContent = `… and ${pending.length - 200} more (oldest shown first)`;
    frag.appendChild(more);
  }
  box.replaceChildren(frag);
}

/* ---- running jobs (virtualised) ---- */

const runBox = $("running");
runBox.addEventListener("scroll", () => markDirty("running"), { passive: true });

function renderRunning() {
  const D = state.derived;
  const all = D ? D.running : [];
  const rows = all.filter(jobShown);
  $("running-count").textContent = rows.length + " running" +
    (rows.length !== all.length ? ` (of ${all.length})` : "");
  const spacer = runBox.firstElementChild;
  /* Read the scroll position before writing, so there is one layout. */
  const top = runBox.scrollTop, h = runBox.clientHeight || 300;
  spacer.style.height = rows.length * ROW_PX + "px";
  const i0 = Math.floor(top / ROW_PX), i1 = Math.min(rows.length, Math.ceil((top + h) / ROW_PX) + 1);
  const frag = document.createDocumentFragment();
  frag.appendChild(spacer);
  for (let i = i0; i < i1; i++) {
    const r = rows[i];
    const el = document.createElement("div");
    el.className = "vrow";
    el.style.top = i * ROW_PX + "px";
    el.dataset.job = r.name;
    [r.name, r.queue, r.holding + "/" + r.total, fmt(r.gpus), r.nodes.join(", ")].forEach((t, k) => {
      const s = document.createElement(k === 0 ? "a" : "span");
      if (k === 0) s.href = "#job/" + encodeURIComponent(r.name);
      s.textContent = t;
      s.title = t;
      el.appendChild(s);
    });
    frag.appendChild(el);
  }
  runBox.replaceChildren(frag);
}

/* ---- deployments ---- */

/* Deployments: versions and readiness from status.endpoints (one per
 * replica, as the gateway reads them), the rollout from status.rollout or
 * the server's /rollout subresource (the gateway reports a finished rollout
 * there: outcome, canaryErrorRate); what the server does not report is "–". */
/* Deployments: versions and readiness from status.endpoints (one per
 * replica, as the gateway reads them); the rollout from the server's
 * GET /deployments/{name}/rollout, whose document nests it under "rollout"
 * (or status.rollout): weights {version: percent}, phase, step, reason, and
 * the evidence the gateways reported for the step (requests, errors). */
function deploymentRow(d) {
  const st = d.status || {};
  const doc = state.rollouts.get(d.metadata.name);
  const ro = (doc && doc.rollout) || st.rollout || {};
  const eps = Array.isArray(st.endpoints) ? st.endpoints : [];
  const byVer = new Map();
  for (const e of eps) {
    const v = String(e.version ?? get(d, "spec", "version") ?? "?");
    if (!byVer.has(v)) byVer.set(v, { n: 0, ready: 0, weight: 0 });
    const x = byVer.get(v);
    x.n++;
    if (e.ready !== false) { x.ready++; x.weight += num(e.weight) ?? 1; }
  }
  const versions = byVer.size
    ? [...byVer].map(([v, x]) => `v${v} ${x.ready}/${x.n} ready`).join(", ")
    : "v" + (get(d, "spec", "version") ?? "?");
  let split = "–";
  const ws = ro.weights && typeof ro.weights === "object" ? Object.entries(ro.weights) : [];
  if (ws.length)
    split = ws.map(([v, pct]) => `v${v} ${num(pct) ?? "?"}%`).join(" / ");
  else if (byVer.size) {
    const total = [...byVer.values()].reduce((s, x) => s + x.weight, 0);
    if (total > 0)
      split = [...byVer].map(([v, x]) => `v${v} ${Math.round(100 * x.weight / total)}%`).join(" / ") +
        " (by replica weight)";
  }
  const ev = ro.evidence || {};
  const er = num(ev.requests) ? num(ev.errors) / ev.requests : null;
  const err = er === null ? "–" : (100 * er).toFixed(1) + " %" +
    (ro.canary != null ? ` (v${ro.canary}, ${ev.requests} requests)` : "");
  const phase = ro.phase || null;
  const steps = Array.isArray(ro.steps) ? ro.steps : null;
  const rollout = phase ? phase + (ro.canary != null ? ` v${ro.stable ?? "?"} → v${ro.canary}` : "") +
    (steps && ro.step != null && ro.canary != null ? ` step ${ro.step + 1}/${steps.length}` : "") +
    (ro.reason ? ": " + ro.reason : "") : "no rollout status from the server";
  const running = jobPods(d).filter((p) => HOLDING.has(p.phase)).length;
  /* An autoscaled Deployment runs the autoscaler's count (docs/AUTOSCALING.md). */
  const as = get(d, "spec", "autoscaling");
  const want = as ? (get(d, "status", "autoscaling", "replicas") ?? as.minReplicas ?? 1)
                  : get(d, "spec", "replicas");
  const range = as ? ` (autoscaled ${as.minReplicas ?? 1}–${as.maxReplicas ?? "?"})` : "";
  return [d.metadata.name, get(d, "spec", "model") || "–", versions,
          `${running}/${want ?? "–"}` + range + (st.phase ? " " + st.phase : ""),
          split, err, rollout];
}

function renderDeployments() {
  const ft = state.filter.text.toLowerCase();
  const deps = [...state.objs.deployments.values()]
    .filter((d) => (!ft || d.metadata.name.toLowerCase().includes(ft) ||
                    (get(d, "spec", "model") || "").toLowerCase().includes(ft)) &&
                   (!state.filter.queue || get(d, "spec", "queue") === state.filter.queue))
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
  $("deploy-count").textContent = deps.length + " deployments";
  const box = $("deployments");
  if (!deps.length) { box.textContent = "none visible to this token"; return; }
  const t = document.createElement("table");
  t.innerHTML = "<tr><th>name</th><th>model</th><th>versions</th><th>replicas running</th>" +
    "<th>traffic split</th><th>error rate</th><th>rollout</th></tr>";
  for (const d of deps.slice(0, 500)) {
    const tr = document.createElement("tr");
    tr.dataset.deployment = d.metadata.name;
    deploymentRow(d).forEach((v, k) => {
      const td = document.createElement("td");
      td.textContent = v;
      td.className = ["name", "model", "versions", "replicas", "split", "errors", "rollout"][k];
      tr.appendChild(td);
    });
    t.appendChild(tr);
  }
  box.replaceChildren(t);
}

/* ---- live events ---- */

function eventText(e) {
  const o = e.obj, md = o.metadata || {};
  if (e.kind === "events") {
    const inv = o.involvedObject || o.regarding || {};
    const what = inv.kind ? `${inv.kind}/${inv.name}` : "";
    return { cls: "EVENT", text: `${o.type || "Event"} ${o.reason || ""} ${what} ${o.message || ""}`.replace(/\s+/g, " ").trim() };
  }
  const kind = o.kind || e.kind;
  let extra = "";
  if (e.kind === "jobs" && e.type !== "DELETED") {
    const pods = jobPods(o);
    const run = pods.filter((p) => HOLDING.has(p.phase)).length;
    extra = ` (${run}/${jobReplicas(o)} running)`;
  }
  return { cls: e.type, text: `${e.type} ${kind}/${md.name}${extra}` };
}

function drainEvents() {
  const list = $("events");
  const batch = state.pendingEvents.splice(0, EVENTS_PER_FRAME);
  if (!batch.length) return;
  const frag = document.createDocumentFragment();
  for (let i = batch.length - 1; i >= 0; i--) {
    const e = batch[i];
    const { cls, text } = eventText(e);
    const li = document.createElement("li");
    const t = document.createElement("span");
    t.className = "t";
    t.textContent = e.at.toLocaleTimeString();
    const s = document.createElement("span");
    s.className = cls;
    s.textContent = text;
    li.append(t, s);
    li.dataset.kind = e.kind;
    li.dataset.name = (e.obj.metadata || {}).name || "";
    frag.appendChild(li);
  }
  list.insertBefore(frag, list.firstChild);
  while (list.childElementCount > EVENTS_MAX) list.lastElementChild.remove();
  state.eventCount += batch.length;
  $("event-count").textContent = state.eventCount + " received";
  if (state.pendingEvents.length) schedule();
}

/* ------------------------------------------------------------ start */

$("login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  login($("token").value.trim());
});
$("logout").addEventListener("click", () => logout(""));
if (state.token) login(state.token);
else showLogin("");
