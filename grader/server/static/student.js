"use strict";
let deadline = null, offset = 0;  // the deadline, and the server's clock minus this browser's (ms)

function countdown() {
  if (!deadline) { say("deadline", "No deadline."); return; }
  const left = deadline - (Date.now() + offset);
  const box = $("deadline");
  if (left <= 0) {
    box.classList.add("closed");
    say("deadline", "Deadline " + when(deadline.toISOString()) + ": passed; a late file loses points by the late policy.");
    return;
  }
  const d = Math.floor(left / 86400000), h = Math.floor(left / 3600000) % 24, m = Math.floor(left / 60000) % 60,
        sec = Math.floor(left / 1000) % 60;
  const parts = (d ? d + " d " : "") + (d || h ? h + " h " : "") + m + " min" + (d ? "" : " " + sec + " s");
  say("deadline", "Deadline " + when(deadline.toISOString()) + " (your time): " + parts + " left.");
}

function render(mine) {
  signedIn(mine.student);
  say("title", mine.title);
  document.title = mine.title;
  deadline = mine.deadline ? new Date(mine.deadline) : null;
  offset = mine.now ? new Date(mine.now) - Date.now() : 0;
  countdown();
  const select = $("task");
  if (!select.options.length) {
    for (const [id, t] of Object.entries(mine.tasks)) {
      const o = document.createElement("option"); o.value = id; o.textContent = id + " (" + t.points + " pts)";
      select.appendChild(o);
    }
  }
  const tasks = $("tasks");
  tasks.replaceChildren();
  for (const [id, t] of Object.entries(mine.tasks)) {
    const best = t.best === null ? "-" : t.best + " / " + t.points;
    const used = t.used + (t.max_attempts ? " of " + t.max_attempts : "") + " used";
    const last = t.last ? t.last.state + (t.last.score === null ? "" : ", " + t.last.score + " / " + t.last.max_score) : "-";
    const late = t.last && t.last.late_days ? t.last.late_days : "";
    tasks.appendChild(row([id, [best, "num"], [used, "num"], last, [late, "num"]]));
  }
  const body = $("attempts");
  body.replaceChildren();
  for (const s of mine.submissions.slice().reverse()) {
    let state = s.state + (s.speed === "pending" ? " (speed: pending)" : "");
    if (s.repeat) state = "the same file as #" + s.same_as + ": no attempt used";
    body.appendChild(row([[s.id, "num"], s.task, s.filename, [when(s.submitted_at), "time"], state, [score(s), "num"]]));
  }
}

async function refresh() { render(await api("/api/results")); }

async function signIn() {
  token = $("token").value.trim();
  say("error", "");
  try { await refresh(); } catch (e) { say("error", e.message); return; }
  sessionStorage.setItem(TOKEN_KEY, token);
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

function verdict(s) {
  if (s.repeat) {
    return "submission " + s.id + ": the same file as submission " + s.same_as + ", so no attempt was used; its verdict: "
      + s.state + (s.score === null || s.score === undefined ? "" : ", score " + score(s));
  }
  return "submission " + s.id + ": " + s.state + (s.score === null || s.score === undefined ? "" : ", score " + score(s))
    + (s.speed === "pending" ? " (speed: pending)" : "") + (s.error ? ": " + s.error : "");
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
  const stored = s;
  for (;;) {
    s = await api("/api/submissions/" + s.id);
    let where = "";
    if (s.state === "queued" && s.position !== undefined) {
      where = " (" + s.position + " ahead of you" + (s.wait_s !== null && s.wait_s !== undefined
          ? ", a verdict in about " + Math.round(s.wait_s) + " s" : "") + ")";
    } else if (s.state === "running" && s.wait_s !== null && s.wait_s !== undefined) {
      where = " (about " + Math.round(s.wait_s) + " s left)";
    }
    say("state", "submission " + s.id + ": " + (stored.same_as ? "the same file as #" + stored.same_as + ": " : "")
        + s.state + where);
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
setInterval(countdown, 1000);
if (token) { $("token").value = token; signIn(); }
