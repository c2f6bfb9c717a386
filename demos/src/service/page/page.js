// The operator's page of the loopbound service example.
//
// What a model, a tool, an argument or a label wrote is untrusted: it enters the page only as
// text (`textContent`), never as markup, and the service's Content-Security-Policy runs no
// script but this file. The approver is never named here: a development token comes from the
// link the page was opened with (`#token=…`, kept in this tab only); behind a proxy, the proxy
// adds the approver to each command.
"use strict";

const TOKEN_KEY = "loopbound-approver-token";
const LIST_EVERY_MS = 2000;
const RUN_EVERY_MS = 3000;
const POOLS_EVERY_MS = 3000;

const $ = (id) => document.getElementById(id);

// ---- the approver's token: from the link's fragment, into this tab's session only ----

(function takeToken() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get("token");
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, "", location.pathname + location.search);
  }
})();

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

function showWho() {
  $("who").textContent = token()
    ? "Commands are sent with the development token of the link this tab was opened with."
    : "Commands are sent without a token: the proxy in front of the service names the approver.";
}

// ---- small helpers ----

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

async function getJson(path) {
  const response = await fetch(path, { headers: { accept: "application/json" }, cache: "no-store" });
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  return { code: response.status, body };
}

async function command(path, body) {
  const headers = { "content-type": "application/json", accept: "application/json" };
  const held = token();
  if (held) headers.authorization = "Bearer " + held;
  const response = await fetch(path, { method: "POST", headers, body: JSON.stringify(body || {}) });
  let answer = null;
  try {
    answer = await response.json();
  } catch (_) {
    answer = null;
  }
  return { code: response.status, body: answer };
}

function refusal(answer) {
  const error = answer.body && answer.body.error;
  const said = error ? `refused (${answer.code} ${error.kind}): ${error.message}` : `refused (${answer.code})`;
  return answer.code === 401
    ? said + ". Open this page with the link the service's start printed (…/#token=…), or through the proxy that names you."
    : said;
}

// ---- the list of runs ----

const list = { cursors: [], next: null, selected: null };

function listQuery() {
  const params = new URLSearchParams();
  const state = $("state-filter").value;
  const tenant = $("tenant-filter").value;
  if (state) params.set("state", state);
  if (tenant) params.set("tenant", tenant);
  const after = list.cursors[list.cursors.length - 1];
  if (after) params.set("after", after);
  params.set("limit", "25");
  return "/runs?" + params.toString();
}

// A journal state as the page names it: a waiting or ambiguous run by the status its attempt
// ended with, so that the list, the run and its stream say the same word.
const STATE_NAMES = { awaiting_approval: "AwaitingApproval", ambiguous: "Ambiguous", open: "open", finished: "finished" };

function stateName(state) {
  return STATE_NAMES[state] || state;
}

function stateText(run) {
  if (run.running) return "running";
  if (run.status) return run.status;
  return stateName(run.state);
}

async function refreshList() {
  let answer;
  try {
    answer = await getJson(listQuery());
  } catch (error) {
    showListError("the service did not answer: " + error);
    return;
  }
  if (answer.code !== 200 || !answer.body) {
    showListError(refusal(answer));
    return;
  }
  $("list-error").hidden = true;
  const rows = answer.body.runs.map((run) => {
    const row = document.createElement("tr");
    row.dataset.run = run.id;
    row.appendChild(element("td", run.id, "id"));
    row.appendChild(element("td", run.task || ""));
    row.appendChild(element("td", run.tenant || ""));
    row.appendChild(element("td", stateText(run), "state-" + (run.running ? "running" : run.state)));
    row.appendChild(element("td", run.attempts));
    if (run.id === list.selected) row.classList.add("selected");
    row.addEventListener("click", () => select(run.id));
    return row;
  });
  $("runs").tBodies[0].replaceChildren(...rows);
  $("no-runs").hidden = rows.length > 0;
  list.next = answer.body.next;
  $("next-page").disabled = !list.next;
  $("first-page").disabled = list.cursors.length === 0;
}

function showListError(message) {
  $("list-error").textContent = message;
  $("list-error").hidden = false;
}

function restartList() {
  list.cursors = [];
  refreshList();
}

// ---- one run: its state, its proposal, its commands, its live stream ----

// `lastEnd` is how the last attempt the stream showed ended: an outcome's status, or "error".
const run = { id: null, source: null, lastId: 0, lastEnd: null, tools: new Map(), links: {} };

function select(id) {
  if (run.source) run.source.close();
  run.id = id;
  run.source = null;
  run.lastId = 0;
  run.lastEnd = null;
  run.tools = new Map();
  list.selected = id;
  for (const row of $("runs").tBodies[0].rows) row.classList.toggle("selected", row.dataset.run === id);
  const url = new URL(location.href);
  url.searchParams.set("run", id);
  history.replaceState(null, "", url.pathname + url.search);
  $("run").hidden = false;
  $("run-id").textContent = id;
  $("stream").replaceChildren();
  $("outcome").hidden = true;
  $("command-result").textContent = "";
  refreshRun();
  follow();
}

function follow() {
  const id = run.id;
  const source = new EventSource(`/runs/${encodeURIComponent(id)}/events`);
  run.source = source;
  source.addEventListener("open", () => {
    $("stream-state").textContent = "(connected)";
  });
  source.addEventListener("error", () => {
    if (run.source === source && source.readyState !== EventSource.CLOSED) {
      // A stream ends after an attempt's outcome; the browser asks again every second.
      $("stream-state").textContent =
        run.lastEnd === "AwaitingApproval"
          ? "(paused: the run waits for a decision)"
          : run.lastEnd
            ? "(paused: the run continues here when it resumes)"
            : "(reconnecting)";
    }
  });
  source.addEventListener("message", (message) => {
    if (run.id !== id) return;
    let update;
    try {
      update = JSON.parse(message.data);
    } catch (_) {
      return;
    }
    show(message.lastEventId, update);
    if (update.type === "outcome" || update.type === "error") refreshRun();
  });
}

function describeEvent(event) {
  const parts = [event.kind, event.name];
  if (event.count) parts.push(String(event.count));
  if (event.by) parts.push("by " + event.by);
  if (event.reason) parts.push("(" + event.reason + ")");
  return parts.join(" ");
}

function show(id, update) {
  let text;
  let className = update.type;
  switch (update.type) {
    case "event":
      text = describeEvent(update);
      break;
    case "text":
      text = update.text;
      break;
    case "tool_started":
      run.tools.set(update.call_id, update.name);
      text = "→ " + update.name;
      break;
    case "tool_result":
      text = "← " + (run.tools.get(update.call_id) || "tool") + ": " + update.text;
      if (update.is_error) className += " failed";
      break;
    case "suspended":
      text = "suspended: " + update.status + (update.operation ? " on " + update.operation : "");
      break;
    case "outcome":
      text = "outcome: " + update.status;
      run.lastEnd = update.status;
      showOutcome(update);
      break;
    case "error":
      text = "ended without an outcome: " + (update.kind || "") + " " + (update.message || "");
      run.lastEnd = "error";
      break;
    default:
      text = update.type;
  }
  const item = element("li", text, className);
  item.dataset.id = id;
  $("stream").appendChild(item);
  const number = Number(id);
  if (Number.isSafeInteger(number)) run.lastId = number;
  const stream = $("stream");
  stream.scrollTop = stream.scrollHeight;
}

function figures(object) {
  if (!object || typeof object !== "object") return object === null || object === undefined ? "" : String(object);
  return Object.entries(object)
    .filter(([, value]) => value !== null && typeof value !== "object")
    .map(([key, value]) => key.replace(/_/g, " ") + " " + value)
    .join(", ");
}

function showOutcome(outcome) {
  $("outcome").hidden = false;
  $("outcome-status").textContent = outcome.status;
  $("outcome-detail").textContent = outcome.detail || "";
  $("outcome-detail").hidden = !outcome.detail;
  $("outcome-detail-term").hidden = !outcome.detail;
  $("outcome-usage").textContent = figures(outcome.usage);
  $("outcome-spend").textContent = figures(outcome.spend);
  $("outcome-text").textContent = outcome.text || outcome.partial_text || "";
}

function runState(body) {
  if (body.state === "running") return "running";
  if (body.state === "ended") {
    if (body.outcome) return body.outcome.status;
    return "ended: " + (body.error ? body.error.kind : "error");
  }
  const journal = body.journal || {};
  const state = journal.status || stateName(journal.state || "");
  return journal.held ? state + " (held by another process)" : state;
}

async function refreshRun() {
  const id = run.id;
  if (!id) return;
  let answer;
  try {
    answer = await getJson(`/runs/${encodeURIComponent(id)}`);
  } catch (_) {
    return;
  }
  if (run.id !== id || !answer.body) return;
  if (answer.body.error && !answer.body.state) {
    $("run-state").textContent = refusal(answer);
    return;
  }
  const body = answer.body;
  $("run-state").textContent = runState(body);
  run.links = body.links || {};
  const pending = body.pending;
  $("pending").hidden = !(pending && run.links.approve);
  if (pending) {
    $("pending-tool").textContent = pending.tool;
    $("pending-capability").textContent = pending.capability;
    $("pending-operation").textContent = pending.operation;
    $("pending-arguments").textContent = pretty(pending.arguments);
    run.digest = pending.digest;
  } else {
    run.digest = null;
  }
  $("cancel").hidden = !run.links.cancel;
  $("resume").hidden = !run.links.resume;
  $("close-box").hidden = !run.links.close;
  if (body.state === "ended" && body.outcome) showOutcome(body.outcome);
  // Nothing more can happen to a run with no command left: once the stream has shown how it
  // ended, stop following it.
  const commands = Object.keys(run.links).filter((name) => name !== "self" && name !== "events");
  const status = body.outcome ? body.outcome.status : body.journal ? body.journal.status : null;
  // A closing adds no line: the stream ended with the attempt before it.
  const shown = status && (run.lastEnd === status || (status === "Closed" && run.lastEnd !== null));
  if (commands.length === 0 && body.state !== "running" && shown && run.source) {
    run.source.close();
    $("stream-state").textContent = "(ended)";
  }
}

function pretty(argumentsText) {
  try {
    return JSON.stringify(JSON.parse(argumentsText), null, 2);
  } catch (_) {
    return String(argumentsText);
  }
}

async function send(action, body, done) {
  const id = run.id;
  if (!id) return;
  const buttons = ["approve", "deny", "cancel", "resume", "close"].map($);
  buttons.forEach((button) => (button.disabled = true));
  try {
    const answer = await command(`/runs/${encodeURIComponent(id)}/${action}`, body);
    $("command-result").textContent = answer.code < 300 ? done : refusal(answer);
  } catch (error) {
    $("command-result").textContent = "the service did not answer: " + error;
  } finally {
    buttons.forEach((button) => (button.disabled = false));
  }
  refreshRun();
  refreshList();
}

// ---- the tenants' pools ----

async function refreshPools() {
  let answer;
  try {
    answer = await getJson("/tenants");
  } catch (_) {
    return;
  }
  if (answer.code !== 200 || !answer.body) return;
  const tenants = answer.body.tenants;
  $("no-pools").hidden = tenants.length > 0;
  for (const select of [$("tenant-filter"), $("try-tenant")]) {
    const known = new Set(Array.from(select.options, (option) => option.value));
    for (const tenant of tenants) {
      if (!known.has(tenant.tenant)) select.appendChild(new Option(tenant.tenant, tenant.tenant));
    }
  }
  const bars = tenants.map((tenant) => {
    const box = element("div", undefined, "pool");
    box.dataset.tenant = tenant.tenant;
    box.appendChild(element("div", tenant.tenant, "pool-name"));
    const bar = element("div", undefined, "bar");
    const share = (amount) => (tenant.limit > 0 ? Math.min(100, (100 * amount) / tenant.limit) : 0) + "%";
    const settled = element("div", undefined, "settled");
    settled.style.width = share(tenant.settled);
    const held = element("div", undefined, "held");
    held.style.width = share(tenant.held);
    bar.append(settled, held);
    box.appendChild(bar);
    const line = `settled ${tenant.settled} · held ${tenant.held} · left ${tenant.left} of ${tenant.limit} tokens this ${tenant.window}`;
    box.appendChild(element("div", line, "pool-figures"));
    return box;
  });
  $("pool-bars").replaceChildren(...bars);
}

// ---- starting a run, to try the service ----

const TRY_PROMPTS = { save: "Save a summary of ticket 7.", answer: "What is ticket 7 about?" };
const TRY_GRANTS = { save: ["tickets.read", "mcp.filesystem.write_file"], answer: ["tickets.read"] };

async function startRun() {
  const task = $("try-task").value;
  const request = { task, prompt: $("try-prompt").value, grants: TRY_GRANTS[task] };
  if ($("try-tenant").value) request.tenant = $("try-tenant").value;
  try {
    const response = await fetch("/runs", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify(request),
    });
    const answer = { code: response.status, body: await response.json() };
    if (answer.code === 202) {
      $("try-result").textContent = "started " + answer.body.id;
      refreshList();
      select(answer.body.id);
    } else {
      $("try-result").textContent = refusal(answer);
    }
  } catch (error) {
    $("try-result").textContent = "the service did not answer: " + error;
  }
}

// ---- wiring ----

function start() {
  showWho();
  $("state-filter").addEventListener("change", restartList);
  $("tenant-filter").addEventListener("change", restartList);
  $("next-page").addEventListener("click", () => {
    if (list.next) list.cursors.push(list.next);
    refreshList();
  });
  $("first-page").addEventListener("click", restartList);
  $("approve").addEventListener("click", () => send("approve", { digest: run.digest }, "approved: the run resumes"));
  $("deny").addEventListener("click", () => send("deny", { digest: run.digest }, "denied: the run ends Denied"));
  $("cancel").addEventListener("click", () => send("cancel", {}, "cancel sent"));
  $("resume").addEventListener("click", () => send("resume", {}, "resumed"));
  $("close").addEventListener("click", () => send("close", { reason: $("close-reason").value }, "closed"));
  $("try-task").addEventListener("change", () => ($("try-prompt").value = TRY_PROMPTS[$("try-task").value]));
  $("try-start").addEventListener("click", startRun);
  refreshList();
  refreshPools();
  setInterval(refreshList, LIST_EVERY_MS);
  setInterval(refreshRun, RUN_EVERY_MS);
  setInterval(refreshPools, POOLS_EVERY_MS);
  const wanted = new URLSearchParams(location.search).get("run");
  if (wanted) select(wanted);
}

start();
