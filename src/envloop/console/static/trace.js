// The trace viewer: a timeline of steps (a listbox) and the selected step's detail.
// Step lists and step details are HTML fragments rendered and escaped by the server; long texts are
// fetched as plain text and appended as text nodes, never parsed as HTML.
"use strict";

(function () {
  const root = document.getElementById("trace");
  if (!root) return;
  const timeline = document.getElementById("timeline");
  const detail = document.getElementById("step-detail");
  const position = document.getElementById("step-position");
  const total = Number(root.dataset.total);
  let selected = Number(root.dataset.selected);
  let loadingMore = null;

  function option(index) { return document.getElementById("step-opt-" + index); }

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
      }
      loadingMore = null;
    })();
    return loadingMore;
  }

  async function ensureOption(index) {
    while (!option(index) && timeline.querySelector("li.more")) await loadMore();
    return option(index);
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
    history.replaceState(null, "", `?step=${index}`);
    const response = await fetch(`${root.dataset.stepUrl}/${index}`);
    if (response.ok && selected === index) {
      detail.innerHTML = await response.text();
      detail.dataset.loaded = String(index);
      if (focusDetail) detail.focus();
    }
  }

  timeline.addEventListener("click", (event) => {
    const item = event.target.closest("li[data-index]");
    if (item) { event.preventDefault(); select(Number(item.dataset.index)); timeline.focus(); return; }
    const more = event.target.closest("li.more");
    if (more) { event.preventDefault(); loadMore(); }
  });
  timeline.addEventListener("scroll", () => {
    if (timeline.scrollTop + timeline.clientHeight > timeline.scrollHeight - 200) loadMore();
  });
  timeline.addEventListener("keydown", (event) => {
    const moves = { ArrowDown: 1, j: 1, ArrowUp: -1, k: -1, PageDown: 10, PageUp: -10 };
    if (event.key in moves) {
      event.preventDefault();
      select(Math.min(total - 1, Math.max(0, selected + moves[event.key])));
    } else if (event.key === "Home") {
      event.preventDefault(); select(0);
    } else if (event.key === "End") {
      event.preventDefault(); select(total - 1);
    } else if (event.key === "Enter") {
      event.preventDefault(); detail.focus();
    }
  });
  document.getElementById("step-prev").addEventListener("click", () => select(selected - 1));
  document.getElementById("step-next").addEventListener("click", () => select(selected + 1));
  root.addEventListener("click", async (event) => {
    const jump = event.target.closest("a.to-step, #to-grading");
    if (jump) { event.preventDefault(); select(Number(jump.dataset.index), true); return; }
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
})();
