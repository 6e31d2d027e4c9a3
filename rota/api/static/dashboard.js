"use strict";
// The rota dashboard. Every value shown comes from the API and is put on the page as
// text (textContent, DOM nodes), never parsed as HTML: job arguments and error details
// are written by anyone and must stay inert.
(function () {
  const REFRESH_MS = REFRESH_SECONDS * 1000;
  const SVG = "http://www.w3.org/2000/svg";
  const view = document.getElementById("view");
  const statusLine = document.getElementById("status");
  const notice = document.getElementById("notice");
  const login = document.getElementById("login");
  let timer = null;
  let needToken = false;
  let role = null; // the token's role (GET /whoami): a viewer is shown no action buttons

  // -- DOM helpers ------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    for (const child of children) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  function jobLink(id) {
    return el("a", { href: "#/jobs/" + encodeURIComponent(id), class: "mono" }, String(id));
  }
  function table(headers, rows, empty) {
    if (!rows.length) return el("p", { class: "muted" }, empty || "none");
    return el("table", {},
      el("thead", {}, el("tr", {}, headers.map((h) =>
        el("th", { class: h.startsWith("#") ? "num" : null }, h.replace(/^#/, ""))))),
      el("tbody", {}, rows));
  }
  function num(value, cls) {
    return el("td", { class: "num " + (cls || "") }, value === null || value === undefined ? "–" : value);
  }

  // -- formatting ---------------------------------------------------------------------
  function seconds(s) {
    if (s === null || s === undefined) return "–";
    if (s < 1) return (s * 1000).toFixed(s < 0.01 ? 1 : 0) + " ms";
    if (s < 120) return s.toFixed(s < 10 ? 2 : 0) + " s";
    if (s < 7200) return (s / 60).toFixed(1) + " min";
    if (s < 172800) return (s / 3600).toFixed(1) + " h";
    return (s / 86400).toFixed(1) + " d";
  }
  function when(iso) {
    if (!iso) return "–";
    return iso.replace("T", " ").replace(/\.\d+Z$/, "Z");
  }
  function ago(iso, nowIso) {
    if (!iso) return "–";
    const diff = (Date.parse(nowIso) - Date.parse(iso)) / 1000;
    return diff >= 0 ? seconds(diff) + " ago" : "in " + seconds(-diff);
  }
  // An instant as the wall clock of a time zone shows it: "2026-12-01 03:00:00 Europe/Berlin".
  function localTime(iso, zone) {
    if (!iso || !zone || zone === "UTC") return "";
    try {
      const parts = {};
      const format = new Intl.DateTimeFormat("en-GB", { timeZone: zone, hourCycle: "h23",
        year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" });
      for (const p of format.formatToParts(new Date(iso))) parts[p.type] = p.value;
      return parts.year + "-" + parts.month + "-" + parts.day + " " + parts.hour + ":" + parts.minute
        + ":" + parts.second + " " + zone;
    } catch (err) {
      return ""; // a zone this browser does not know: UTC alone
    }
  }
  // UTC, and beside it the schedule's local time.
  function whenZoned(iso, zone) {
    const local = localTime(iso, zone);
    return el("span", {}, when(iso), local ? el("span", { class: "muted local" }, " · " + local) : null);
  }

  // -- talking to the server ------------------------------------------------------------
  // X-Rota-Request marks the page's own requests: no other origin can send it, so the
  // server refuses changes without it from a browser. The token travels as base64 of
  // its UTF-8 bytes in X-Rota-Token: a browser sends header bytes as Latin-1, which
  // cannot carry most of Unicode.
  function headers() {
    const sent = { "X-Rota-Request": "1" };
    const token = sessionStorage.getItem("rota-token");
    if (token) sent["X-Rota-Token"] = utf8Base64(token);
    return sent;
  }
  function utf8Base64(text) {
    let bytes = "";
    for (const b of new TextEncoder().encode(text)) bytes += String.fromCharCode(b);
    return btoa(bytes);
  }
  function canAct() {
    return role === "operator" || role === "admin";
  }
  async function api(path, method, payload) {
    const sent = headers();
    if (payload !== undefined) sent["Content-Type"] = "application/json";
    const response = await fetch(path, { method: method || "GET", headers: sent,
      body: payload === undefined ? undefined : JSON.stringify(payload),
      credentials: "omit", cache: "no-store" });
    if (response.status === 401) {
      needToken = true;
      role = null;
      login.hidden = false;
      throw new Error("the API token is missing or wrong");
    }
    const type = response.headers.get("content-type") || "";
    const body = type.includes("json") ? await response.json() : await response.text();
    if (!response.ok) {
      const detail = body && body.detail ? body.detail : response.status + " " + response.statusText;
      throw new Error(detail);
    }
    return body;
  }
  function say(text) {
    notice.textContent = text;
    notice.hidden = !text;
  }
  // Every action asks first, naming what it changes, and takes the reason in the same dialog
  // (kept in the audit with the token's name); Cancel sends nothing.
  function ask(question) {
    return window.prompt(question + "\nReason (optional; kept in the audit). Cancel sends nothing.", "");
  }
  async function act(path, label) {
    const reason = ask(label.charAt(0).toUpperCase() + label.slice(1) + "?");
    if (reason === null) {
      say(label + " not sent");
      return;
    }
    try {
      const body = await api(path, "POST", { reason: reason });
      const state = body.state ? " (now " + body.state + ")" : "";
      say(label + " done" + state);
    } catch (err) {
      say(label + " failed: " + err.message);
    }
    refresh();
  }
  // A bulk action on every job the filters match: counted first (a dry run), the count in the
  // question, then sent with max = that count, so it changes no more jobs than were shown.
  async function bulk(kind, filters) {
    const body = Object.fromEntries(filters);
    let counted;
    try {
      counted = await api("/jobs/" + kind, "POST", Object.assign({}, body, { dry_run: true }));
    } catch (err) {
      say(kind + " failed: " + err.message);
      return;
    }
    if (counted.matching === 0) {
      say("no job matches: nothing to " + kind);
      return;
    }
    if (counted.over_max) {
      say("more than " + counted.max.toLocaleString("en") + " jobs match: narrow the filters to "
        + kind + " them from here");
      return;
    }
    const label = kind + " " + counted.matching + " job" + (counted.matching === 1 ? "" : "s");
    const reason = ask(label.charAt(0).toUpperCase() + label.slice(1) + " matching "
      + describeFilters(filters) + "?");
    if (reason === null) {
      say(label + " not sent");
      return;
    }
    try {
      const done = await api("/jobs/" + kind, "POST",
        Object.assign({}, body, { reason: reason, max: counted.matching }));
      const states = Object.entries(done.changed).map(([s, n]) => n + " now " + s).join(", ");
      say(kind + " done: " + done.total + " job(s)" + (states ? " (" + states + ")" : ""));
    } catch (err) {
      say(label + " failed: " + err.message);
    }
    refresh();
  }
  login.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("rota-token", document.getElementById("token").value);
    needToken = false;
    role = null;
    login.hidden = true;
    refresh();
  });

  // -- charts ---------------------------------------------------------------------------
  // p50 and p95 per minute over the last hour, as two polylines.
  function chart(summary, nowIso) {
    const width = 260, height = 56, pad = 2;
    const points = (summary && summary.series) || [];
    // The last hour, or less when the data is younger: a short history stays readable.
    const end = Date.parse(nowIso);
    const first = points.length ? Date.parse(points[0].minute) : end;
    const start = Math.max(end - 3600 * 1000, Math.min(first - 60 * 1000, end - 5 * 60 * 1000));
    let top = 0;
    for (const p of points) top = Math.max(top, p.p95 || 0, p.p50 || 0);
    const box = svg("svg", { class: "chart", width: width, height: height + 12,
      viewBox: "0 0 " + width + " " + (height + 12), role: "img",
      "aria-label": "p50 and p95 per minute, last hour" });
    box.append(svg("line", { x1: 0, y1: height, x2: width, y2: height, stroke: "#d9dee4" }));
    if (!points.length || top <= 0) {
      box.append(svg("text", { x: 4, y: height / 2 }, "no data in the last hour"));
      return box;
    }
    const x = (iso) => pad + (width - 2 * pad) * Math.min(1, Math.max(0, (Date.parse(iso) - start) / (end - start)));
    const y = (v) => height - pad - (height - 2 * pad) * (v / top);
    for (const key of ["p95", "p50"]) {
      const coords = points.filter((p) => p[key] !== null)
        .map((p) => x(p.minute).toFixed(1) + "," + y(p[key]).toFixed(1)).join(" ");
      box.append(svg("polyline", { class: key, points: coords, fill: "none", "stroke-width": 1.5 }));
    }
    box.append(svg("text", { x: 2, y: 9 }, seconds(top)));
    box.append(svg("text", { x: 2, y: height + 11 }, "−" + Math.round((end - start) / 60000) + " min"));
    box.append(svg("text", { x: width - 22, y: height + 11 }, "now"));
    return box;
  }
  function legend() {
    return el("div", { class: "legend" }, el("span", { class: "p50" }, "— p50"),
      el("span", { class: "p95" }, "— p95"));
  }

  // -- views --------------------------------------------------------------------------------
  function queuesSection(data) {
    const rows = [];
    for (const pool of data.pools) {
      rows.push(el("tr", {},
        el("th", { colspan: 1 }, "pool " + pool.pool),
        el("td", { colspan: 5, class: "muted" },
          "oldest runnable: ", el("span", { class: pool.oldest_runnable_age_seconds > 60 ? "warn" : "" },
            pool.oldest_runnable_age_seconds > 0 ? seconds(pool.oldest_runnable_age_seconds) : "nothing due waits"),
          " · stuck RUNNING (lease expired, not swept): ",
          el("span", { class: pool.stuck_running ? "bad" : "" }, pool.stuck_running))));
      for (const t of pool.job_types) {
        rows.push(el("tr", {},
          el("td", {}, t.job_type),
          num(t.queued || 0), num(t.running || 0), num(t.retry_wait || 0),
          num(t.cancel_requested || 0), num(t.failed || 0, t.failed ? "bad" : "")));
      }
    }
    // Past 10,000 FAILED jobs their count is taken less often than the page refreshes.
    const failedAge = data.failed_count_age_seconds > 0
      ? el("p", { class: "muted", id: "failed-count-age" },
        "#failed counted " + seconds(data.failed_count_age_seconds) + " ago")
      : null;
    return el("section", { id: "queues" }, el("h2", {}, "Queues"),
      table(["job type", "#queued", "#running", "#retry wait", "#cancel requested", "#failed"], rows,
        "no job types: run `rota apply FILE`"), failedAge);
  }

  function latencySection(title, id, summaries, nowIso, extra) {
    const rows = Object.entries(summaries).map(([key, s]) => el("tr", {},
      el("td", {}, key), num(s.count), num(seconds(s.p50)), num(seconds(s.p95)), num(seconds(s.p99)),
      el("td", {}, chart(s, nowIso)), extra ? extra(key) : null));
    const heads = ["", "#count", "#p50", "#p95", "#p99", "last hour"];
    if (extra) heads.push("#expired leases (1 h / all)");
    return el("section", { id: id }, el("h2", {}, title), legend(),
      table(heads, rows, "nothing observed in the last hour"));
  }

  // A schedule's state: paused (since when, by whom, why), removed or active.
  function scheduleState(s) {
    if (s.removed) return el("span", { class: "warn" }, "removed");
    if (!s.paused) return el("span", { class: "ok" }, "active");
    const by = s.paused_by;
    return el("span", {}, el("span", { class: "warn" }, "paused"),
      el("div", { class: "muted pause-reason" }, (s.paused_at ? "since " + when(s.paused_at) : "")
        + (by ? " by " + by.actor + (by.reason ? ": " + by.reason : "") : "")
        + (s.pause_reason && !(by && by.reason) ? ": " + s.pause_reason : "")));
  }
  // The next fire in UTC and local time; a countdown only for a schedule that will fire.
  function nextFire(s, nowIso) {
    if (!s.next_fire_at) return "–";
    const counting = !s.paused && !s.removed;
    return el("span", {}, whenZoned(s.next_fire_at, s.timezone),
      counting ? el("div", { class: "muted countdown" }, ago(s.next_fire_at, nowIso)) : null);
  }
  // Fields other branches add (last_outcome, last_success, last_late): shown when present.
  function lastOutcome(s) {
    const o = s.last_outcome;
    if (!o) return null;
    const good = o.state === "SUCCEEDED";
    return el("div", { class: "last-outcome" }, el("span", { class: good ? "ok" : o.state === "FAILED" ? "bad" : "" }, o.state),
      " for " + when(o.instant) + (o.finished_at ? ", finished " + when(o.finished_at) : ""));
  }
  function lastSuccess(s) {
    if (!("last_success" in s)) return null;
    return el("div", { class: "muted last-success" }, "last success " + (s.last_success ? when(s.last_success) : "never"));
  }
  function lateness(s) {
    const late = s.last_late;
    if (!late) return null;
    return el("div", { class: "bad late" }, "late: " + late.reason + " — " + when(late.instant)
      + " due by " + when(late.deadline) + (late.finished_at ? ", finished " + when(late.finished_at) : ""),
      late.job_id ? el("div", {}, jobLink(late.job_id)) : null);
  }

  function schedulesTable(data) {
    const rows = data.schedules.map((s) => {
      const skips = Object.entries(s.skipped_by_reason).map(([r, n]) => r + " " + n).join(", ");
      const base = "/schedules/" + encodeURIComponent(s.name);
      return el("tr", {},
        el("td", {}, el("a", { href: "#/schedules/" + encodeURIComponent(s.name) }, s.name),
          el("div", { class: "muted" }, s.rule + " (" + s.timezone + ")")),
        el("td", {}, scheduleState(s)),
        el("td", {}, nextFire(s, data.now)),
        el("td", {}, when(s.last_fire_at), el("div", {}, s.last_job_id ? jobLink(s.last_job_id) : ""),
          lastOutcome(s), lastSuccess(s), lateness(s)),
        el("td", {}, skips || "none", el("div", { class: "muted" },
          "skipped " + s.skipped_count + ", coalesced " + s.coalesced_count)),
        el("td", { class: "actions" }, canAct() ? [
          el("button", { onclick: () => act(base + "/pause", "pause " + s.name), disabled: s.paused || s.removed }, "pause"),
          el("button", { onclick: () => act(base + "/resume", "resume " + s.name), disabled: !s.paused }, "resume"),
          el("button", { onclick: () => act(base + "/trigger", "trigger " + s.name), disabled: s.removed }, "trigger")] : null));
    });
    return el("section", { id: "schedules" }, el("h2", {}, "Schedules"),
      table(["schedule", "state", "next fire (UTC · local)", "last fire", "skip ledger", ""], rows, "no schedules"));
  }

  // An error detail (often a traceback): its last line, the whole of it one click away.
  function detail(text) {
    if (!text) return null;
    const lines = text.trim().split("\n");
    const last = lines[lines.length - 1];
    if (lines.length === 1) return el("div", { class: "mono" }, last);
    return el("details", {}, el("summary", { class: "mono" }, last), el("pre", { class: "detail" }, text));
  }

  function failedSection(data, limit) {
    const shown = limit ? data.failed.slice(0, limit) : data.failed;
    const rows = shown.map((j) => el("tr", {},
      el("td", {}, jobLink(j.job_id), el("div", { class: "muted" }, j.job_type)),
      el("td", {}, when(j.finished_at || j.updated_at)),
      el("td", {}, el("span", { class: "bad" }, j.error ? j.error.code : "–"),
        j.error ? detail(j.error.detail) : null),
      num(j.attempt_count + " / " + j.max_attempts),
      el("td", { class: "actions" }, canAct()
        ? el("button", { onclick: () => act("/jobs/" + encodeURIComponent(j.job_id) + "/replay", "replay " + j.job_id) }, "replay")
        : null)));
    const more = shown.length < data.failed.length
      ? el("p", {}, el("a", { href: "#/failed" }, "all " + data.failed.length + " most recent failed jobs"))
      : null;
    const all = el("p", {}, el("a", { href: "#/jobs?state=FAILED" }, "search and act on every failed job"));
    return el("section", { id: "failed" }, el("h2", {}, "Failed jobs"),
      table(["job", "failed at", "error", "#attempts", ""], rows, "no failed jobs"), more, all);
  }

  function workersSection(data) {
    const live = data.workers.filter((w) => w.status === "live").length;
    const rows = data.workers.map((w) => el("tr", {},
      el("td", {}, w.kind), el("td", { class: "mono" }, w.worker_id),
      el("td", {}, w.host + " pid " + w.pid + " · rota " + w.version),
      el("td", {}, w.pools ? w.pools.join(", ") : "–"), num(w.concurrency),
      el("td", {}, when(w.started_at)),
      el("td", { class: w.status === "live" ? "ok" : "bad" },
        (w.status === "live" ? "live · " : "GONE · ") + seconds(w.seen_seconds_ago) + " ago")));
    return el("section", { id: "workers" }, el("h2", {}, "Workers (" + live + " live)"),
      table(["kind", "worker", "where", "pools", "#concurrency", "started", "last seen"], rows,
        "no executor or scheduler has registered"));
  }

  // Operator actions (audit rows) on one job or schedule, oldest first.
  function actionsTable(id, actions) {
    const rows = (actions || []).map((a) => el("tr", {},
      el("td", {}, when(a.at)), el("td", {}, a.action), el("td", {}, a.actor),
      el("td", {}, a.reason || "–"), el("td", { class: "muted" }, a.detail || "")));
    return el("div", { id: id }, el("h3", {}, "Operator actions"),
      table(["at", "action", "by", "reason", ""], rows, "none"));
  }

  // A job's error where it explains its state (FAILED, waiting to retry); other jobs keep the
  // last error on the row, but it belongs to an attempt, not to the job: see the job page.
  function explainsState(j) {
    return j.error && (j.state === "FAILED" || j.state === "RETRY_WAIT");
  }
  function jobsTable(jobs) {
    const rows = jobs.map((j) => el("tr", {},
      el("td", {}, jobLink(j.job_id)), el("td", {}, j.job_type),
      el("td", { class: "state " + (j.state === "FAILED" ? "bad" : "") }, j.state),
      el("td", {}, when(j.created_at)), el("td", {}, j.schedule || "–"),
      el("td", { class: "mono" }, j.dedup_key || ""),
      el("td", {}, explainsState(j) ? j.error.code : "")));
    return table(["job", "type", "state", "created", "schedule", "dedup key", "error"], rows, "no jobs");
  }

  async function overview() {
    const [data, recent] = await Promise.all([api("/dashboard/data"), api("/jobs?limit=15")]);
    const expired = (key) => {
      const e = data.expired_leases[key];
      return num(e ? e.last_hour + " / " + e.total : "0 / 0", e && e.last_hour ? "warn" : "");
    };
    return [
      queuesSection(data),
      latencySection("Queue wait (due → claimed), first attempts, last hour", "queue-wait",
        data.latency.queue_wait, data.now),
      latencySection("Execution time (one attempt), last hour", "execution",
        data.latency.execution, data.now, expired),
      el("div", { class: "grid" },
        latencySection("End to end (created → finished)", "end-to-end", data.latency.end_to_end, data.now),
        latencySection("Cancel latency (requested → cancelled)", "cancel-latency", data.latency.cancel_latency, data.now)),
      latencySection("Scheduler delay (created − scheduled), every schedule", "scheduler-delay",
        data.latency.scheduler_delay, data.now),
      el("section", { id: "recent" }, el("h2", {}, "Recent jobs"), jobsTable(recent.jobs),
        el("p", {}, el("a", { href: "#/jobs" }, "all jobs: filter, search, act"))),
      failedSection(data, 8),
      schedulesTable(data),
      workersSection(data),
    ];
  }

  // -- the jobs workplace: #/jobs?state=..&job_type=..&schedule=..&since=..&q=..&cursor=.. --
  const FILTERS = ["state", "job_type", "schedule", "since", "q"];
  const STATES = ["QUEUED", "RUNNING", "RETRY_WAIT", "SUCCEEDED", "FAILED", "CANCEL_REQUESTED", "CANCELLED"];
  const CANCELLABLE = ["QUEUED", "RETRY_WAIT", "RUNNING"];
  const PAGE = 50;
  let filterForm = null; // kept while its filters stay the same: a refresh keeps what is typed
  let filterKey = null;

  function filtersOf(params) {
    const out = new URLSearchParams();
    for (const key of FILTERS) {
      const value = (params.get(key) || "").trim();
      if (value) out.set(key, value);
    }
    return out;
  }
  function describeFilters(filters) {
    return Array.from(filters.entries()).map(([k, v]) => k + "=" + v).join(", ");
  }
  function goToJobs(filters) {
    const target = "#/jobs" + (filters.toString() ? "?" + filters.toString() : "");
    if (location.hash === target) refresh();
    else location.hash = target;
  }
  function filterFormFor(filters) {
    const key = filters.toString();
    if (filterForm && filterKey === key) return filterForm;
    const field = (name, label, attrs) => el("label", {}, label,
      el("input", Object.assign({ id: "filter-" + name, name: name, value: filters.get(name) || "",
        autocomplete: "off" }, attrs)));
    const current = filters.get("state") || "";
    const choices = ["", ...STATES];
    if (current && !choices.includes(current)) choices.push(current);
    const state = el("select", { id: "filter-state", name: "state" },
      choices.map((s) => el("option", { value: s, selected: s === current }, s || "any state")));
    const form = el("form", { id: "job-filters", class: "filters" },
      el("label", {}, "state ", state),
      field("job_type", "job type ", { size: 14 }),
      field("schedule", "schedule ", { size: 14 }),
      field("since", "since ", { size: 8, placeholder: "1h or ISO" }),
      field("q", "search ", { size: 28, maxlength: 200, placeholder: "id, dedup key, error" }),
      el("button", { type: "submit" }, "filter"),
      el("a", { href: "#/jobs" }, "clear"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      goToJobs(filtersOf(new FormData(form)));
    });
    filterForm = form;
    filterKey = key;
    return form;
  }
  function bulkButtons(filters) {
    if (!canAct() || !filters.toString()) return null;
    const states = (filters.get("state") || "").toUpperCase().split(",").map((s) => s.trim()).filter(Boolean);
    const replayable = states.every((s) => s === "FAILED");
    const cancellable = states.every((s) => CANCELLABLE.includes(s));
    return el("p", { class: "actions", id: "bulk" }, "Every job these filters match: ",
      replayable ? el("button", { onclick: () => bulk("replay", filters) }, "replay all…") : null,
      cancellable ? el("button", { onclick: () => bulk("cancel", filters) }, "cancel all…") : null);
  }
  async function jobsView(params) {
    const filters = filtersOf(params);
    // A search reads jobs until a page of matches is found, the whole history for a text no
    // job holds: it runs when asked (the filter button, a reload), not every few seconds.
    redraw = !filters.get("q");
    const query = new URLSearchParams(filters);
    query.set("limit", String(PAGE));
    const cursor = params.get("cursor");
    if (cursor) query.set("cursor", cursor);
    const parts = [el("h2", {}, "Jobs"), filterFormFor(filters)];
    let page;
    try {
      page = await api("/jobs?" + query.toString());
    } catch (err) {
      if (needToken) throw err;
      parts.push(el("p", { class: "bad", id: "jobs-error" }, "not listed: " + err.message));
      return [el("section", { id: "jobs" }, parts)];
    }
    parts.push(bulkButtons(filters), jobsTable(page.jobs));
    // Keyset pages: the next one starts after this one's last job; its link can be shared.
    const paging = el("p", { class: "paging" });
    if (cursor) paging.append(el("a", { href: "#/jobs" + (filters.toString() ? "?" + filters : "") }, "« newest"), " ");
    if (page.next) {
      const next = new URLSearchParams(page.next.split("?")[1] || "");
      next.delete("limit");
      paging.append(el("a", { href: "#/jobs?" + next.toString(), id: "next-page" }, "next page »"));
    }
    parts.push(paging);
    return [el("section", { id: "jobs" }, parts)];
  }

  // -- one job ----------------------------------------------------------------------------
  // Its attempts in runs: a replay starts a new run, numbered from #1 again. A run begins where
  // the attempt number does not go up, except after a RELEASED attempt (a graceful shutdown
  // gives its number back); the replay actions name who started each run and why.
  function runsOf(job) {
    const runs = [];
    let prev = null;
    for (const a of job.attempts || []) {
      const again = prev && (a.attempt < prev.attempt || (a.attempt === prev.attempt && prev.outcome !== "RELEASED"));
      if (!prev || again) runs.push({ attempts: [], replay: null });
      runs[runs.length - 1].attempts.push(a);
      prev = a;
    }
    const replays = (job.actions || []).filter((x) => x.action === "replay");
    runs.forEach((run, i) => {
      if (i === 0) return;
      const start = Date.parse(run.attempts[0].started_at);
      const after = Date.parse(runs[i - 1].attempts[0].started_at);
      const found = replays.filter((x) => Date.parse(x.at) <= start && Date.parse(x.at) >= after);
      run.replay = found.length ? found[found.length - 1] : null;
    });
    return runs;
  }
  function runTitle(run, i) {
    if (i === 0) return "Run 1";
    const r = run.replay;
    return "Run " + (i + 1) + " — replayed" + (r ? " " + when(r.at) + " by " + r.actor + (r.reason ? ": " + r.reason : "") : "");
  }

  function timeline(job, runs, nowIso) {
    const attempts = job.attempts || [];
    if (!attempts.length) return el("p", { class: "muted" }, "no attempt yet");
    const start = Math.min(Date.parse(job.created_at), ...attempts.map((a) => Date.parse(a.started_at)));
    const end = Math.max(start + 1, ...attempts.map((a) => Date.parse(a.ended_at || nowIso)));
    const width = 640, row = 22, left = 4;
    const scale = (t) => left + (width - 2 * left) * ((t - start) / Math.max(1, end - start));
    const box = svg("svg", { class: "chart", width: width, height: attempts.length * row + 16,
      role: "img", "aria-label": "attempts over time" });
    let i = 0;
    runs.forEach((run, r) => run.attempts.forEach((a) => {
      const x1 = scale(Date.parse(a.started_at));
      const x2 = Math.max(x1 + 2, scale(Date.parse(a.ended_at || nowIso)));
      const colour = a.outcome === "SUCCEEDED" || a.outcome === "RECONCILED" ? "#1a7f37"
        : a.outcome === null ? "#2f6fdb" : a.outcome === "RELEASED" ? "#8a94a0" : "#b3261e";
      box.append(svg("rect", { x: x1, y: i * row + 4, width: x2 - x1, height: row - 8, fill: colour, rx: 2 }));
      const label = (runs.length > 1 ? "run " + (r + 1) + " · " : "") + "#" + a.attempt + " "
        + (a.outcome || "running") + (a.error_code ? " " + a.error_code : "")
        + (a.seconds !== null ? " · " + seconds(a.seconds) : "");
      box.append(svg("text", { x: Math.min(x2 + 4, width - 190), y: i * row + row / 2 + 4 }, label));
      i += 1;
    }));
    box.append(svg("text", { x: left, y: attempts.length * row + 14 }, when(new Date(start).toISOString())));
    return box;
  }

  // Each attempt's output (GET /jobs/{id}/attempts/{n}/output, text/plain), when the server
  // has it: an empty answer or a 404 shows nothing. A finished attempt's answer is kept.
  const outputs = new Map(); // path -> text, or null for none
  const openOutputs = new Set(); // the outputs the reader opened, kept open across refreshes
  async function outputOf(path, final) {
    if (outputs.has(path)) return outputs.get(path);
    let text = null;
    try {
      const response = await fetch(path, { headers: headers(), credentials: "omit", cache: "no-store" });
      if (response.status === 200) text = (await response.text()) || null; // "": wrote nothing
    } catch (err) {
      text = null;
    }
    if (final) outputs.set(path, text);
    return text;
  }
  // The route's n counts the job's attempts from 1 in the order they started, across
  // replays: an attempt's place in job.attempts, not its attempt number.
  function outputPath(job, n) {
    return "/jobs/" + encodeURIComponent(job.job_id) + "/attempts/" + n + "/output";
  }
  async function attemptOutputs(job) {
    const found = new Map();
    const wanted = (job.attempts || []).map((a, i) => [a, outputPath(job, i + 1)]);
    await Promise.all(wanted.slice(-20).map(async ([a, path]) => {
      const text = await outputOf(path, a.ended_at !== null);
      if (text !== null) found.set(a, text);
    }));
    return found;
  }
  function outputRow(job, a, text, title) {
    const key = job.job_id + "/" + a.lease_generation;
    const box = el("details", { class: "output", open: openOutputs.has(key) },
      el("summary", {}, "output of " + title + " (" + text.split("\n").length + " lines)"),
      el("pre", { class: "detail output" }, text));
    box.addEventListener("toggle", () => { if (box.open) openOutputs.add(key); else openOutputs.delete(key); });
    return el("tr", { class: "output-row" }, el("td", { colspan: 7 }, box));
  }

  function attemptsTable(job, runs, found) {
    const rows = [];
    runs.forEach((run, r) => {
      if (runs.length > 1) rows.push(el("tr", { class: "run" }, el("th", { colspan: 7 }, runTitle(run, r))));
      for (const a of run.attempts) {
        rows.push(el("tr", {},
          num("#" + a.attempt), num(a.lease_generation), el("td", { class: "mono" }, a.worker_id),
          el("td", {}, when(a.started_at)), num(seconds(a.seconds)), el("td", {}, a.outcome || "running"),
          el("td", {}, a.error_code ? el("span", { class: a.outcome === "FAILED" ? "bad" : "" }, a.error_code) : "",
            a.error_detail ? el("pre", { class: "detail" }, a.error_detail) : null)));
        if (found.has(a)) rows.push(outputRow(job, a, found.get(a), (runs.length > 1 ? "run " + (r + 1) + " " : "") + "#" + a.attempt));
      }
    });
    return table(["#attempt", "#generation", "worker", "started", "#took", "outcome", "error"], rows);
  }

  // The error that explains a FAILED or waiting job, with the attempt it came from.
  function stateError(job, runs) {
    if (!explainsState(job)) return null;
    let from = null;
    runs.forEach((run, r) => run.attempts.forEach((a) => {
      if (a.error_code === job.error.code) from = (runs.length > 1 ? "run " + (r + 1) + " " : "") + "attempt #" + a.attempt;
    }));
    const title = job.state === "FAILED" ? "Failed with " : "Waiting to retry after ";
    return el("div", { id: "job-error" },
      el("h3", {}, title, el("span", { class: "bad" }, job.error.code), from ? " (" + from + ")" : ""),
      job.error.detail ? el("pre", { class: "detail" }, job.error.detail) : null);
  }

  async function jobView(id) {
    const job = await api("/jobs/" + encodeURIComponent(id));
    const nowIso = new Date().toISOString();
    const runs = runsOf(job);
    const found = await attemptOutputs(job);
    const fields = [
      ["job", job.job_id], ["type", job.job_type + " (pool " + job.pool + ", priority " + job.priority + ")"],
      ["state", job.state], ["attempts", job.attempt_count + " of " + job.max_attempts
        + (runs.length > 1 ? " in run " + runs.length + " (" + (runs.length - 1) + " replay" + (runs.length > 2 ? "s" : "") + ")" : "")],
      ["created", when(job.created_at)], ["run after", when(job.run_after)],
      ["started", when(job.started_at)], ["finished", when(job.finished_at)],
      ["schedule", job.schedule ? job.schedule + " for " + when(job.scheduled_for) : "–"],
      ["dedup key", job.dedup_key || "–"], ["payload ref", job.payload_ref || "–"],
      ["result", job.result_ref || "–"], ["args", job.args === null ? "–" : JSON.stringify(job.args)],
    ];
    if (job.lease) {
      fields.push(["lease", job.lease.owner + " (generation " + job.lease.generation + "), last heartbeat "
        + seconds(job.lease.last_heartbeat_age_seconds) + " ago" + (job.lease.expired ? ", EXPIRED" : "")]);
    }
    const parts = [el("h2", {}, "Job ", el("span", { class: "mono" }, job.job_id)),
      el("dl", { class: "fields" }, fields.map(([k, v]) => [el("dt", {}, k), el("dd", { class: k === "args" ? "mono" : "" }, v)]))];
    if (job.progress) {
      const p = job.progress;
      const share = p.total ? Math.min(1, (p.done || 0) / p.total) : null;
      parts.push(el("h3", {}, "Progress"), el("p", {}, (p.stage ? "stage " + p.stage + " " : "")
        + (p.done !== null ? p.done + (p.total !== null ? " / " + p.total : " done") : "")));
      if (share !== null) {
        const bar = el("div", { class: "bar" }, el("div", {}));
        bar.firstChild.style.width = (share * 100).toFixed(1) + "%";
        parts.push(bar);
      }
    }
    parts.push(stateError(job, runs));
    const actions = el("p", { class: "actions" });
    if (job.links.cancel && canAct()) actions.append(el("button", { onclick: () => act(job.links.cancel, "cancel job " + job.job_id) }, "cancel"));
    if (job.links.replay && canAct()) actions.append(el("button", { onclick: () => act(job.links.replay, "replay job " + job.job_id) }, "replay"));
    parts.push(actions, el("h3", {}, "Attempts"), timeline(job, runs, nowIso), attemptsTable(job, runs, found));
    parts.push(actionsTable("job-actions", job.actions));
    return [el("section", { id: "job" }, parts)];
  }

  async function scheduleView(name) {
    const s = await api("/schedules/" + encodeURIComponent(name));
    const nowIso = new Date().toISOString();
    const rows = s.skip_ledger.slice().reverse().map((k) => el("tr", {},
      el("td", {}, when(k.recorded_at)), el("td", {}, k.reason), num(k.count),
      el("td", {}, when(k.first) + " … " + when(k.last)), el("td", {}, k.job_id ? jobLink(k.job_id) : "–")));
    // Who paused it and why: the newest pause among its operator actions.
    if (s.paused && !s.paused_by) {
      const pauses = (s.actions || []).filter((a) => a.action === "pause");
      const last = pauses[pauses.length - 1];
      if (last) s.paused_by = { actor: last.actor, reason: last.reason, at: last.at };
    }
    const fields = [["rule", s.rule + " (" + s.timezone + ")"], ["job type", s.job_type],
      ["state", scheduleState(s)], ["next fire", nextFire(s, nowIso)],
      ["last fire", el("span", {}, whenZoned(s.last_fire_at, s.timezone), s.last_job_id ? [" ", jobLink(s.last_job_id)] : null)]];
    if ("last_outcome" in s) fields.push(["last outcome", lastOutcome(s) || "–"]);
    if ("last_success" in s) fields.push(["last success", s.last_success ? whenZoned(s.last_success, s.timezone) : "never"]);
    if ("last_late" in s) fields.push(["lateness", lateness(s) || el("span", { class: "ok" }, "none recorded")]);
    fields.push(["misfire / overlap", s.misfire + " / " + s.overlap],
      ["skipped", String(s.skipped_count)], ["coalesced", String(s.coalesced_count)]);
    const jobs = el("p", {}, el("a", { href: "#/jobs?schedule=" + encodeURIComponent(s.name) }, "its jobs"));
    const actions = canAct() ? el("p", { class: "actions" },
      el("button", { onclick: () => act(s.links.pause, "pause " + s.name), disabled: s.paused || s.removed }, "pause"),
      el("button", { onclick: () => act(s.links.resume, "resume " + s.name), disabled: !s.paused }, "resume"),
      el("button", { onclick: () => act(s.links.trigger, "trigger " + s.name), disabled: s.removed }, "trigger")) : null;
    return [el("section", { id: "schedule" }, el("h2", {}, "Schedule " + s.name),
      el("dl", { class: "fields" }, fields.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
      actions, jobs,
      el("h3", {}, "Skip ledger (newest first)"),
      table(["recorded", "reason", "#occurrences", "range", "covered by"], rows, "nothing skipped"),
      actionsTable("schedule-actions", s.actions))];
  }

  async function sectionView(name) {
    const data = await api("/dashboard/data");
    if (name === "schedules") return [schedulesTable(data)];
    if (name === "failed") return [failedSection(data, 0)];
    return [workersSection(data)];
  }

  // -- the loop -----------------------------------------------------------------------------
  async function render() {
    const route = location.hash.replace(/^#\/?/, "");
    const mark = route.indexOf("?");
    const path = mark < 0 ? route : route.slice(0, mark);
    const params = new URLSearchParams(mark < 0 ? "" : route.slice(mark + 1));
    if (path.startsWith("jobs/")) return jobView(decodeURIComponent(path.slice(5)));
    if (path === "jobs") return jobsView(params);
    if (route.startsWith("schedules/")) return scheduleView(decodeURIComponent(route.slice(10)));
    if (["schedules", "failed", "workers"].includes(path)) return sectionView(path);
    return overview();
  }
  // Refreshes can overlap (the timer, a new address, an action): only the newest one started
  // may draw, or a slow answer for the page left behind would replace the one asked for.
  let drawing = 0;
  let redraw = true; // false: the view is drawn once, when asked
  async function refresh() {
    clearTimeout(timer);
    const mine = ++drawing;
    redraw = true;
    if (needToken) {
      statusLine.textContent = "waiting for the API token";
      return;
    }
    try {
      if (role === null) role = (await api("/whoami")).role;
      const nodes = await render();
      if (mine !== drawing) return;
      view.replaceChildren(...nodes);
      statusLine.className = "";
      statusLine.textContent = "updated " + new Date().toLocaleTimeString()
        + (redraw ? " · every " + REFRESH_MS / 1000 + " s" : " · a search runs when asked");
    } catch (err) {
      if (mine !== drawing) return;
      statusLine.className = "error";
      statusLine.textContent = "not updated: " + err.message;
    }
    if (redraw) timer = setTimeout(refresh, REFRESH_MS);
  }
  window.addEventListener("hashchange", () => { say(""); refresh(); });
  refresh();
})();
