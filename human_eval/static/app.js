// advrace human evaluation: span selection (SQuAD items) and the live authoring page.
// Served as a file so that the Content-Security-Policy can forbid inline scripts; everything
// shown is set with textContent, never innerHTML.
"use strict";

function spanSelection() {
  const context = document.getElementById("context");
  if (!context) return;
  const text = document.getElementById("answer_text");
  const start = document.getElementById("answer_start");
  const shown = document.getElementById("selected");
  context.addEventListener("mouseup", () => {
    const sel = window.getSelection();
    if (!sel.rangeCount) return;
    const range = sel.getRangeAt(0);
    const node = context.firstChild;
    if (!node || range.startContainer !== node || range.endContainer !== node) return;
    const s = Math.min(range.startOffset, range.endOffset);
    const e = Math.max(range.startOffset, range.endOffset);
    if (e <= s) return;
    text.value = node.textContent.slice(s, e);
    start.value = String(s);
    shown.textContent = text.value;
    const answer = document.getElementById("choice-answer");
    if (answer) answer.checked = true;
  });
}

function authoring() {
  const form = document.getElementById("author-form");
  if (!form) return;
  const csrf = form.dataset.csrf;
  const base = form.dataset.base;
  const status = document.getElementById("status");
  let timer = null;
  let seq = 0;

  function draft() {
    const options = Array.from(document.querySelectorAll(".option-input")).map((el) => el.value);
    const label = document.querySelector("input[name=label]:checked");
    return {
      passage: document.getElementById("passage").value,
      question: document.getElementById("question").value,
      options: options,
      label: label ? Number(label.value) : null,
      source: form.dataset.source || null,
    };
  }

  function render(out) {
    const probs = document.getElementById("probabilities");
    probs.replaceChildren();
    out.probabilities.forEach((p, i) => {
      const row = document.createElement("div");
      row.className = "prob" + (i === out.prediction ? " predicted" : "");
      row.dataset.option = String(i);
      const name = document.createElement("span");
      name.textContent = "ABCDEFGH"[i] + " " + (100 * p).toFixed(1) + "%";
      const bar = document.createElement("span");
      bar.className = "bar w" + Math.round(10 * p);
      row.append(name, bar);
      probs.append(row);
    });
    for (const field of ["passage", "question"]) {
      const box = document.getElementById("importance-" + field);
      box.replaceChildren();
      const text = draft()[field];
      let last = 0;
      for (const [s, e, score] of (out.importance && out.importance[field]) || []) {
        if (s > last) box.append(document.createTextNode(text.slice(last, s)));
        const w = document.createElement("span");
        const level = Math.min(5, Math.round(Math.abs(score) * 5));
        w.className = (score >= 0 ? "pos" : "neg") + level;
        w.textContent = text.slice(s, e);
        box.append(w);
        last = e;
      }
      if (last < text.length) box.append(document.createTextNode(text.slice(last)));
    }
    document.getElementById("prediction").textContent =
      out.prediction === null ? "" : "model predicts " + "ABCDEFGH"[out.prediction];
  }

  async function predict() {
    const mine = ++seq;
    status.textContent = "…";
    const resp = await fetch(base + "/predict", {
      method: "POST",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify(draft()),
    });
    const out = await resp.json();
    if (mine !== seq) return;
    if (!resp.ok) { status.textContent = out.error || "error"; return; }
    status.textContent = "";
    render(out);
  }

  form.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(predict, 400);
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const resp = await fetch(base + "/submit", {
      method: "POST",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify(draft()),
    });
    const out = await resp.json();
    document.getElementById("submitted").textContent = resp.ok
      ? "submitted #" + out.id + (out.fooled ? ": the model was fooled" : ": the model got it right")
      : out.error;
  });
  predict();
}

document.addEventListener("DOMContentLoaded", () => { spanSelection(); authoring(); });
