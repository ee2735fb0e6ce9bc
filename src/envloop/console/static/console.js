// envloop console: live updates of the jobs list and a job page, and fragments loaded after the page.
// Every piece of HTML inserted here was rendered (and escaped) by the server.
"use strict";

const TERMINAL = new Set(["completed", "failed", "cancelled"]);

function fromHtml(html) {
  const template = document.createElement("template");
  template.innerHTML = html.trim();
  return template.content.firstElementChild;
}

async function refreshRow(row) {
  const response = await fetch(row.dataset.rowUrl, { headers: { Accept: "text/html" } });
  if (!response.ok) return;
  const fresh = fromHtml(await response.text());
  if (fresh) row.replaceWith(fresh);
}

function liveJobsList() {
  const table = document.querySelector("table.jobs[data-live-url]");
  if (!table || !window.EventSource) return;
  const rows = [...table.querySelectorAll("tr[data-job]")].filter((r) => !TERMINAL.has(r.dataset.status));
  if (!rows.length) return;
  const ids = rows.slice(0, 20).map((r) => r.dataset.job);
  const url = table.dataset.liveUrl + "?" + ids.map((id) => "job=" + encodeURIComponent(id)).join("&");
  const source = new EventSource(url);
  const rowOf = (id) => document.getElementById("job-" + id);
  source.addEventListener("job", (event) => {
    const row = rowOf(JSON.parse(event.data).id);
    if (row) refreshRow(row);
  });
  source.addEventListener("end", () => {
    source.close();
    ids.forEach((id) => { const row = rowOf(id); if (row) refreshRow(row); });
  });
}

function liveJobPage() {
  const head = document.getElementById("job-head");
  if (!head || !head.dataset.eventsUrl || !window.EventSource) return;
  const source = new EventSource(head.dataset.eventsUrl);
  source.addEventListener("job", (event) => {
    const job = JSON.parse(event.data).job;
    const counts = job.counts;
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    const done = counts.completed + counts.failed + counts.cancelled;
    const bar = document.querySelector("#job-progress progress");
    const text = document.querySelector("#job-progress .progress-text");
    if (bar) { bar.max = total; bar.value = done; }
    if (text) text.textContent = `${done}/${total} finished` + (counts.running ? `, ${counts.running} running` : "");
    const badge = head.querySelector("h1 .status");
    if (badge) { badge.textContent = job.status; badge.className = "status s-" + job.status; }
  });
  source.addEventListener("end", () => { source.close(); window.location.reload(); });
}

async function loadFragments() {
  for (const holder of document.querySelectorAll("[data-fragment-url]")) {
    try {
      const response = await fetch(holder.dataset.fragmentUrl, { headers: { Accept: "text/html" } });
      holder.innerHTML = response.ok ? await response.text() : "<p class=\"error-line\">Could not load this part.</p>";
    } catch (error) {
      holder.textContent = "Could not load this part.";
    }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  liveJobsList();
  liveJobPage();
  loadFragments();
});
