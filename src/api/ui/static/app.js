// trawl's web UI: the only script. Live values from server-sent events, and the replay
// timeline stepped with the keyboard or the mouse. Pages work without it (every value is
// rendered by the server; the timeline is a plain list).
"use strict";

function followEvents() {
  const url = document.body.dataset.events;
  if (!url || !window.EventSource) return;
  const source = new EventSource(url);
  source.addEventListener("live", (event) => {
    let values;
    try { values = JSON.parse(event.data); } catch (_) { return; }
    for (const [key, value] of Object.entries(values)) {
      const text = String(value);
      for (const element of document.querySelectorAll('[data-live="' + CSS.escape(key) + '"]')) {
        if (element.textContent !== text) element.textContent = text;
        if (element.classList.contains("badge")) element.className = "badge " + text;
      }
      for (const image of document.querySelectorAll('img[data-live-img="' + CSS.escape(key) + '"]')) {
        const src = image.dataset.base + text + "/image";
        if (text !== "0" && image.getAttribute("src") !== src) {
          image.setAttribute("src", src);
          image.hidden = false;
        }
      }
    }
  });
}

function stepper() {
  const timeline = document.querySelector("ol.timeline");
  if (!timeline) return;
  const steps = Array.from(timeline.querySelectorAll("li[data-seq]"));
  if (steps.length === 0) return;
  const image = document.getElementById("stage-img");
  const caption = document.getElementById("stage-caption");
  const position = document.getElementById("stage-position");
  let current = 0;

  function select(index, focus) {
    current = Math.max(0, Math.min(steps.length - 1, index));
    steps.forEach((step, n) => {
      if (n === current) {
        step.setAttribute("aria-current", "step");
        step.tabIndex = 0;
      } else {
        step.removeAttribute("aria-current");
        step.tabIndex = -1;
      }
    });
    const step = steps[current];
    if (image) {
      if (step.dataset.image) {
        image.src = step.dataset.image;
        image.alt = "Screenshot after step " + step.dataset.seq;
        image.hidden = false;
      } else {
        image.hidden = true;
      }
    }
    if (caption) caption.textContent = step.dataset.caption || "";
    if (position) position.textContent = "Step " + (current + 1) + " of " + steps.length;
    if (focus) {
      step.focus();
      step.scrollIntoView({ block: "nearest" });
    }
  }

  steps.forEach((step, n) => {
    step.addEventListener("click", () => select(n, true));
  });
  const previous = document.getElementById("step-prev");
  const next = document.getElementById("step-next");
  if (previous) previous.addEventListener("click", () => select(current - 1, false));
  if (next) next.addEventListener("click", () => select(current + 1, false));

  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.isContentEditable)) return;
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const inTimeline = timeline.contains(target);
    let index = null;
    switch (event.key) {
      case "ArrowRight": case "j": case "n": index = current + 1; break;
      case "ArrowLeft": case "k": case "p": index = current - 1; break;
      case "ArrowDown": if (inTimeline) index = current + 1; break;
      case "ArrowUp": if (inTimeline) index = current - 1; break;
      case "Home": if (inTimeline) index = 0; break;
      case "End": if (inTimeline) index = steps.length - 1; break;
      default: break;
    }
    if (index === null) return;
    event.preventDefault();
    select(index, inTimeline || target === document.body);
  });
  select(0, false);
}

document.addEventListener("DOMContentLoaded", () => {
  followEvents();
  stepper();
});
