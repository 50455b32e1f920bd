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
  queueMetrics: null,     /* queue -> figures from /metrics */
  clusterGpus: {},        /* {total, allocated} from /metrics */
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

/* The scheduler's per-queue figures from the server's own /metrics
 * (starcloud_queue_{quota,fair_share,allocated,requested}_gpus), used for
 * the queues this token can list; queue objects carry no status. */
async function pollQueueMetrics(gen) {
  const re = /^starcloud_queue_(quota|fair_share|allocated|requested)_gpus\{queue="([^"]*)"\} (\S+)$/;
  while (gen === state.generation) {
    try {
      const res = await fetch("/metrics");
      if (res.ok) {
        const m = new Map();
        for (const line of (await res.text()).split("\n")) {
          const c = /^starcloud_cluster_(allocated_)?gpus (\S+)$/.exec(line);
          if (c) state.clusterGpus[c[1] ? "allocated" : "total"] = parseFloat(c[2]);
          const x = re.exec(line);
          if (!x) continue;
          if (!m.has(x[2])) m.set(x[2], {});
          m.get(x[2])[x[1]] = parseFloat(x[3]);
        }
        state.queueMetrics = m;
        markDirty("queuesView");
        markDirty("gpu");
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
  pollQueueMetrics(gen);
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

/* The node order and device offsets: rebuilt (one sort) only when the set
 * of nodes or a device count changes, not when a node's status does. */
function topology(prev) {
  const objs = state.objs.nodes;
  if (prev && prev.nodes.length === objs.size) {
    let same = true;
    const nodes = prev.nodes.slice();
    for (let i = 0; i < nodes.length && same; i++) {
      const o = objs.get(nodes[i].metadata.name);
      if (!o || gpuCount(o) !== prev.off[i + 1] - prev.off[i]) same = false;
      else nodes[i] = o;
    }
    if (same) return Object.assign({}, prev, { nodes });
  }
  const nodes = [...objs.values()].sort((a, b) =>
    a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0);
  const index = new Map();
  const off = new Int32Array(nodes.length + 1);
  const mem = new Float64Array(nodes.length);
  let maxCount = 1;
  nodes.forEach((n, i) => {
    index.set(n.metadata.name, i);
    const c = gpuCount(n);
    maxCount = Math.max(maxCount, c);
    off[i + 1] = off[i] + c;
    mem[i] = parseBytes(get(n, "spec", "gpus", "memory")) || 0;
  });
  return { nodes, index, off, mem, maxCount };
}

function gpuCount(n) {
  return Math.max(0, Math.min(64, get(n, "spec", "gpus", "count") | 0));
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
                whole: 0, shared: 0, mig: 0, free: 0, releasing: 0 };
  T.nodes.forEach((n, i) => {
    if (get(n, "status", "ready") === false) sum.notReady++;
    if (get(n, "spec", "unschedulable")) sum.cordoned++;
    sum.reserved += reserved[i];
  });
  for (let k = 0; k < ndev; k++) {
    sum.releasing += rel[k];
    if (whole[k]) sum.whole++;
    else if (mig[k]) sum.mig++;
    else if (share[k]) sum.shared++;
    else sum.free++;
  }
  state.derived = Object.assign(T, { whole, share, mig, rel, reserved, queues, running, pending, sum });
  state.derivedAt = performance.now();
  state.podsOn = null; /* describeNode's cache */
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
  if (todo.has("queuesView") || (derived && todo.has("queues"))) renderQueues();
  if (todo.has("pending")) renderPending();
  if (todo.has("running")) renderRunning();
  if (derived && todo.has("deployments")) renderDeployments();
  if (todo.has("nodepools")) renderPools();
  drainEvents();
}

/* ---- GPU map (canvas) ---- */

const canvas = $("gpu-canvas");
const ctx = canvas.getContext("2d");
const scroller = $("gpu-scroll");
const COLORS = {};
function colors() {
  const cs = getComputedStyle(document.documentElement);
  for (const k of ["free", "whole", "shared", "mig", "releasing", "reserved", "notready", "cordoned"])
    COLORS[k] = cs.getPropertyValue("--" + k).trim();
}

function layout() {
  const D = state.derived;
  const n = D ? D.nodes.length : 0;
  /* Bigger cells for small clusters; 8 px keeps 10,000 nodes scrollable. */
  const cell = n <= 64 ? 16 : n <= 1000 ? 12 : 8;
  const perNode = Math.max(1, Math.min(16, D ? D.maxCount : 8));
  const nodeW = perNode * (cell + CELL_GAP) + NODE_GAP;
  const width = scroller.clientWidth || 800;
  const cols = Math.max(1, Math.floor((width - 4) / nodeW));
  const rowsPerNode = D ? Math.ceil(D.maxCount / perNode) || 1 : 1;
  const nodeH = rowsPerNode * (cell + CELL_GAP) + ROW_GAP;
  return { cell, perNode, nodeW, cols, nodeH, width, rowsPerNode };
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

/* Draws the rows of nodes inside the scroll window only. */
function drawGpus() {
  const D = state.derived;
  if (!D) return;
  if (!COLORS.free) colors();
  const L = layout();
  const rows = Math.ceil(D.nodes.length / L.cols);
  $("gpu-spacer").style.height = rows * L.nodeH + "px";
  const want = Math.max(60, Math.min(360, rows * L.nodeH + 6)) + "px";
  if (scroller.style.height !== want) { scroller.style.height = want; resizeCanvas(); return; }
  const top = scroller.scrollTop, h = scroller.clientHeight || 360;
  ctx.clearRect(0, 0, L.width, h);
  const r0 = Math.floor(top / L.nodeH), r1 = Math.min(rows, Math.ceil((top + h) / L.nodeH));
  drawNodes(D, L, r0, r1, top);
  const s = D.sum;
  $("gpu-summary").textContent =
    `${s.nodes} nodes (${s.notReady} not ready, ${s.cordoned} cordoned, ${s.reserved} reserved) · ` +
    `${s.gpus} GPUs: ${s.whole} whole, ${s.shared} shared, ${s.mig} MIG, ${s.free} free` +
    (s.releasing ? `, ${s.releasing} releasing` : "") +
    /* A tenant cannot list other queues' jobs, so their devices look free
     * on the map; say so, with the server's cluster-wide figure. */
    (state.who && state.who.role === "tenant" && state.clusterGpus.total != null
      ? ` · cluster-wide ${fmt(state.clusterGpus.allocated)} of ${fmt(state.clusterGpus.total)} allocated` +
        " (other queues' pods are not shown to this token)" : "");
  scroller.dataset.nodes = s.nodes;
  scroller.dataset.gpus = s.gpus;
}

/* Cells are collected per colour and each colour filled once, so a frame
 * costs a few fill() calls however many nodes are visible. */
function drawNodes(D, L, r0, r1, top) {
  const CELL = L.cell;
  const w = L.perNode * (CELL + CELL_GAP) - CELL_GAP;
  const h = L.rowsPerNode * (CELL + CELL_GAP) - CELL_GAP;
  const paths = {};
  const rect = (color, x, y, rw, rh) => (paths[color] || (paths[color] = [])).push(x, y, rw, rh);
  const outlines = [];
  for (let r = r0; r < r1; r++) {
    for (let c = 0; c < L.cols; c++) {
      const i = r * L.cols + c;
      if (i >= D.nodes.length) break;
      const x = 2 + c * L.nodeW, y = r * L.nodeH - top + 2;
      const n = D.nodes[i];
      const notReady = get(n, "status", "ready") === false;
      const cordoned = !!get(n, "spec", "unschedulable");
      const base = D.off[i], count = D.off[i + 1] - base;
      for (let k = 0; k < count; k++) {
        const dv = base + k;
        const cx = x + (k % L.perNode) * (CELL + CELL_GAP);
        const cy = y + Math.floor(k / L.perNode) * (CELL + CELL_GAP);
        const busy = D.rel[dv] ? "releasing" : null;
        if (D.whole[dv]) { rect(busy || "whole", cx, cy, CELL, CELL); continue; }
        rect(cordoned ? "cordoned" : "free", cx, cy, CELL, CELL);
        if (D.mig[dv]) {
          /* seven compute slices stacked bottom-up */
          for (let s = 0; s < 7; s++) {
            if (!(D.mig[dv] & (1 << s))) continue;
            const y0 = cy + CELL - Math.round((s + 1) * CELL / 7);
            rect(busy || "mig", cx, y0, CELL, Math.max(1, Math.round(CELL / 7)));
          }
        } else if (D.share[dv]) {
          const fh = Math.max(1, Math.round(CELL * D.share[dv] / 1000));
          rect(busy || "shared", cx, cy + CELL - fh, CELL, fh);
        }
      }
      if (D.reserved[i] || notReady || i === state.selected || i === state.hover)
        outlines.push(notReady ? "notready" : D.reserved[i] ? "reserved" : "highlight", x, y);
    }
  }
  for (const color in paths) {
    const a = paths[color];
    ctx.fillStyle = COLORS[color];
    ctx.beginPath();
    for (let k = 0; k < a.length; k += 4) ctx.rect(a[k], a[k + 1], a[k + 2], a[k + 3]);
    ctx.fill();
  }
  ctx.lineWidth = 1.5;
  for (let k = 0; k < outlines.length; k += 3) {
    ctx.strokeStyle = outlines[k] === "highlight" ? "#fff" : COLORS[outlines[k]];
    ctx.strokeRect(outlines[k + 1] - 1.5, outlines[k + 2] - 1.5, w + 3, h + 3);
  }
}

function nodeAt(ev) {
  const D = state.derived;
  if (!D) return -1;
  const L = layout();
  const rect = canvas.getBoundingClientRect();
  const x = ev.clientX - rect.left - 2, y = ev.clientY - rect.top + scroller.scrollTop - 2;
  const c = Math.floor(x / L.nodeW), r = Math.floor(y / L.nodeH);
  if (c < 0 || c >= L.cols || r < 0 || x - c * L.nodeW > L.nodeW - NODE_GAP) return -1;
  const i = r * L.cols + c;
  return i < D.nodes.length ? i : -1;
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
$("node-find").addEventListener("change", (ev) => {
  const D = state.derived, name = ev.target.value.trim();
  if (!D || !name) return;
  const i = D.index.get(name);
  if (i === undefined) { $("node-detail").textContent = "no node " + name; return; }
  const L = layout();
  scroller.scrollTop = Math.floor(i / L.cols) * L.nodeH;
  state.selected = i;
  $("node-detail").textContent = describeNode(i);
  markDirty("gpu");
});

/* ---- queues ---- */

function fmt(v) {
  if (v == null) return "–";
  if (v < 0) return "∞";
  return Number.isInteger(v) ? String(v) : v.toFixed(2);
}

function metricsStatus(name) {
  const m = state.queueMetrics && state.queueMetrics.get(name);
  if (!m) return {};
  return { quota: m.quota, fairShare: m.fair_share, allocated: m.allocated, requested: m.requested };
}

/* Server-written status (as in `schedule -o json`) when present; otherwise
 * quota from the spec and allocated/requested summed from the jobs. */
function queueFigures(qo, sums) {
  const st = Object.assign({}, metricsStatus(qo.metadata.name), qo.status || {});
  const pick = (x) => (x == null ? null : num(x.gpu) !== null ? x.gpu : num(x) !== null ? x : null);
  const specQuota = get(qo, "spec", "resources", "gpu", "quota");
  const fromServer = st.allocated != null || st.fairShare != null;
  return {
    fromServer,
    quota: pick(st.quota) ?? (num(specQuota) !== null ? specQuota : null),
    fair: pick(st.fairShare),
    allocated: pick(st.allocated) ?? (sums ? sums.allocated : 0),
    requested: pick(st.requested) ?? (sums ? sums.requested : 0),
    pending: sums ? sums.pending : 0,
    parent: get(qo, "spec", "parentQueue") || st.parent || null,
  };
}

function renderQueues() {
  const D = state.derived;
  const box = $("queues");
  const qs = [...state.objs.queues.values()];
  const figs = qs.map((qo) => [qo.metadata.name, queueFigures(qo, D && D.queues.get(qo.metadata.name))]);
  const byName = new Map(figs);
  const depth = (name, seen = 0) => {
    const f = byName.get(name);
    return f && f.parent && seen < 16 ? 1 + depth(f.parent, seen + 1) : 0;
  };
  const path = (name, seen = 0) => {
    const f = byName.get(name);
    return (f && f.parent && seen < 16 ? path(f.parent, seen + 1) + "/" : "") + name;
  };
  figs.sort((a, b) => (path(a[0]) < path(b[0]) ? -1 : 1));
  let max = 0;
  for (const [, f] of figs)
    for (const v of [f.quota, f.fair, f.allocated, f.requested]) if (v != null && v > max) max = v;
  max = max || 1;
  const server = figs.some(([, f]) => f.fromServer);
  $("queue-source").textContent = !figs.length ? "no queues visible to this token" :
    server ? "figures from the scheduler's last cycle"
           : "no scheduler status yet: quota from the spec, allocated/requested summed from jobs, fair share unknown";
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
    if (f.fair != null) add("fair", { left: pct(f.fair) });
    const nums = document.createElement("span");
    nums.className = "qnums";
    nums.textContent = `alloc ${fmt(f.allocated)} / req ${fmt(f.requested)} · quota ${fmt(f.quota)} · fair ${fmt(f.fair)}` +
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
  const pending = D ? D.pending : [];
  $("pending-count").textContent = pending.length + " pending";
  explainSome(pending);
  const frag = document.createDocumentFragment();
  for (const p of pending.slice(0, 200)) {
    const row = document.createElement("div");
    row.className = "pjob";
    row.dataset.job = p.name;
    const ex = state.explain.get(p.name);
    const reason = (ex && ex.text) || statusReason(p.job);
    const head = document.createElement("div");
    head.textContent = `${p.name}  · queue ${p.queue} · ${p.holding}/${p.total} pods running`;
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
  const rows = D ? D.running : [];
  $("running-count").textContent = rows.length + " running";
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
    for (const t of [r.name, r.queue, r.holding + "/" + r.total, fmt(r.gpus), r.nodes.join(", ")]) {
      const s = document.createElement("span");
      s.textContent = t;
      s.title = t;
      el.appendChild(s);
    }
    frag.appendChild(el);
  }
  runBox.replaceChildren(frag);
}

/* ---- deployments ---- */

/* Deployments: versions and readiness from status.endpoints (one per
 * replica, as the gateway reads them), the rollout from status.rollout or
 * the server's /rollout subresource (the gateway reports a finished rollout
 * there: outcome, canaryErrorRate); what the server does not report is "–". */
function deploymentRow(d) {
  const st = d.status || {};
  const ro = state.rollouts.get(d.metadata.name) || st.rollout || {};
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
  const w = num(ro.weight);
  /* The server's rollout status (docs/SERVING.md): weights {version: pct}. */
  const ws = ro.weights && typeof ro.weights === "object" ? Object.entries(ro.weights) : [];
  if (ws.length)
    split = ws.map(([v, pct]) => `v${v} ${num(pct) ?? "?"}%`).join(" / ");
  else if (w !== null && ro.canary != null)
    split = `v${ro.stable ?? st.stableVersion ?? "?"} ${100 - w}% / v${ro.canary} ${w}%`;
  else if (byVer.size) {
    const total = [...byVer.values()].reduce((s, x) => s + x.weight, 0);
    if (total > 0)
      split = [...byVer].map(([v, x]) => `v${v} ${Math.round(100 * x.weight / total)}%`).join(" / ") +
        " (by replica weight)";
  }
  /* Per-version analysis windows reported by the gateway: analysis {version: {errorRate}}. */
  const an = ro.analysis && ro.canary != null ? ro.analysis[String(ro.canary)] : null;
  const er = num(an && an.errorRate) ?? num(ro.canaryErrorRate) ?? num(ro.errorRate) ??
    num(st.errorRate);
  const err = er === null ? "–" : (100 * er).toFixed(1) + " %" + (ro.canary != null ? ` (v${ro.canary})` : "");
  const phase = ro.outcome || ro.state || ro.phase || null;
  const rollout = phase ? phase + (ro.step != null ? ` step ${ro.step}` : "") +
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
  const deps = [...state.objs.deployments.values()].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
  $("deploy-count").textContent = deps.length + " deployments";
  const box = $("deployments");
  if (!deps.length) { box.textContent = "none visible to this token"; return; }
  const t = document.createElement("table");
  t.innerHTML = "<tr><th>name</th><th>model</th><th>versions</th><th>replicas running</th>" +
    "<th>traffic split</th><th>error rate</th><th>rollout</th></tr>";
  for (const d of deps.slice(0, 500)) {
    const tr = document.createElement("tr");
    tr.dataset.deployment = d.metadata.name;
    for (const v of deploymentRow(d)) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    }
    t.appendChild(tr);
  }
  box.replaceChildren(t);
}

/* ---- node pools ---- */

const POOL_POINTS = 1200; /* an hour of 3 s polls */

/* Each poll adds a point per pool: its size over time since the page
 * opened (Grafana's Cluster dashboard keeps the long history from
 * starcloud_nodepool_nodes). */
function recordPools() {
  const t = Date.now();
  for (const p of state.objs.nodepools.values()) {
    const st = p.status || {};
    const h = state.poolHistory.get(p.metadata.name) || [];
    h.push({ t, members: num(st.members) ?? 0, requested: num(st.requested) ?? 0 });
    if (h.length > POOL_POINTS) h.shift();
    state.poolHistory.set(p.metadata.name, h);
  }
  markDirty("nodepools");
}

/* A small SVG line of members (solid) and members + requested (dashed). */
function sparkline(h, max) {
  const W = 160, H = 28, NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  svg.setAttribute("class", "spark");
  if (h.length < 2 || max <= 0) return svg;
  const t0 = h[0].t, span = Math.max(1, h[h.length - 1].t - t0);
  for (const [key, dash] of [["total", "3,2"], ["members", ""]]) {
    const pts = h.map((x) => {
      const v = key === "total" ? x.members + x.requested : x.members;
      return `${((x.t - t0) / span * (W - 2) + 1).toFixed(1)},${(H - 1 - v / max * (H - 2)).toFixed(1)}`;
    });
    const line = document.createElementNS(NS, "polyline");
    line.setAttribute("points", pts.join(" "));
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", "#2f6fdf");
    if (dash) line.setAttribute("stroke-dasharray", dash);
    svg.appendChild(line);
  }
  return svg;
}

function renderPools() {
  const pools = [...state.objs.nodepools.values()].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
  $("pool-count").textContent = pools.length + " pools";
  const box = $("nodepools");
  if (!pools.length) { box.textContent = "no node pool"; return; }
  const t = document.createElement("table");
  t.innerHTML = "<tr><th>pool</th><th>nodes</th><th>GPUs</th><th>requested</th><th>removing</th>" +
    "<th>waiting jobs</th><th>limits</th><th>size since page opened</th></tr>";
  for (const p of pools.slice(0, 100)) {
    const sp = p.spec || {}, st = p.status || {};
    const lim = `${sp.minNodes ?? 0}${sp.minGPUs ? "/" + sp.minGPUs + " GPUs" : ""} – ` +
      `${sp.maxNodes ?? "∞"}${sp.maxGPUs != null ? "/" + sp.maxGPUs + " GPUs" : ""}`;
    const tr = document.createElement("tr");
    tr.dataset.pool = p.metadata.name;
    for (const v of [p.metadata.name, st.members ?? 0, st.gpus ?? 0, st.requested ?? 0,
                     st.removing ?? 0, st.waitingJobs ?? 0, lim]) {
      const td = document.createElement("td");
      td.textContent = String(v);
      tr.appendChild(td);
    }
    const h = state.poolHistory.get(p.metadata.name) || [];
    const max = Math.max(1, num(sp.maxNodes) ?? 0, ...h.map((x) => x.members + x.requested));
    const td = document.createElement("td");
    td.appendChild(sparkline(h, max));
    tr.appendChild(td);
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
