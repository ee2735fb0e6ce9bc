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
  const params = new URLSearchParams();
  rows.slice(0, 20).forEach((r) => params.append("job", r.dataset.job));
  params.set("since", table.dataset.since);
  if (table.dataset.status) params.set("status", table.dataset.status);
  if (table.dataset.tag) params.set("tag", table.dataset.tag);
  const source = new EventSource(table.dataset.liveUrl + "?" + params.toString());
  const rowOf = (id) => document.getElementById("job-" + id);
  source.addEventListener("job", (event) => {
    const row = rowOf(JSON.parse(event.data).id);
    if (row) refreshRow(row);
  });
  source.addEventListener("new", async (event) => {
    const job = JSON.parse(event.data);
    if (rowOf(job.id)) return;
    const response = await fetch(job.row_url, { headers: { Accept: "text/html" } });
    if (!response.ok) return;
    const fresh = fromHtml(await response.text());
    if (!fresh) return;
    table.tBodies[0].prepend(fresh);
    table.closest("[hidden]")?.removeAttribute("hidden");
    document.getElementById("no-jobs")?.remove();
  });
  source.addEventListener("end", () => source.close());
}

function liveJobPage() {
  const head = document.getElementById("job-head");
  if (!head || !head.dataset.eventsUrl || !window.EventSource) return;
  const source = new EventSource(head.dataset.eventsUrl);
  source.addEventListener("job", async (event) => {
    const job = JSON.parse(event.data).job;
    const badge = head.querySelector("h1 .status");
    if (badge) { badge.textContent = job.status; badge.className = "status s-" + job.status; }
    const holder = document.getElementById("job-progress");
    const response = await fetch(head.dataset.progressUrl, { headers: { Accept: "text/html" } });
    if (holder && response.ok) holder.innerHTML = await response.text();
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

function compareSelection() {
  const button = document.getElementById("compare-selected");
  const hint = document.getElementById("compare-hint");
  if (!button || !hint) return;
  const update = () => {
    const picked = document.querySelectorAll("input.pick:checked").length;
    button.disabled = picked < 2 || picked > 10;
    hint.textContent = picked === 2
      ? "Ready: the older job is A (the reference), the newer B."
      : picked > 2 && picked <= 10
        ? `Ready: the oldest job is A (the baseline), the ${picked - 1} newer ones candidates B1, B2, ….`
        : `Tick two to ten jobs of one dataset revision (${picked} ticked): the oldest is A, each newer one a candidate.`;
  };
  document.addEventListener("change", (event) => {
    if (event.target.matches("input.pick")) update();
  });
  update();
}

// A table shown as cards on a phone labels each value with its column's header (console.css); rows
// whose cells span several columns (a task's side-by-side panel) need no labels.
function labelCards() {
  for (const table of document.querySelectorAll("table.cards")) {
    const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    for (const row of table.querySelectorAll("tbody tr")) {
      const cells = [...row.children];
      if (cells.some((cell) => cell.colSpan > 1)) continue;
      cells.forEach((cell, i) => { if (heads[i] && !cell.dataset.label) cell.dataset.label = heads[i]; });
    }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  labelCards();
  compareSelection();
  liveJobsList();
  liveJobPage();
  loadFragments();
});
