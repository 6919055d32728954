"use strict";
// Every value from the API reaches the page through textContent, never through markup: a student's file name,
// message or printed output shows as the characters it holds.
const $ = (id) => document.getElementById(id);
const TOKEN_KEY = document.body.dataset.tokenKey || "grader-token";
let token = sessionStorage.getItem(TOKEN_KEY) || "";
function say(id, text) { $(id).textContent = text === null || text === undefined ? "" : String(text); }
async function api(path, options) {
  options = options || {};
  options.headers = Object.assign({"Authorization": "Bearer " + token}, options.headers || {});
  const response = await fetch(path, options);
  let body = null;
  try { body = await response.json(); } catch (e) { body = {detail: "the server answered " + response.status}; }
  if (!response.ok) { throw new Error(typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)); }
  return body;
}
// A time as the reader's own clock and time zone says it (the API gives UTC).
function when(iso) {
  if (!iso) return "";
  return new Date(iso).toLocaleString(undefined, {dateStyle: "medium", timeStyle: "short"});
}
function cell(value, cls) {
  const td = document.createElement("td");
  if (value instanceof Node) td.appendChild(value); else td.textContent = value === null || value === undefined ? "" : String(value);
  if (cls) td.className = cls;
  return td;
}
function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) tr.appendChild(Array.isArray(c) ? cell(c[0], c[1]) : cell(c));
  return tr;
}
function score(s) { return s.score === null || s.score === undefined ? "" : s.score + " / " + s.max_score; }
function signedIn(name) {
  say("who", name);
  $("signin").classList.add("hidden");
  $("account").classList.remove("hidden");
  $("work").classList.remove("hidden");
}
$("signout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  token = "";
  location.reload();
});
