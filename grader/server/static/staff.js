"use strict";
let timer = null;

async function show() {
  const body = await api("/api/staff/queue");
  signedIn("staff");
  say("counts", Object.entries(body.counts).map(([k, v]) => k + ": " + v).join(", ")
    + (body.paused ? " (grading paused)" : ""));
  $("pause").textContent = body.paused ? "Resume grading" : "Pause grading";
  $("pause").dataset.paused = body.paused ? "1" : "";
  const rows = $("recent");
  rows.replaceChildren();
  for (const s of body.recent) {
    const who = document.createElement("button");
    who.className = "link"; who.type = "button"; who.textContent = s.student;
    who.addEventListener("click", () => history(s.student));
    rows.appendChild(row([[s.id, "num"], who, s.task, s.filename, s.state + (s.lane ? " (regrade)" : ""),
                          [when(s.submitted_at), "time"], [score(s), "num"], s.error || ""]));
  }
}

async function history(student) {
  const body = await api("/api/staff/students/" + encodeURIComponent(student));
  say("history-of", body.student);
  const rows = $("history");
  rows.replaceChildren();
  for (const s of body.submissions) {
    rows.appendChild(row([[s.id, "num"], s.task, s.filename, [when(s.submitted_at), "time"], s.state,
                          [score(s), "num"], [s.late_days || "", "num"], s.lane ? "regrade" : "student"]));
  }
  $("history-box").classList.remove("hidden");
}

async function download(path, name) {
  const response = await fetch(path, {headers: {"Authorization": "Bearer " + token}});
  if (!response.ok) { say("error", "the server answered " + response.status); return; }
  const link = document.createElement("a");
  link.href = URL.createObjectURL(await response.blob());
  link.download = name;
  document.body.appendChild(link); link.click(); link.remove();
}

async function signIn() {
  token = $("token").value.trim();
  say("error", "");
  try { await show(); } catch (e) { say("error", e.message); return; }
  sessionStorage.setItem(TOKEN_KEY, token);
  if (timer === null) timer = setInterval(() => show().catch((e) => say("error", e.message)), 3000);
}

$("signin-button").addEventListener("click", signIn);
$("pause").addEventListener("click", async () => {
  await api($("pause").dataset.paused ? "/api/staff/resume" : "/api/staff/pause", {method: "POST"});
  await show();
});
$("gradebook").addEventListener("click", () => download("/api/staff/gradebook.csv", "gradebook.csv"));
$("canvas").addEventListener("click", () => download("/api/staff/canvas.csv", "canvas.csv"));
if (token) { $("token").value = token; signIn(); }
