/* Node pools panel: each pool's members, GPUs, requested and removing
 * nodes, waiting jobs, limits, and its size since the page opened (from
 * GET /api/v1/nodepools, polled by app.js). Loaded before app.js; runs only
 * when app.js calls it. */
"use strict";

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

