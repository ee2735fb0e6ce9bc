// The trace viewer: a timeline of steps (a listbox), the selected step's detail, or the whole
// transcript; search across every step. Keys work from page load, wherever the focus is, except
// in a text field (and arrows scroll a step being read, as a browser does).
// Step lists and step details are HTML fragments rendered and escaped by the server; they are kept
// once fetched, so searching and the transcript read each step once. Long texts are fetched as
// plain text and appended as text nodes, never parsed as HTML.
"use strict";

(function () {
  const root = document.getElementById("trace");
  if (!root) return;
  const timeline = document.getElementById("timeline");
  const detail = document.getElementById("step-detail");
  const transcript = document.getElementById("transcript");
  const position = document.getElementById("step-position");
  const toggle = document.getElementById("view-toggle");
  const searchBox = document.getElementById("trace-q");
  const hits = document.getElementById("trace-hits");
  const hitPrev = document.getElementById("hit-prev");
  const hitNext = document.getElementById("hit-next");
  const total = Number(root.dataset.total);
  const PARALLEL = 6;
  let selected = Number(root.dataset.selected);
  let loadingMore = null;
  const steps = new Map(); // index -> HTML of the step, as the server rendered it
  const texts = new Map(); // index -> its text, lower case, for search
  let matches = [];
  let term = "";

  const initial = detail.querySelector("article.step");
  if (initial) steps.set(Number(initial.dataset.index), detail.innerHTML);

  function option(index) { return document.getElementById("step-opt-" + index); }
  function params() { return new URLSearchParams(window.location.search); }

  async function loadMore() {
    if (loadingMore) return loadingMore;
    const more = timeline.querySelector("li.more");
    if (!more) return null;
    const offset = Number(more.dataset.nextOffset);
    loadingMore = (async () => {
      const response = await fetch(`${root.dataset.stepsUrl}?offset=${offset}&limit=200`);
      if (response.ok) {
        const template = document.createElement("template");
        template.innerHTML = await response.text();
        more.replaceWith(template.content);
        markMatches();
      }
      loadingMore = null;
    })();
    return loadingMore;
  }

  async function ensureOption(index) {
    while (!option(index) && timeline.querySelector("li.more")) await loadMore();
    return option(index);
  }

  async function step(index) {
    if (!steps.has(index)) {
      const response = await fetch(`${root.dataset.stepUrl}/${index}`);
      if (!response.ok) throw new Error(`step ${index + 1}: ${response.status}`);
      steps.set(index, await response.text());
    }
    return steps.get(index);
  }

  function textOf(index) {
    if (!texts.has(index)) {
      const template = document.createElement("template");
      template.innerHTML = steps.get(index) || "";
      texts.set(index, (template.content.textContent || "").toLowerCase());
    }
    return texts.get(index);
  }

  // Every step, fetched a few at a time, reporting progress: for search and the transcript.
  async function loadAll(report) {
    const missing = [];
    for (let i = 0; i < total; i++) if (!steps.has(i)) missing.push(i);
    let done = total - missing.length;
    const worker = async () => {
      while (missing.length) {
        const index = missing.shift();
        await step(index);
        done += 1;
        if (report) report(done, index);
      }
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL, missing.length) }, worker));
  }

  function highlight(container) {
    for (const mark of container.querySelectorAll("mark.hit")) mark.replaceWith(...mark.childNodes);
    container.normalize();
    if (!term) return;
    const walker = document.createTreeWalker(container, NodeFilter.SHOW_TEXT);
    const found = [];
    while (walker.nextNode()) {
      if (walker.currentNode.nodeValue.toLowerCase().includes(term)) found.push(walker.currentNode);
    }
    for (const node of found) {
      const text = node.nodeValue;
      const lower = text.toLowerCase();
      const pieces = document.createDocumentFragment();
      let at = 0;
      for (let hit = lower.indexOf(term); hit >= 0; hit = lower.indexOf(term, at)) {
        pieces.append(document.createTextNode(text.slice(at, hit)));
        const mark = document.createElement("mark");
        mark.className = "hit";
        mark.textContent = text.slice(hit, hit + term.length);
        pieces.append(mark);
        at = hit + term.length;
      }
      pieces.append(document.createTextNode(text.slice(at)));
      node.replaceWith(pieces);
    }
  }

  function markMatches() {
    const set = new Set(matches);
    for (const item of timeline.querySelectorAll("li[data-index]")) {
      item.classList.toggle("match", set.has(Number(item.dataset.index)));
    }
  }

  function remember() {
    const query = params();
    query.set("step", String(selected));
    if (transcript.hidden) query.delete("view"); else query.set("view", "transcript");
    history.replaceState(null, "", `?${query.toString()}`);
  }

  async function select(index, focusDetail) {
    if (index < 0 || index >= total) return;
    const previous = option(selected);
    if (previous) previous.setAttribute("aria-selected", "false");
    selected = index;
    const current = await ensureOption(index);
    if (current) {
      current.setAttribute("aria-selected", "true");
      timeline.setAttribute("aria-activedescendant", current.id);
      current.scrollIntoView({ block: "nearest" });
    }
    position.textContent = `step ${index + 1} of ${total}`;
    remember();
    if (!transcript.hidden) {
      const section = document.getElementById("t-step-" + index);
      if (section) section.scrollIntoView({ block: "start" });
      if (focusDetail) transcript.focus();
      return;
    }
    const html = await step(index);
    if (selected !== index) return;
    detail.innerHTML = html;
    detail.dataset.loaded = String(index);
    highlight(detail);
    if (focusDetail) detail.focus();
  }

  async function showTranscript(on) {
    toggle.setAttribute("aria-pressed", on ? "true" : "false");
    toggle.textContent = on ? "Step by step" : "Whole transcript";
    detail.hidden = on;
    transcript.hidden = !on;
    remember();
    if (!on) { await select(selected); return; }
    if (!transcript.dataset.built) {
      transcript.dataset.built = "true";
      for (let i = 0; i < total; i++) {
        const section = document.createElement("section");
        section.id = "t-step-" + i;
        section.className = "transcript-step";
        section.dataset.index = String(i);
        section.setAttribute("aria-label", `Step ${i + 1}`);
        section.append(document.createTextNode(`Step ${i + 1}…`));
        transcript.append(section);
      }
    }
    const fill = (index) => {
      const section = document.getElementById("t-step-" + index);
      if (!section || section.dataset.filled) return;
      section.innerHTML = steps.get(index);
      section.dataset.filled = "true";
      highlight(section);
    };
    for (const index of steps.keys()) fill(index);
    document.getElementById("t-step-" + selected)?.scrollIntoView({ block: "start" });
    await loadAll((done, index) => {
      fill(index);
      hits.textContent = done < total ? `reading step ${done} of ${total}…` : hits.textContent;
    });
    if (!term) hits.textContent = "";
  }

  async function search(text) {
    term = text.trim().toLowerCase();
    matches = [];
    hitPrev.disabled = hitNext.disabled = true;
    if (!term) {
      hits.textContent = "";
      markMatches();
      highlight(transcript.hidden ? detail : transcript);
      return;
    }
    hits.textContent = "searching…";
    await loadAll((done) => { hits.textContent = `reading step ${done} of ${total}…`; });
    for (let i = 0; i < total; i++) if (textOf(i).includes(term)) matches.push(i);
    while (timeline.querySelector("li.more")) await loadMore();
    markMatches();
    if (!transcript.hidden) {
      for (const section of transcript.querySelectorAll("section.transcript-step")) highlight(section);
    }
    if (!matches.length) {
      hits.textContent = "no step contains it";
      highlight(detail);
      return;
    }
    hitPrev.disabled = hitNext.disabled = false;
    await jump(1, true);
  }

  async function jump(direction, fromHere) {
    if (!matches.length) return;
    let target;
    if (direction > 0) {
      target = matches.find((i) => (fromHere ? i >= selected : i > selected));
      if (target === undefined) target = matches[0];
    } else {
      target = [...matches].reverse().find((i) => i < selected);
      if (target === undefined) target = matches[matches.length - 1];
    }
    hits.textContent = `match ${matches.indexOf(target) + 1} of ${matches.length} steps`;
    await select(target);
  }

  // Clicks: a step of the timeline, "more steps", links to other steps, long texts.
  timeline.addEventListener("click", (event) => {
    const item = event.target.closest("li[data-index]");
    if (item) { event.preventDefault(); select(Number(item.dataset.index)); timeline.focus(); return; }
    const more = event.target.closest("li.more");
    if (more) { event.preventDefault(); loadMore(); }
  });
  timeline.addEventListener("scroll", () => {
    if (timeline.scrollTop + timeline.clientHeight > timeline.scrollHeight - 200) loadMore();
  });
  document.getElementById("step-prev").addEventListener("click", () => select(selected - 1));
  document.getElementById("step-next").addEventListener("click", () => select(selected + 1));
  toggle.addEventListener("click", () => showTranscript(transcript.hidden));
  document.getElementById("trace-search").addEventListener("submit", (event) => {
    event.preventDefault();
    if (searchBox.value.trim().toLowerCase() === term && matches.length) jump(1, false);
    else search(searchBox.value);
  });
  searchBox.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && event.shiftKey) { event.preventDefault(); jump(-1, false); }
    if (event.key === "Escape") { searchBox.blur(); }
  });
  hitNext.addEventListener("click", () => jump(1, false));
  hitPrev.addEventListener("click", () => jump(-1, false));
  root.addEventListener("click", async (event) => {
    const jumpTo = event.target.closest("a.to-step, #to-grading");
    if (jumpTo) { event.preventDefault(); select(Number(jumpTo.dataset.index), true); return; }
    const button = event.target.closest("button.more-text");
    if (!button) return;
    const pre = button.previousElementSibling;
    button.disabled = true;
    let offset = button.dataset.offset;
    while (offset) {
      const url = `${button.dataset.url}?field=${encodeURIComponent(button.dataset.field)}&offset=${offset}`;
      const response = await fetch(url);
      if (!response.ok) { button.dataset.offset = offset; button.disabled = false; return; }
      pre.append(document.createTextNode(await response.text()));
      offset = response.headers.get("X-Next-Offset");
    }
    button.remove();
  });

  // Keys, from page load: none needs the timeline to have the focus first.
  const MOVES = { ArrowDown: 1, j: 1, ArrowUp: -1, k: -1, PageDown: 10, PageUp: -10 };
  const SCROLLING = new Set(["ArrowDown", "ArrowUp", "PageDown", "PageUp", "Home", "End"]);
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    if (target.closest && target.closest("input, textarea, select, [contenteditable]")) return;
    const reading = target.closest && target.closest("#step-detail, #transcript");
    if (reading && SCROLLING.has(event.key)) return; // the reader scrolls the step
    if (event.key in MOVES) {
      event.preventDefault();
      select(Math.min(total - 1, Math.max(0, selected + MOVES[event.key])));
    } else if (event.key === "Home") {
      event.preventDefault(); select(0);
    } else if (event.key === "End") {
      event.preventDefault(); select(total - 1);
    } else if (event.key === "Enter" && target === timeline) {
      event.preventDefault(); (transcript.hidden ? detail : transcript).focus();
    } else if (event.key === "/") {
      event.preventDefault(); searchBox.focus(); searchBox.select();
    } else if (event.key === "n" || event.key === "N") {
      event.preventDefault(); jump(event.key === "n" ? 1 : -1, false);
    } else if (event.key === "t") {
      event.preventDefault(); showTranscript(transcript.hidden);
    }
  });

  if (params().get("view") === "transcript") showTranscript(true);
})();
