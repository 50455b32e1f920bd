/* The GPU map: one canvas, nodes grouped by zone, rack or GPU model (the
 * group-by choice), each group under a header that names it and counts its
 * nodes and GPUs in use; node names under the blocks while the cells are
 * big enough to read them (up to 1,000 nodes; beyond, hover shows them).
 *
 * Only the rows inside the scroll window are drawn. The map's rows (group
 * headers and rows of nodes) are laid out once per change of the node set,
 * the grouping or the width, in flat arrays, and found again by binary
 * search when drawing or hovering. Loaded before app.js; everything here
 * runs only when app.js calls it. */
"use strict";

const HEADER_PX = 18, NAME_PX = 12;

/* The group a node belongs to for the current group-by (zone, rack,
 * zone/rack, model, none). */
function groupKey(n, by) {
  const l = get(n, "metadata", "labels") || {};
  const model = get(n, "spec", "gpus", "model") || "no GPU";
  switch (by) {
  case "zone": return "zone " + (l.zone || "(none)");
  case "rack": return "rack " + (l.rack || "(none)");
  case "zone/rack": return "zone " + (l.zone || "(none)") + " · rack " + (l.rack || "(none)");
  case "model": return model;
  default: return "";
  }
}

/* The node order, device offsets and groups: rebuilt (one sort) only when
 * the set of nodes, a device count or the grouping changes, not when a
 * node's status does. */
function topology(prev) {
  const objs = state.objs.nodes, by = state.groupBy;
  if (prev && prev.groupBy === by && prev.nodes.length === objs.size) {
    let same = true;
    const nodes = prev.nodes.slice();
    for (let i = 0; i < nodes.length && same; i++) {
      const o = objs.get(nodes[i].metadata.name);
      if (!o || gpuCount(o) !== prev.off[i + 1] - prev.off[i] ||
          groupKey(o, by) !== prev.keys[i]) same = false;
      else nodes[i] = o;
    }
    if (same) return Object.assign({}, prev, { nodes });
  }
  const keyed = [...objs.values()].map((n) => [groupKey(n, by), n.metadata.name, n]);
  keyed.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  const nodes = keyed.map((k) => k[2]), keys = keyed.map((k) => k[0]);
  const index = new Map();
  const off = new Int32Array(nodes.length + 1);
  const mem = new Float64Array(nodes.length);
  const groups = []; /* {key, start, count} over nodes */
  let maxCount = 1;
  nodes.forEach((n, i) => {
    index.set(n.metadata.name, i);
    const c = gpuCount(n);
    maxCount = Math.max(maxCount, c);
    off[i + 1] = off[i] + c;
    mem[i] = parseBytes(get(n, "spec", "gpus", "memory")) || 0;
    if (!groups.length || groups[groups.length - 1].key !== keys[i])
      groups.push({ key: keys[i], start: i, count: 0 });
    groups[groups.length - 1].count++;
  });
  return { nodes, keys, groups, groupBy: by, index, off, mem, maxCount };
}

function gpuCount(n) {
  return Math.max(0, Math.min(64, get(n, "spec", "gpus", "count") | 0));
}

function layout() {
  const D = state.derived;
  const n = D ? D.nodes.length : 0;
  /* Bigger cells for small clusters; 8 px keeps 10,000 nodes scrollable. */
  const cell = n <= 64 ? 16 : n <= 1000 ? 12 : 8;
  const perNode = Math.max(1, Math.min(16, D ? D.maxCount : 8));
  const names = cell >= 12;
  const blockW = perNode * (cell + CELL_GAP) - CELL_GAP;
  /* With names shown, a block is at least as wide as a short name. */
  const nodeW = Math.max(blockW, names ? 64 : 0) + NODE_GAP;
  const width = scroller.clientWidth || 800;
  const cols = Math.max(1, Math.floor((width - 4) / nodeW));
  const rowsPerNode = D ? Math.ceil(D.maxCount / perNode) || 1 : 1;
  const nodeH = rowsPerNode * (cell + CELL_GAP) + ROW_GAP + (names ? NAME_PX : 0);
  return { cell, perNode, nodeW, blockW, cols, nodeH, width, rowsPerNode, names };
}

/* The map's rows top to bottom: y, height, and either a group header
 * (group index, first < 0) or a row of nodes (its first node, end of its
 * group). Cached per derived state and layout. */
function mapRows(D, L) {
  const key = L.cols + "/" + L.nodeH + "/" + D.groupBy;
  if (D.rows && D.rowsKey === key) return D.rows;
  const y = [], first = [], end = [], group = [];
  let at = 0;
  D.groups.forEach((g, gi) => {
    if (g.key) { y.push(at); first.push(-1); end.push(-1); group.push(gi); at += HEADER_PX; }
    for (let i = g.start; i < g.start + g.count; i += L.cols) {
      y.push(at); first.push(i); end.push(g.start + g.count); group.push(gi); at += L.nodeH;
    }
  });
  D.rows = { y, first, end, group, height: at };
  D.rowsKey = key;
  return D.rows;
}

/* The last row starting at or above y. */
function rowAt(R, y) {
  let lo = 0, hi = R.y.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (R.y[mid] <= y) lo = mid; else hi = mid - 1;
  }
  return lo;
}

/* Counts per group for its header: nodes, GPUs, GPUs in use. */
function groupUse(D, g) {
  let gpus = 0, used = 0;
  for (let i = g.start; i < g.start + g.count; i++)
    for (let dv = D.off[i]; dv < D.off[i + 1]; dv++) {
      gpus++;
      if (D.whole[dv] || D.mig[dv] || D.share[dv] || D.others[dv]) used++;
    }
  return { gpus, used };
}

/* Draws the rows inside the scroll window only. */
function drawGpus() {
  const D = state.derived;
  if (!D) return;
  if (!COLORS.free) colors();
  const L = layout();
  const R = mapRows(D, L);
  $("gpu-spacer").style.height = R.height + "px";
  const want = Math.max(60, Math.min(420, R.height + 6)) + "px";
  if (scroller.style.height !== want) { scroller.style.height = want; resizeCanvas(); return; }
  const top = scroller.scrollTop, h = scroller.clientHeight || 360;
  ctx.clearRect(0, 0, L.width, h);
  if (R.y.length) drawRows(D, L, R, rowAt(R, top), top, h);
  const s = D.sum;
  $("gpu-summary").textContent =
    `${s.nodes} nodes (${s.notReady} not ready, ${s.cordoned} cordoned, ${s.reserved} reserved) · ` +
    `${s.gpus} GPUs: ${s.whole} whole, ${s.shared} shared, ${s.mig} MIG, ${s.free} free` +
    (s.releasing ? `, ${s.releasing} releasing` : "") +
    (s.others ? `, ${s.others} in use by queues this token cannot see` : "") +
    (state.filter.text ? ` · ${s.matching} of ${s.nodes} nodes match "${state.filter.text}"` : "");
  scroller.dataset.nodes = s.nodes;
  scroller.dataset.gpus = s.gpus;
  scroller.dataset.groups = D.groups.length;
  scroller.dataset.others = s.others;
}

/* Cells are collected per colour and each colour filled once, so a frame
 * costs a few fill() calls however many nodes are visible. */
function drawRows(D, L, R, r0, top, h) {
  const CELL = L.cell;
  const bh = L.rowsPerNode * (CELL + CELL_GAP) - CELL_GAP;
  const paths = {};
  const rect = (color, x, y, rw, rh) => (paths[color] || (paths[color] = [])).push(x, y, rw, rh);
  const outlines = [], headers = [], names = [];
  for (let r = r0; r < R.y.length && R.y[r] < top + h; r++) {
    const y0 = R.y[r] - top + 2;
    if (R.first[r] < 0) {
      const g = D.groups[R.group[r]], u = groupUse(D, g);
      headers.push([`${g.key} — ${g.count} node${g.count === 1 ? "" : "s"}, ${u.used} of ${u.gpus} GPUs in use`, y0]);
      continue;
    }
    for (let c = 0; c < L.cols; c++) {
      const i = R.first[r] + c;
      if (i >= R.end[r]) break;
      const x = 2 + c * L.nodeW, y = y0;
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
            const ys = cy + CELL - Math.round((s + 1) * CELL / 7);
            rect(busy || "mig", cx, ys, CELL, Math.max(1, Math.round(CELL / 7)));
          }
        } else if (D.share[dv]) {
          const fh = Math.max(1, Math.round(CELL * D.share[dv] / 1000));
          rect(busy || "shared", cx, cy + CELL - fh, CELL, fh);
        }
        if (D.others[dv]) { /* held by queues this token cannot see */
          const oh = Math.max(1, Math.round(CELL * D.others[dv] / 1000));
          rect("others", cx, cy + CELL - oh, CELL, oh);
        }
      }
      if (!D.match[i]) rect("dimmed", x - 1, y - 1, L.blockW + 2, bh + 2);
      if (L.names) names.push([n.metadata.name, x, y + bh + 10, L.nodeW - NODE_GAP]);
      if (D.reserved[i] || notReady || i === state.selected || i === state.hover ||
          (state.filter.text && D.match[i]))
        outlines.push(notReady ? "notready" : D.reserved[i] ? "reserved" : "highlight", x, y);
    }
  }
  for (const color of ["free", "cordoned", "whole", "shared", "mig", "releasing", "others", "dimmed"]) {
    const a = paths[color];
    if (!a) continue;
    ctx.fillStyle = COLORS[color];
    ctx.beginPath();
    for (let k = 0; k < a.length; k += 4) ctx.rect(a[k], a[k + 1], a[k + 2], a[k + 3]);
    ctx.fill();
  }
  ctx.lineWidth = 1.5;
  for (let k = 0; k < outlines.length; k += 3) {
    ctx.strokeStyle = outlines[k] === "highlight" ? "#fff" : COLORS[outlines[k]];
    ctx.strokeRect(outlines[k + 1] - 1.5, outlines[k + 2] - 1.5, L.blockW + 3, bh + 3);
  }
  ctx.fillStyle = COLORS.text;
  ctx.font = "12px system-ui, sans-serif";
  for (const [t, y] of headers) ctx.fillText(t, 4, y + 11);
  ctx.fillStyle = COLORS.dimText;
  ctx.font = "10px system-ui, sans-serif";
  for (const [t, x, y, w] of names) {
    let s = t;
    while (s.length > 3 && ctx.measureText(s).width > w) s = s.slice(0, -2) + "…";
    ctx.fillText(s, x, y);
  }
}

function nodeAt(ev) {
  const D = state.derived;
  if (!D) return -1;
  const L = layout(), R = mapRows(D, L);
  const rect = canvas.getBoundingClientRect();
  const x = ev.clientX - rect.left - 2, y = ev.clientY - rect.top + scroller.scrollTop - 2;
  if (!R.y.length || y < 0) return -1;
  const r = rowAt(R, y);
  if (R.first[r] < 0 || y - R.y[r] > L.nodeH) return -1;
  const c = Math.floor(x / L.nodeW);
  if (c < 0 || c >= L.cols || x - c * L.nodeW > L.nodeW - NODE_GAP) return -1;
  const i = R.first[r] + c;
  return i < R.end[r] ? i : -1;
}

/* Scrolls the map so node i's row is at the top. */
function scrollToNode(i) {
  const D = state.derived, L = layout(), R = mapRows(D, L);
  for (let r = 0; r < R.y.length; r++)
    if (R.first[r] >= 0 && i >= R.first[r] && i < Math.min(R.end[r], R.first[r] + L.cols)) {
      scroller.scrollTop = R.y[r];
      return;
    }
}
