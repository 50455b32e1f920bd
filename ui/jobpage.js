/* The job page (#job/NAME): a job's or deployment's pods, why it waits
 * (GET /api/v1/{jobs|deployments}/NAME/explain), its events (the events
 * list, filtered), and its pods' logs through the server
 * (GET /api/v1/jobs/NAME/logs?pod=P; the browser never talks to a node).
 * The object itself follows the watch app.js keeps, so the pods table is
 * live; explain and events are read when the page opens and when the
 * object changes. Loaded before app.js; runs only when app.js calls it. */
"use strict";

const jp = { name: null, rv: null, explain: null, events: null, logPod: "", logs: null,
             logNote: "" };

function jobPageOpen() { return location.hash.startsWith("#job/"); }

function jobPageObj(name) {
  return state.objs.jobs.get(name) || state.objs.deployments.get(name) || jp.fetched || null;
}

/* Reads explain and events for the job shown (again when it changed). */
async function loadJobExtras(name, obj) {
  const kind = obj && state.objs.deployments.has(name) ? "deployments" : "jobs";
  try {
    const res = await api(kind + "/" + encodeURIComponent(name) + "/explain");
    jp.explain = res.ok ? await res.json() : { error: "HTTP " + res.status };
  } catch (e) { jp.explain = { error: e.message }; }
  try {
    const doc = await apiJSON("events");
    jp.events = (doc.items || [])
      .filter((e) => get(e, "involvedObject", "name") === name)
      .sort((a, b) => (a.lastTimestamp < b.lastTimestamp ? -1 : a.lastTimestamp > b.lastTimestamp ? 1 :
                       +get(a, "metadata", "resourceVersion") - +get(b, "metadata", "resourceVersion")));
  } catch (e) { jp.events = null; }
  markDirty("jobPage");
}

async function openJobPage() {
  const page = $("job-page");
  if (!jobPageOpen()) { page.hidden = true; jp.name = null; return; }
  /* Not logged in yet: login() opens the page once it is (a request now
   * would carry no token, and its 401 would log the next login out). */
  if (!state.token || $("app").hidden) return;
  const name = decodeURIComponent(location.hash.slice(5));
  page.hidden = false;
  if (name !== jp.name) {
    Object.assign(jp, { name, rv: null, explain: null, events: null, logPod: "", logs: null,
                        logNote: "", fetched: null });
    if (!state.objs.jobs.has(name) && !state.objs.deployments.has(name)) {
      try { jp.fetched = await apiJSON("jobs/" + encodeURIComponent(name)); }
      catch (e) { jp.fetched = null; }
    }
  }
  markDirty("jobPage");
  page.scrollIntoView({ block: "start" });
}

async function loadLogs(name, pod) {
  jp.logPod = pod;
  jp.logs = null;
  jp.logNote = "reading…";
  markDirty("jobPage");
  /* A Deployment's pods are read under its own kind, as explain is. */
  const kind = state.objs.deployments.has(name) ? "deployments" : "jobs";
  try {
    const res = await api(kind + "/" + encodeURIComponent(name) + "/logs?pod=" + encodeURIComponent(pod));
    if (res.ok) {
      const text = await res.text();
      jp.logs = text.length > 65536 ? text.slice(-65536) : text;
      jp.logNote = text.length > 65536 ? "the last 64 KiB" : "";
    } else {
      let msg = "";
      try { msg = ((await res.json()).error || {}).message || ""; } catch (e) { /* not JSON */ }
      if ((res.status === 404 && (!msg || msg === "no such path")) || res.status === 405 ||
          res.status === 501)
        jp.logNote = `this server does not serve logs (GET /api/v1/${kind}/NAME/logs answered ${res.status})`;
      else
        jp.logNote = (res.status === 404 ? "no logs: " : `logs: HTTP ${res.status}: `) + msg;
    }
  } catch (e) { jp.logNote = "logs: " + e.message; }
  markDirty("jobPage");
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text != null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function tableOf(head, rows) {
  const t = el("table");
  const tr = el("tr");
  for (const h of head) tr.appendChild(el("th", h));
  t.appendChild(tr);
  for (const r of rows) {
    const row = el("tr");
    for (const c of r) row.appendChild(el("td", c));
    t.appendChild(row);
  }
  return t;
}

function explainText(e) {
  if (!e) return "reading…";
  if (e.error) return "explain: " + e.error;
  const lines = [`${e.phase}: ${e.reason || "nothing holds it back"}`];
  const a = e.asks || {};
  lines.push(`asks ${a.pods} pod(s)` + (a.minMember && a.minMember !== a.pods ? `, at least ${a.minMember} together` : "") +
             `, ${a.gpus} whole GPUs`);
  for (const t of a.tasks || [])
    lines.push(`  ${t.name}: ${t.replicas} × ` +
               Object.entries(t.resources || {}).map(([k, v]) => k + " " + (typeof v === "object" ? JSON.stringify(v) : v)).join(", "));
  const q = e.queueStatus;
  if (q && q.name) {
    const g = (x) => (x && x.gpu != null ? fmt(x.gpu) : "none");
    lines.push(`queue ${q.name} GPUs: fair share ${g(q.fairShare)}, allocated ${g(q.allocated)}, ` +
               `requested ${g(q.requested)}, quota ${g(q.quota)}, limit ${g(q.limit)}`);
  }
  return lines.join("\n");
}

function renderJobPage() {
  const page = $("job-page");
  if (!jobPageOpen() || !jp.name) { page.hidden = true; return; }
  const obj = jobPageObj(jp.name);
  const rv = obj && get(obj, "metadata", "resourceVersion");
  if (obj && rv !== jp.rv) { jp.rv = rv; loadJobExtras(jp.name, obj); }
  const frag = document.createDocumentFragment();
  const head = el("h2");
  head.append(el("span", obj ? (state.objs.deployments.has(jp.name) ? "Deployment " : "Job ") + jp.name
                             : "Job " + jp.name + " (not found, or not visible to this token)"));
  const close = el("a", "close", "summary");
  close.href = "#";
  head.appendChild(close);
  frag.appendChild(head);
  if (obj) {
    const st = obj.status || {};
    const pods = jobPods(obj);
    frag.appendChild(el("div", `queue ${get(obj, "spec", "queue") || "–"} · ` +
      `${get(obj, "status", "phase") || "Pending"} · ${pods.filter((p) => HOLDING.has(p.phase)).length}/` +
      `${jobReplicas(obj)} pods running` + (st.reason ? " · " + st.reason : ""), "muted jp-status"));
    frag.appendChild(el("h3", "Pods"));
    const rows = pods.map((p) => [p.name, p.phase || "", p.node || "–",
      p.mig ? `${p.mig.gpu}: ${p.mig.profile}` : (p.gpus || []).join(",") + (num(p.gpuShare) !== null ? ` (${p.gpuShare}m)` : ""),
      p.ready == null ? "–" : String(p.ready), String(p.restarts || 0), p.startedAt || "–"]);
    const pt = rows.length ? tableOf(["pod", "phase", "node", "GPUs", "ready", "restarts", "started"], rows)
                           : el("div", "no pods yet", "muted");
    pt.id = "jp-pods";
    frag.appendChild(pt);
    frag.appendChild(el("h3", "Why"));
    const ex = el("pre", explainText(jp.explain), "jp-explain");
    ex.id = "jp-explain";
    frag.appendChild(ex);
    frag.appendChild(el("h3", "Events"));
    const evs = jp.events;
    const et = !evs ? el("div", "reading…", "muted")
      : !evs.length ? el("div", "none", "muted")
      : tableOf(["time", "type", "reason", "message"], evs.map((e) => [e.lastTimestamp || "", e.type || "", e.reason || "", e.message || ""]));
    et.id = "jp-events";
    frag.appendChild(et);
    frag.appendChild(el("h3", "Logs"));
    const bar = el("div", null, "jp-logbar");
    const sel = el("select");
    sel.id = "jp-log-pod";
    for (const p of pods) sel.appendChild(new Option(p.name, p.name));
    if (jp.logPod) sel.value = jp.logPod;
    sel.addEventListener("change", () => { jp.logPod = sel.value; });
    const btn = el("button", "Show logs");
    btn.id = "jp-log-load";
    btn.disabled = !pods.length;
    btn.addEventListener("click", () => loadLogs(jp.name, sel.value));
    bar.append(sel, btn, el("span", jp.logNote, "muted"));
    frag.appendChild(bar);
    const pre = el("pre", jp.logs == null ? "" : jp.logs || "(empty)", "jp-logs");
    pre.id = "jp-logs";
    frag.appendChild(pre);
  }
  page.replaceChildren(frag);
}

window.addEventListener("hashchange", () => openJobPage());
