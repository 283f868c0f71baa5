// The tensortune dashboard: jobs, a job's progress and a workload's best schedules,
// read from the service's own API (/v1) and a job's event stream. The page's state
// lives in its URL (#/jobs?status=running, #/jobs/12?x=time, #/workloads/KEY?target=T),
// so a link can be shared; the API token lives in this browser's local storage only.
"use strict";

const TOKEN_KEY = "tensortune.token";
const KINDS = ["build_error", "run_error", "timeout", "wrong_result", "crashed", "internal", "host_lost"];
const KIND_COLORS = ["#c9362b", "#e07b39", "#c98a1b", "#8e44ad", "#5d6d7e", "#1d2433", "#16a2b8"];
const TASK_COLORS = ["#2f6fde", "#1f9d55", "#e07b39", "#8e44ad", "#c9362b", "#16a2b8"];
const STATES = ["queued", "running", "done", "failed", "cancelled"];
const POLL_MS = 2000;

const view = document.getElementById("view");
const tokenInput = document.getElementById("token");
let leaving = [];  // what the current page must stop (timers, streams, charts) on a new route

// ---- the API -----------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

function headers(extra) {
  const token = localStorage.getItem(TOKEN_KEY);
  return Object.assign(token ? { Authorization: `Bearer ${token}` } : {}, extra || {});
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.body ? { "Content-Type": "application/json" } : {});
  let answer;
  try {
    answer = await fetch(path, opts);
  } catch (err) {
    throw new ApiError(0, `the service does not answer (${err.message})`);
  }
  const text = await answer.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (err) { body = { detail: text }; }
  if (!answer.ok) {
    throw new ApiError(answer.status, (body && body.detail) || `HTTP ${answer.status}`);
  }
  return body;
}

// Server-Sent Events over fetch (EventSource sends no Authorization header): calls
// onJob with each job the stream sends, until it ends or `stop` is called.
function followJob(jobId, onJob, onError) {
  const controller = new AbortController();
  (async () => {
    try {
      const answer = await fetch(`/v1/jobs/${jobId}/events`, {
        headers: headers(), signal: controller.signal,
      });
      if (!answer.ok) {
        const body = await answer.json().catch(() => ({}));
        throw new ApiError(answer.status, body.detail || `HTTP ${answer.status}`);
      }
      const reader = answer.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      let event = null;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 1);
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:") && event === "job") onJob(JSON.parse(line.slice(5)));
          else if (line === "" && event === "end") return;
        }
      }
    } catch (err) {
      if (err.name !== "AbortError") onError(err);
    }
  })();
  return () => controller.abort();
}

// ---- small helpers -------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value !== undefined && value !== null) node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function rate(gflops) {
  return gflops === null || gflops === undefined ? "–" : `${gflops.toFixed(2)} GFLOP/s`;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 1e-3) return `${(seconds * 1e6).toFixed(1)} µs`;
  if (seconds < 1) return `${(seconds * 1000).toFixed(seconds < 0.1 ? 2 : 0)} ms`;
  if (seconds < 90) return `${seconds.toFixed(0)} s`;
  if (seconds < 5400) return `${(seconds / 60).toFixed(0)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

function age(iso) {
  return iso ? `${duration((Date.now() - Date.parse(iso)) / 1000)} ago` : "–";
}

function describe(spec) {
  const args = Object.entries(spec.args || {})
    .map(([name, value]) => `${name}=${JSON.stringify(value)}`).join(" ");
  return `${spec.op || "?"} ${args}`.trim();
}

// A task's name: its operator for a job of specs (on its target when the job has
// several), its place in the model for a model job.
function taskName(job, index) {
  const request = job.request;
  const task = job.tasks[index];
  if (request.model) return `model ${request.model}, task ${index + 1} (${task.workload_key.slice(0, 12)})`;
  const specs = request.workloads;
  const name = describe(specs[index % specs.length] || {});
  return request.targets && request.targets.length ? `${name} on ${task.target.split(" -mattr")[0]}` : name;
}

// Trials of a job's budget: a model job's tasks share it, so each got what it measured.
function trialsOf(job, task) {
  return job.request.model ? task.trials_done : task.trials_asked;
}

function jobTrialsAsked(job) {
  return job.request.model ? job.request.trials : job.tasks.reduce((n, t) => n + t.trials_asked, 0);
}

function state(name) {
  return el("span", { class: `state ${name}` }, name);
}

function message(text, hint, isError) {
  return el("div", { class: `message${isError ? " error" : ""}`, role: isError ? "alert" : null },
    el("div", {}, text), hint ? el("div", { class: "muted" }, hint) : null);
}

function failure(err, what) {
  if (err.status === 401) {
    return message(`${what}: this service needs an API token.`,
      "Paste one in the field above (an admin makes one with: tensortune token create --role read).",
      true);
  }
  if (err.status === 403) return message(`${what}: ${err.message}`, "Use a token of that role.", true);
  if (err.status === 0) return message(`${what}: ${err.message}.`, "Is tensortune serve running?", true);
  return message(`${what}: ${err.message}`, null, true);
}

function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
}

function show(...nodes) {
  fill(view, ...nodes);
}

function stat(label, value) {
  return el("div", { class: "stat" }, el("div", { class: "value" }, value),
    el("div", { class: "label" }, label));
}

// ---- charts (uPlot) ------------------------------------------------------------------

const COUNTS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000];

// A uPlot chart in `container`; `counting`: its x axis counts (trials, jobs), so its
// ticks are whole numbers.
function chart(container, title, xLabel, yLabel, series, data, counting) {
  const width = Math.max(320, container.clientWidth || 520);
  const plot = new uPlot({
    title, width, height: 240,
    scales: { x: { time: false } },
    axes: [counting ? { label: xLabel, incrs: COUNTS } : { label: xLabel }, { label: yLabel, size: 60 }],
    series: [{ label: xLabel }, ...series],
  }, data, container);
  const resize = () => plot.setSize({ width: Math.max(320, container.clientWidth), height: 240 });
  window.addEventListener("resize", resize);
  leaving.push(() => { window.removeEventListener("resize", resize); plot.destroy(); });
  return plot;
}

const points = (label, stroke) => ({
  label, stroke, paths: () => null, points: { show: true, size: 5, fill: stroke },
});
const line = (label, stroke) => ({ label, stroke, width: 2, points: { show: false } });

// ---- the jobs page -----------------------------------------------------------------

async function jobsPage(params) {
  const status = params.get("status") || "";
  const filter = el("select", {
    "aria-label": "state",
    onchange: (e) => { location.hash = e.target.value ? `#/jobs?status=${e.target.value}` : "#/jobs"; },
  }, el("option", { value: "" }, "every state"), STATES.map((s) => el("option", { value: s }, s)));
  filter.value = status;
  const body = el("tbody");
  const table = el("table", { id: "jobs" },
    el("thead", {}, el("tr", {}, ["Job", "State", "Workloads", "Trials", "Best", "Errors", "Age", ""]
      .map((h, i) => el("th", { class: [3, 4, 5].includes(i) ? "num" : "" }, h)))), body);
  const note = el("div");
  show(el("h1", {}, "Jobs"), el("p", { class: "sub" }, "Newest first, updated every 2 s."),
    el("div", { class: "toolbar" }, el("label", {}, "Show ", filter)), note, table, submitForm());

  async function refresh() {
    try {
      const query = status ? `?status=${status}&limit=100` : "?limit=100";
      const jobs = await api(`/v1/jobs${query}`);
      note.replaceChildren();
      body.replaceChildren(...jobs.map(jobRow));
      if (!jobs.length) {
        note.replaceChildren(message(status ? `No ${status} jobs.` : "No jobs yet.",
          "Submit one below, or from a shell: tensortune submit matmul --shape 256 256 256"));
      }
    } catch (err) {
      note.replaceChildren(failure(err, "The jobs could not be read"));
    }
  }
  await refresh();
  const timer = setInterval(refresh, POLL_MS);
  leaving.push(() => clearInterval(timer));
}

function jobRow(job) {
  const done = job.tasks.reduce((n, t) => n + t.trials_done, 0);
  const asked = jobTrialsAsked(job);
  const rates = job.tasks.map((t) => t.best_gflops).filter((r) => r);
  const errors = job.tasks.reduce((n, t) => n + Object.values(t.errors).reduce((a, b) => a + b, 0), 0);
  const cancellable = job.status === "queued" || job.status === "running";
  return el("tr", { "data-job": job.id },
    el("td", {}, el("a", { href: `#/jobs/${job.id}` }, `#${job.id}`)),
    el("td", {}, state(job.status)),
    el("td", {}, job.request.model ? `model ${job.request.model}`
      : job.request.workloads.map(describe).join(", ")),
    el("td", { class: "num" }, `${done} / ${asked}`),
    el("td", { class: "num" }, rate(rates.length ? Math.max(...rates) : null)),
    el("td", { class: "num" }, errors),
    el("td", {}, age(job.created_at)),
    el("td", {}, cancellable ? cancelButton(job.id) : null));
}

function cancelButton(jobId) {
  return el("button", {
    class: "danger", "data-cancel": jobId,
    onclick: async (e) => {
      e.target.disabled = true;
      try {
        await api(`/v1/jobs/${jobId}/cancel`, { method: "POST" });
        e.target.replaceWith(el("span", { class: "muted" }, "cancelling"));
      } catch (err) {
        e.target.replaceWith(failure(err, `Job ${jobId} was not cancelled`));
      }
    },
  }, "Cancel");
}

function submitForm() {
  const spec = el("textarea", { name: "workloads", "aria-label": "operator specs (JSON)" },
    '[{"op": "matmul", "args": {"m": 256, "n": 256, "k": 256}}]');
  const field = (label, input) => el("label", {}, label, input);
  const trials = el("input", { name: "trials", type: "number", min: 1, value: 64 });
  const tuner = el("input", { name: "tuner", value: "auto" });
  const space = el("select", { name: "space" }, ["auto", "template", "generated"]
    .map((s) => el("option", { value: s }, s)));
  const priority = el("input", { name: "priority", type: "number", value: 0 });
  const outcome = el("div");
  const form = el("form", {
    class: "submit",
    onsubmit: async (e) => {
      e.preventDefault();
      let workloads;
      try { workloads = JSON.parse(spec.value); } catch (err) {
        outcome.replaceChildren(message(`The specs are not JSON: ${err.message}`, null, true));
        return;
      }
      try {
        const job = await api("/v1/jobs", {
          method: "POST",
          body: JSON.stringify({
            workloads: Array.isArray(workloads) ? workloads : [workloads],
            trials: Number(trials.value), tuner: tuner.value, space: space.value,
            priority: Number(priority.value),
          }),
        });
        outcome.replaceChildren(message("Queued: ", null, false));
        outcome.firstChild.firstChild.append(el("a", { href: `#/jobs/${job.id}` }, `job ${job.id}`));
      } catch (err) {
        outcome.replaceChildren(failure(err, "The job was not submitted"));
      }
    },
  }, spec, field("Trials per workload", trials), field("Search", tuner), field("Space", space),
  field("Priority", priority), el("div", {}, el("button", { class: "primary", type: "submit" }, "Submit")),
  outcome);
  return el("details", { class: "card" }, el("summary", {}, "Submit a job (needs a submit token)"), form);
}

// ---- one job -------------------------------------------------------------------------

async function jobPage(jobId, params) {
  const axis = params.get("x") === "time" ? "time" : "trials";
  let job;
  try {
    job = await api(`/v1/jobs/${jobId}`);
  } catch (err) {
    if (err.status === 404 || err.status === 422) {
      show(message(`There is no job ${jobId} in this service.`,
        "It may have been mistyped; the jobs list has every job.", true),
      el("p", {}, el("a", { href: "#/jobs" }, "← all jobs")));
    } else {
      show(failure(err, `Job ${jobId} could not be read`));
    }
    return;
  }
  const header = el("div");
  const share = el("div");
  const toggle = el("div", { class: "toolbar" }, "Plot against ",
    ["trials", "time"].map((x) => el("a", {
      href: `#/jobs/${jobId}?x=${x}`, class: x === axis ? "active" : "", "data-axis": x,
    }, x === "trials" ? "trials" : "time (s)")));
  const cards = el("div", { class: "grid" });
  show(el("p", {}, el("a", { href: "#/jobs" }, "← all jobs")), header, share, toggle, cards);

  const trials = [];  // every measurement of the job so far, oldest first
  const perTask = new Map();  // task id -> { card, rateChart, errorChart, ... }
  let lastId = 0;
  let fetching = false;

  function drawHeader() {
    const started = job.started_at ? Date.parse(job.started_at) : null;
    const ended = job.finished_at ? Date.parse(job.finished_at) : Date.now();
    const measured = job.tasks.reduce((n, t) => n + t.measured, 0);
    const perSecond = started && ended > started ? measured / ((ended - started) / 1000) : null;
    const cancellable = job.status === "queued" || job.status === "running";
    fill(header,
      el("h1", {}, `Job ${job.id} `, state(job.status)),
      el("p", { class: "sub" }, `submitted ${age(job.created_at)} · priority ${job.priority} · `
        + `target ${job.request.target} · ${job.request.tuner} search, ${job.request.space} space`),
      job.error ? message(`The job failed: ${job.error}`, null, true) : null,
      el("div", { class: "stats" },
        stat("trials done", `${job.tasks.reduce((n, t) => n + t.trials_done, 0)} / `
          + `${jobTrialsAsked(job)}`),
        stat("trials per second", perSecond === null ? "–" : perSecond.toFixed(2)),
        stat("time left", job.status === "running" || job.status === "queued"
          ? duration(job.seconds_left) : "–"),
        stat("measured here", measured)),
      cancellable ? el("p", {}, cancelButton(job.id)) : null);
    if (job.tasks.length > 1) {
      const total = Math.max(1, job.tasks.reduce((n, t) => n + trialsOf(job, t), 0));
      share.replaceChildren(el("div", { class: "card" }, el("h2", {}, "Budget by task"),
        el("div", { class: "share" }, job.tasks.map((t, i) => el("span", {
          style: `width:${(100 * trialsOf(job, t)) / total}%;background:${TASK_COLORS[i % 6]}`,
          title: `${taskName(job, i)}: ${trialsOf(job, t)} trials`,
        }))),
        el("div", { class: "legend" }, job.tasks.map((t, i) => el("span", {},
          el("span", { class: "swatch", style: `background:${TASK_COLORS[i % 6]}` }),
          `${taskName(job, i)}: ${t.trials_done} / ${t.trials_asked} `
          + `(${((100 * trialsOf(job, t)) / total).toFixed(0)} %)`)))));
    }
  }

  function taskCard(task, index) {
    if (perTask.has(task.id)) return perTask.get(task.id);
    const rateBox = el("div", { class: "chart", "data-chart": "rate", "data-points": 0 });
    const errorBox = el("div", { class: "chart", "data-chart": "errors" });
    const summary = el("div");
    const card = el("section", { class: "card", "data-task": task.id },
      el("h2", {}, taskName(job, index)), summary, rateBox, errorBox);
    cards.append(card);
    const xLabel = axis === "time" ? "seconds since the job started" : "trial";
    const entry = {
      summary, rateBox,
      rateChart: chart(rateBox, "GFLOP/s of each trial, and the best so far", xLabel, "GFLOP/s",
        [points("each trial", "#9bb5e6"), line("best so far", "#2f6fde")], [[], [], []],
        axis === "trials"),
      errorChart: chart(errorBox, "Failed trials so far, by kind", xLabel, "trials",
        KINDS.map((k, i) => line(k.replace("_", " "), KIND_COLORS[i])), [[], ...KINDS.map(() => [])],
        axis === "trials"),
    };
    perTask.set(task.id, entry);
    return entry;
  }

  function drawTasks() {
    const origin = job.started_at ? Date.parse(job.started_at) : Date.parse(job.created_at);
    job.tasks.forEach((task, index) => {
      const entry = taskCard(task, index);
      const errors = Object.entries(task.errors);
      fill(entry.summary,
        el("div", { class: "stats" }, stat("best", rate(task.best_gflops)),
          stat("trials", `${task.trials_done} / ${task.trials_asked}`), stat("state", task.status),
          stat("time left", task.status === "done" ? "–" : duration(task.seconds_left))),
        el("div", { class: "bar" }, el("span", {
          style: `width:${(100 * task.trials_done) / Math.max(1, task.trials_asked)}%`,
        })),
        errors.length
          ? el("p", { class: "kinds" },
            errors.map(([kind, n]) => el("span", {}, `${n} ${kind.replace("_", " ")}`)))
          : el("p", { class: "muted" }, "no failed trials"));
      const mine = trials.filter((t) => t.task_id === task.id);
      const xs = mine.map((t, i) => (axis === "time" ? (Date.parse(t.at) - origin) / 1000 : i + 1));
      let best = null;
      const bests = mine.map((t) => { if (t.gflops && (best === null || t.gflops > best)) best = t.gflops; return best; });
      entry.rateChart.setData([xs, mine.map((t) => t.gflops), bests]);
      entry.rateBox.setAttribute("data-points", mine.length);
      const counts = KINDS.map(() => 0);
      const series = KINDS.map(() => []);
      for (const t of mine) {
        const k = KINDS.indexOf(t.error_kind);
        if (k >= 0) counts[k] += 1;
        series.forEach((s, i) => s.push(counts[i]));
      }
      entry.errorChart.setData([xs, ...series]);
    });
  }

  async function more() {
    if (fetching) return;
    fetching = true;
    try {
      for (;;) {
        const page = await api(`/v1/jobs/${jobId}/trials?after_id=${lastId}&limit=5000`);
        trials.push(...page);
        if (page.length) lastId = page[page.length - 1].id;
        if (page.length < 5000) break;
      }
      drawTasks();
    } catch (err) {
      cards.prepend(failure(err, "The trials could not be read"));
    } finally {
      fetching = false;
    }
  }

  drawHeader();
  await more();
  if (job.status === "queued" || job.status === "running") {
    const stop = followJob(jobId, (update) => { job = update; drawHeader(); more(); },
      (err) => header.append(failure(err, "The live updates stopped")));
    leaving.push(stop);
  }
}

// ---- workloads -------------------------------------------------------------------

async function workloadsPage() {
  let workloads;
  try {
    workloads = await api("/v1/workloads");
  } catch (err) {
    show(failure(err, "The workloads could not be read"));
    return;
  }
  show(el("h1", {}, "Workloads"),
    el("p", { class: "sub" }, "Every workload the tuning database holds."),
    workloads.length ? el("table", { id: "workloads" },
      el("thead", {}, el("tr", {}, el("th", {}, "Workload"), el("th", {}, "Key"),
        el("th", { class: "num" }, "GFLOP per call"))),
      el("tbody", {}, workloads.map((w) => el("tr", {},
        el("td", {}, el("a", { href: `#/workloads/${w.key}` }, w.name)),
        el("td", {}, el("code", {}, w.key.slice(0, 12))),
        el("td", { class: "num" }, w.flop_count === null ? "–" : (w.flop_count / 1e9).toFixed(3))))))
      : message("No workload is stored yet.", "Tune one: tensortune tune matmul --shape 256 256 256"));
}

async function workloadPage(key, params) {
  let workload;
  let targets;
  try {
    [workload, targets] = await Promise.all([
      api(`/v1/workloads/${key}`), api(`/v1/workloads/${key}/targets`)]);
  } catch (err) {
    if (err.status === 404) {
      show(message(`There is no workload ${key.slice(0, 12)} in this service.`,
        "The workloads list has every stored workload.", true));
    } else {
      show(failure(err, "The workload could not be read"));
    }
    return;
  }
  const target = params.get("target") || targets[0];
  const picker = el("select", {
    "aria-label": "target",
    onchange: (e) => { location.hash = `#/workloads/${key}?target=${encodeURIComponent(e.target.value)}`; },
  }, targets.map((t) => el("option", { value: t }, t)));
  picker.value = target;
  const bestBox = el("div");
  const detail = el("div", { class: "grid" });
  const historyBox = el("div", { class: "chart", "data-chart": "history" });
  show(el("p", {}, el("a", { href: "#/workloads" }, "← all workloads")),
    el("h1", {}, workload.name),
    el("p", { class: "sub" }, `key ${workload.key.slice(0, 12)} · `
      + `${workload.flop_count === null ? "?" : (workload.flop_count / 1e9).toFixed(3)} GFLOP per call`),
    targets.length ? el("div", { class: "toolbar" }, el("label", {}, "Target ", picker)) : null,
    targets.length ? el("div", { class: "card" }, el("h2", {}, "Best schedules"), bestBox) : message(
      "No measurement of this workload is stored yet.", "Submit a job for it on the jobs page."),
    detail, targets.length ? el("div", { class: "card" },
      el("h2", {}, "How the best improved from job to job"), historyBox) : null);
  if (!targets.length) return;
  const q = `target=${encodeURIComponent(target)}`;
  try {
    const [best, history] = await Promise.all([
      api(`/v1/workloads/${key}/best?${q}&k=5`), api(`/v1/workloads/${key}/history?${q}`)]);
    bestBox.replaceChildren(el("table", { id: "best" },
      el("thead", {}, el("tr", {}, ["#", "GFLOP/s", "timed by", "search GFLOP/s", "time", "job", ""]
        .map((h) => el("th", {}, h)))),
      el("tbody", {}, best.map((b, i) => el("tr", {},
        el("td", {}, i + 1), el("td", {}, rate(b.gflops)),
        el("td", {}, b.retimed ? `re-timing (fastest of ${b.run_times.length})` : "the search"),
        el("td", {}, rate(b.search_gflops)), el("td", {}, duration(b.seconds)),
        el("td", {}, b.job_id ? el("a", { href: `#/jobs/${b.job_id}` }, `#${b.job_id}`) : "–"),
        el("td", {}, el("button", { onclick: () => showSchedule(b, detail) }, "schedule")))))));
    if (best.length) await showSchedule(best[0], detail);
    let top = null;
    const ahead = history.map((h) => { if (h.best_gflops && (top === null || h.best_gflops > top)) top = h.best_gflops; return top; });
    chart(historyBox, "Best GFLOP/s of each job, and the best so far", "job (oldest first)",
      "GFLOP/s", [points("job's best", "#9bb5e6"), line("best so far", "#2f6fde")],
      [history.map((_, i) => i + 1), history.map((h) => h.best_gflops), ahead], true);
    historyBox.setAttribute("data-points", history.length);
  } catch (err) {
    bestBox.replaceChildren(failure(err, "The best schedules could not be read"));
  }
}

async function showSchedule(best, detail) {
  const nest = el("pre", { id: "loop-nest" }, "lowering…");
  detail.replaceChildren(
    el("section", { class: "card" }, el("h2", {}, `Schedule of record ${best.id} (Python)`),
      el("pre", { id: "trace" }, best.python)),
    el("section", { class: "card" }, el("h2", {}, "The loop nest it makes"), nest));
  try {
    nest.textContent = (await api(`/v1/records/${best.id}/loop-nest`)).loop_nest;
  } catch (err) {
    nest.replaceWith(failure(err, "The loop nest could not be made"));
  }
}

// ---- routing -------------------------------------------------------------------------

async function route() {
  for (const stop of leaving) stop();
  leaving = [];
  const [path, query] = (location.hash.slice(1) || "/jobs").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  document.querySelectorAll("[data-nav]").forEach((a) => {
    a.classList.toggle("active", a.dataset.nav === parts[0]);
  });
  if (parts[0] === "jobs" && parts.length === 2) return jobPage(parts[1], params);
  if (parts[0] === "workloads" && parts.length === 2) return workloadPage(parts[1], params);
  if (parts[0] === "workloads") return workloadsPage();
  return jobsPage(params);
}

tokenInput.value = localStorage.getItem(TOKEN_KEY) || "";
tokenInput.addEventListener("change", () => {
  const token = tokenInput.value.trim();
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
  route();
});
window.addEventListener("hashchange", route);
route();
