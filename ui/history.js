/* History charts: per-queue allocated GPUs and pending jobs over the last
 * hour, from the server's own short history (GET /api/v1/scheduler/history:
 * a sample per 10 s of scheduling cycles, kept in the server's memory; a
 * tenant gets its own queues). Polled every 10 s for the samples after the
 * last one held. Two canvases, a line per leaf queue (parents would count
 * their children twice), the cluster's allocated and total GPUs dashed on
 * the first. Loaded before app.js; runs only when app.js calls it. */
"use strict";

const HISTORY_MS = 10000, HISTORY_MAX = 360;
const PALETTE = ["#3b82f6", "#f59e0b", "#a855f7", "#34d399", "#ef4444", "#22d3ee", "#eab308",
                 "#ec4899", "#84cc16", "#f97316", "#60a5fa", "#c084fc"];

const hist = { samples: [], since: 0, colors: new Map() };

function historyReset() {
  hist.samples = [];
  hist.since = 0;
  hist.colors.clear();
}

async function pollHistory(gen) {
  state.history = hist; /* for the console and the UI tests */
  while (gen === state.generation) {
    try {
      const doc = await apiJSON("scheduler/history" + (hist.since ? "?since=" + hist.since : ""));
      for (const s of doc.samples || []) {
        hist.samples.push(s);
        hist.since = Math.max(hist.since, s.unix || 0);
      }
      if (hist.samples.length > HISTORY_MAX) hist.samples.splice(0, hist.samples.length - HISTORY_MAX);
      markDirty("history");
    } catch (e) { /* kept as it was; the next poll tries again */ }
    await sleep(HISTORY_MS);
  }
}

/* Leaf queues seen in the samples (a queue with a child in the queue list
 * is a parent), each with a stable colour. */
function historyQueues() {
  const parents = new Set();
  for (const q of state.objs.queues.values()) {
    const p = get(q, "spec", "parentQueue");
    if (p) parents.add(p);
  }
  const names = new Set();
  for (const s of hist.samples) for (const q of Object.keys(s.queues || {})) names.add(q);
  const out = [...names].filter((q) => !parents.has(q)).sort();
  for (const q of out)
    if (!hist.colors.has(q)) hist.colors.set(q, PALETTE[hist.colors.size % PALETTE.length]);
  return out;
}

function sizeCanvas(c) {
  const dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth || 400, h = c.clientHeight || 160;
  if (c.width !== Math.floor(w * dpr)) { c.width = Math.floor(w * dpr); c.height = Math.floor(h * dpr); }
  const g = c.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  return { g, w, h };
}

const hhmm = (t) => new Date(t * 1000).toTimeString().slice(0, 5);

/* One chart: series [{name, color, dash, values[]}] over the samples. */
function drawChart(c, series, unit) {
  const { g, w, h } = sizeCanvas(c);
  const L = 36, R = 8, T = 8, B = 18;
  const n = hist.samples.length;
  let max = 1;
  for (const s of series) for (const v of s.values) if (v > max) max = v;
  g.strokeStyle = "#2a333c";
  g.fillStyle = "#8894a0";
  g.font = "10px system-ui, sans-serif";
  g.beginPath();
  g.moveTo(L, T); g.lineTo(L, h - B); g.lineTo(w - R, h - B);
  g.stroke();
  g.fillText(String(Math.round(max * 100) / 100), 2, T + 8);
  g.fillText("0", 2, h - B);
  g.fillText(unit, 2, (h - B + T) / 2);
  if (n) {
    g.fillText(hhmm(hist.samples[0].unix), L, h - 4);
    const last = hhmm(hist.samples[n - 1].unix);
    g.fillText(last, w - R - g.measureText(last).width, h - 4);
  }
  const x = (i) => L + (n > 1 ? (i * (w - L - R)) / (n - 1) : (w - L - R) / 2);
  const y = (v) => h - B - (v / max) * (h - B - T);
  for (const s of series) {
    g.strokeStyle = s.color;
    g.fillStyle = s.color;
    g.lineWidth = 1.5;
    g.setLineDash(s.dash ? [4, 3] : []);
    g.beginPath();
    s.values.forEach((v, i) => (i ? g.lineTo(x(i), y(v)) : g.moveTo(x(i), y(v))));
    g.stroke();
    if (n === 1) { g.beginPath(); g.arc(x(0), y(s.values[0]), 2.5, 0, 7); g.fill(); }
  }
  g.setLineDash([]);
  c.dataset.series = series.length;
  c.dataset.samples = n;
  c.dataset.max = max;
}

function drawHistory() {
  const qs = historyQueues();
  const pick = (key) => qs.map((q) => ({ name: q, color: hist.colors.get(q),
    values: hist.samples.map((s) => (s.queues && s.queues[q] ? s.queues[q][key] || 0 : 0)) }));
  const alloc = pick("allocated");
  alloc.push({ name: "cluster allocated", color: "#dde3ea", dash: true,
               values: hist.samples.map((s) => s.allocatedGpus || 0) });
  if (state.who && state.who.role !== "tenant")
    alloc.push({ name: "cluster GPUs", color: "#6b7280", dash: true,
                 values: hist.samples.map((s) => s.gpus || 0) });
  drawChart($("hist-alloc"), alloc, "GPUs");
  drawChart($("hist-pending"), pick("pending"), "jobs");
  const legend = $("hist-legend");
  const frag = document.createDocumentFragment();
  for (const s of alloc) {
    const e = document.createElement("span");
    e.dataset.queue = s.name;
    const sw = document.createElement("i");
    sw.className = "sw";
    sw.style.background = s.color;
    e.append(sw, s.name);
    frag.appendChild(e);
  }
  legend.replaceChildren(frag);
  $("history-summary").textContent = hist.samples.length
    ? `${hist.samples.length} samples, one per ${HISTORY_MS / 1000} s of cycles (the server keeps an hour)`
    : "no samples yet (the server records one per 10 s of scheduling cycles)";
}
