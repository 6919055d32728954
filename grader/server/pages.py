"""The submission server's two pages, as text (the student kit and the Gradescope bundle copy grader/'s .py files
only). Every value from the API reaches the page through `textContent` or an attribute set by script, never
through markup: a student's file name, message or printed output shows as the characters it holds."""

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }
pre { background: #f4f4f4; padding: 0.8rem; overflow-x: auto; white-space: pre; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 0.2rem 0.5rem; }
.hidden { display: none; } #error { color: #a00; }
"""

_CSP = "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline';"
"""No script, style or picture from anywhere else (the page's own inline script and style only)."""

STUDENT_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Submit a kernel</title>
<meta http-equiv="Content-Security-Policy" content="@CSP@ img-src 'self' blob:;">
<style>""" + _STYLE + """</style></head>
<body>
<h1 id="title">Submit a kernel</h1>
<section id="signin">
  <label>Your token <input id="token" type="password" autocomplete="off" size="40"></label>
  <button id="signin-button">Sign in</button>
</section>
<section id="work" class="hidden">
  <p>Signed in as <b id="who"></b>. <span id="limits"></span></p>
  <label>Task <select id="task"></select></label>
  <input id="file" type="file" accept=".py,.ipynb">
  <button id="submit-button">Submit</button>
  <p id="state"></p>
  <pre id="report"></pre>
  <div id="pictures"></div>
  <h2>Your attempts</h2>
  <table><thead><tr><th>#</th><th>task</th><th>file</th><th>submitted</th><th>state</th><th>score</th></tr></thead>
  <tbody id="attempts"></tbody></table>
</section>
<p id="error"></p>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("grader-token") || "";
function say(id, text) { $(id).textContent = text; }
async function api(path, options) {
  options = options || {};
  options.headers = Object.assign({"Authorization": "Bearer " + token}, options.headers || {});
  const response = await fetch(path, options);
  let body = null;
  try { body = await response.json(); } catch (e) { body = {detail: "the server answered " + response.status}; }
  if (!response.ok) { throw new Error(typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)); }
  return body;
}
function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) { const td = document.createElement("td"); td.textContent = String(c); tr.appendChild(td); }
  return tr;
}
async function refresh() {
  const mine = await api("/api/results");
  say("who", mine.student);
  const body = $("attempts");
  body.replaceChildren();
  for (const s of mine.submissions.slice().reverse()) {
    const score = s.score === null || s.score === undefined ? "" : s.score + " / " + s.max_score;
    body.appendChild(row([s.id, s.task, s.filename, s.submitted_at,
                          s.state + (s.speed === "pending" ? " (speed: pending)" : ""), score]));
  }
  return mine;
}
async function signIn() {
  token = $("token").value.trim();
  say("error", "");
  try {
    await refresh();
  } catch (e) { say("error", e.message); return; }
  sessionStorage.setItem("grader-token", token);
  const info = await (await fetch("/api/tasks")).json();
  say("title", info.title);
  say("limits", (info.max_attempts ? "Up to " + info.max_attempts + " attempts per task. " : "")
      + (info.deadline ? "Deadline: " + info.deadline + "." : ""));
  const select = $("task");
  select.replaceChildren();
  for (const t of info.tasks) {
    const o = document.createElement("option"); o.value = t.id; o.textContent = t.id + " (" + t.points + " pts)";
    select.appendChild(o);
  }
  $("signin").classList.add("hidden");
  $("work").classList.remove("hidden");
}
async function showPictures(s) {
  const box = $("pictures");
  box.replaceChildren();
  for (const t of ((s.result || {}).tests || [])) {
    if (!t.picture) continue;
    const response = await fetch("/api/pictures/" + s.id + "/" + encodeURIComponent(t.name),
                                 {headers: {"Authorization": "Bearer " + token}});
    if (!response.ok) continue;
    const img = document.createElement("img");
    img.alt = t.name; img.src = URL.createObjectURL(await response.blob());
    const cap = document.createElement("p"); cap.textContent = t.name;
    box.appendChild(cap); box.appendChild(img);
  }
}
async function submit() {
  say("error", ""); say("report", ""); $("pictures").replaceChildren();
  const file = $("file").files[0];
  if (!file) { say("error", "choose a file first"); return; }
  const task = $("task").value;
  let s;
  try {
    s = await api("/api/submit?task=" + encodeURIComponent(task) + "&filename=" + encodeURIComponent(file.name),
                  {method: "POST", body: await file.arrayBuffer()});
  } catch (e) { say("error", e.message); return; }
  say("state", "submission " + s.id + ": " + s.state);
  const verdict = (s) => "submission " + s.id + ": " + s.state + (s.score !== null && s.score !== undefined
      ? ", score " + s.score + " / " + s.max_score : "") + (s.speed === "pending" ? " (speed: pending)" : "")
      + (s.error ? ": " + s.error : "");
  for (;;) {
    s = await api("/api/submissions/" + s.id);
    let where = "";
    if (s.state === "queued" && s.position !== undefined) {
      where = " (" + s.position + " ahead of you" + (s.wait_s !== null && s.wait_s !== undefined
          ? ", a verdict in about " + Math.round(s.wait_s) + " s" : "") + ")";
    }
    say("state", "submission " + s.id + ": " + s.state + where);
    if (s.state === "graded" || s.state === "failed") break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  say("state", verdict(s));
  say("report", s.report || "");
  await showPictures(s);
  await refresh();
  while (s.state === "graded" && s.speed === "pending") {  // the speed tests are timed after the verdict
    await new Promise((r) => setTimeout(r, 2000));
    s = await api("/api/submissions/" + s.id);
    if (s.speed !== "pending") {
      say("state", verdict(s));
      say("report", s.report || "");
      await refresh();
    }
  }
}
$("signin-button").addEventListener("click", signIn);
$("submit-button").addEventListener("click", submit);
if (token) { $("token").value = token; signIn(); }
</script>
</body></html>
"""

STAFF_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Queue</title>
<meta http-equiv="Content-Security-Policy" content="@CSP@">
<style>""" + _STYLE + """</style></head>
<body>
<h1>Queue and recent verdicts</h1>
<label>Staff token <input id="token" type="password" size="40"></label> <button id="go">Show</button>
<p id="counts"></p>
<table><thead><tr><th>#</th><th>student</th><th>task</th><th>file</th><th>state</th><th>submitted</th>
<th>score</th><th>error</th></tr></thead><tbody id="recent"></tbody></table>
<p id="error"></p>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
async function show() {
  const response = await fetch("/api/staff/queue", {headers: {"Authorization": "Bearer " + $("token").value}});
  const body = await response.json();
  if (!response.ok) { $("error").textContent = body.detail; return; }
  $("error").textContent = "";
  $("counts").textContent = Object.entries(body.counts).map(([k, v]) => k + ": " + v).join(", ")
    + (body.paused ? " (paused)" : "");
  const rows = $("recent"); rows.replaceChildren();
  for (const s of body.recent) {
    const tr = document.createElement("tr");
    for (const c of [s.id, s.student, s.task, s.filename, s.state, s.submitted_at,
                     s.score === null ? "" : s.score + " / " + s.max_score, s.error || ""]) {
      const td = document.createElement("td"); td.textContent = String(c); tr.appendChild(td);
    }
    rows.appendChild(tr);
  }
}
$("go").addEventListener("click", () => { show(); setInterval(show, 3000); });
</script>
</body></html>
"""

STUDENT_PAGE = STUDENT_PAGE.replace("@CSP@", _CSP)
STAFF_PAGE = STAFF_PAGE.replace("@CSP@", _CSP)
