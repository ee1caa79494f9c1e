// advrace human evaluation: span selection (SQuAD items), the answer pages' keys and the live
// authoring pages.
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
    if (!context.contains(range.startContainer) || !context.contains(range.endContainer)) return;
    // Offsets in the paragraph's whole text, whatever <mark> (a highlighted sentence) the ends lie in.
    const before = document.createRange();
    before.setStart(context, 0);
    before.setEnd(range.startContainer, range.startOffset);
    const s = before.toString().length;
    const e = s + range.toString().length;
    if (e <= s) return;
    const all = context.textContent;
    text.value = all.slice(s, e);
    // The server counts characters (code points), the DOM UTF-16 units: they differ after an emoji.
    start.value = String(Array.from(all.slice(0, s)).length);
    shown.textContent = text.value;
    const answer = document.getElementById("choice-answer");
    if (answer) answer.checked = true;
  });
}

function authoring() {
  const form = document.getElementById("author-form");
  if (!form) return;

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

  function render(out, sent) {
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
      showImportance(document.getElementById("importance-" + field), sent[field],
                     out.importance && out.importance[field]);
    }
    document.getElementById("prediction").textContent =
      out.prediction === null ? "" : "model predicts " + "ABCDEFGH"[out.prediction];
  }

  liveModel(form, draft, render);
}

// Words of `text` coloured by their importance ([start, end, score] each; none: plain text).
function showImportance(box, text, words) {
  box.replaceChildren();
  let last = 0;
  for (const [s, e, score] of words || []) {
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

function postDraft(form, path, body) {
  return fetch(form.dataset.base + path, {
    method: "POST",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": form.dataset.csrf},
    body: JSON.stringify(body),
  });
}

// The authoring loop both pages share: the model's output on the draft 400 ms after the last
// edit (an answer that arrives after a newer request was sent is dropped; offsets in an answer
// refer to the draft it was computed on, so `render` gets that draft), and Submit.
function liveModel(form, draft, render) {
  const status = document.getElementById("status");
  let timer = null;
  let seq = 0;

  async function predict() {
    const mine = ++seq;
    const sent = draft();
    status.textContent = "…";
    const resp = await postDraft(form, "/predict", sent);
    const out = await resp.json();
    if (mine !== seq) return;
    if (!resp.ok) { status.textContent = out.error || "error"; return; }
    status.textContent = "";
    render(out, sent);
  }

  form.predictSoon = () => {
    clearTimeout(timer);
    timer = setTimeout(predict, 400);
  };
  form.addEventListener("input", form.predictSoon);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const resp = await postDraft(form, "/submit", draft());
    const out = await resp.json();
    document.getElementById("submitted").textContent = resp.ok
      ? "submitted #" + out.id + (out.fooled ? ": the model was fooled" : ": the model got it right")
      : out.error;
  });
  predict();
}

// The span authoring page: the author marks the answer by selecting it in the paragraph's text
// box; an edit of the paragraph that moves or changes the marked words unmarks them.
function spanAuthoring() {
  const form = document.getElementById("span-author-form");
  if (!form) return;
  const paragraph = document.getElementById("paragraph");
  const question = document.getElementById("question");
  const shown = document.getElementById("answer-shown");
  const d = form.dataset;
  let answer = d.answerText && d.answerStart !== "" ? {text: d.answerText, start: Number(d.answerStart)} : null;

  function showAnswer(note) {
    shown.textContent = answer ? "“" + answer.text + "” (character " + answer.start + ")" : (note || "none marked");
  }

  function draft() {
    return {
      context: paragraph.value,
      question: question.value,
      title: d.title || "",
      source: d.source || null,
      answer_text: answer ? answer.text : null,
      answer_start: answer ? answer.start : null,
    };
  }

  function render(out, sent) {
    const list = document.getElementById("answers");
    list.replaceChildren();
    for (const a of out.answers) {
      const li = document.createElement("li");
      li.className = "answer";
      li.textContent = a.text + " — " + (100 * a.probability).toFixed(1) + "%";
      list.append(li);
    }
    document.getElementById("prediction").textContent =
      out.prediction ? "model answers “" + out.prediction.text + "”" : "the model finds no answer";
    document.getElementById("verdict").textContent = out.model_f1 === undefined ? "" :
      "F1 against your answer " + out.model_f1.toFixed(2) + (out.fooled ? ": fooled" : ": not fooled");
    const gold = sent.answer_text === null ? null
      : {start: sent.answer_start, end: sent.answer_start + sent.answer_text.length};
    showMarks(document.getElementById("highlight"), sent.context, [["predicted", out.prediction], ["gold", gold]]);
    const imp = out.importance || {};
    showImportance(document.getElementById("importance-question"), sent.question, imp.question);
    showImportance(document.getElementById("importance-context"), sent.context, imp.context);
  }

  document.getElementById("mark").addEventListener("click", () => {
    let s = paragraph.selectionStart;
    let e = paragraph.selectionEnd;
    const text = paragraph.value;
    while (s < e && /\s/.test(text[s])) s++;
    while (e > s && /\s/.test(text[e - 1])) e--;
    if (e <= s) { showAnswer("select the answer in the paragraph first"); return; }
    answer = {text: text.slice(s, e), start: s};
    showAnswer();
    form.predictSoon();
  });
  paragraph.addEventListener("input", () => {
    if (answer && paragraph.value.slice(answer.start, answer.start + answer.text.length) !== answer.text) {
      answer = null;
      showAnswer("the paragraph changed under your answer: mark it again");
    }
  });
  const pick = document.getElementById("paragraph-pick");
  if (pick) {
    pick.addEventListener("change", () => {
      if (pick.value) window.location.search = "?from=" + encodeURIComponent(pick.value);
    });
  }
  showAnswer();
  liveModel(form, draft, render);
}

// `text` with the characters of each named span ({start, end}) in <mark class=NAME>.
function showMarks(box, text, spans) {
  box.replaceChildren();
  const cuts = new Set([0, text.length]);
  for (const [, span] of spans) if (span) { cuts.add(span.start); cuts.add(span.end); }
  const points = Array.from(cuts).sort((a, b) => a - b);
  for (let i = 0; i + 1 < points.length; i++) {
    const [s, e] = [points[i], points[i + 1]];
    const names = spans.filter(([, span]) => span && span.start <= s && e <= span.end).map(([n]) => n);
    if (!names.length) { box.append(document.createTextNode(text.slice(s, e))); continue; }
    const m = document.createElement("mark");
    m.className = names.join(" ");
    m.textContent = text.slice(s, e);
    box.append(m);
  }
}

// The edit page: the sentence's checks (gold answer, fake answer kept, not the question) run on the
// server 300 ms after the last keystroke, and say why an edit would be refused before it is saved;
// a reply that comes after a newer request was sent is dropped.
function editChecks() {
  const form = document.getElementById("edit-form");
  if (!form) return;
  const box = document.getElementById("edit-box");
  const beyond = document.getElementById("beyond-repair");
  const problem = document.getElementById("edit-problem");
  let timer = null;
  let seq = 0;

  async function check() {
    const mine = ++seq;
    const sent = box.value;
    const resp = await fetch(form.dataset.check, {
      method: "POST",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": form.dataset.csrf},
      body: JSON.stringify({edit_text: sent, beyond_repair: beyond.checked}),
    });
    const out = await resp.json();
    if (mine !== seq) return;
    problem.textContent = resp.ok ? (out.problem || "") : (out.error || "error");
    problem.className = out.problem ? "problem error" : "problem";
    problem.dataset.checked = sent;  // which text the message is about
  }

  function soon() {
    clearTimeout(timer);
    timer = setTimeout(check, 300);
  }
  box.addEventListener("input", soon);
  beyond.addEventListener("change", soon);
}


// Mending a DE or DG question (item.html's #mend). The new option's controls are on only with
// "cannot be answered" for "multiple correct options": off, they are not sent, and saving then
// withdraws an earlier mend. The server's checks run 400 ms after the last change (an answer that
// arrives after a newer request was sent is dropped); a new option they refuse is not sent, so
// that the annotator's text stays on the page with the reason. On a DE item (data-kind span),
// words selected in the passage become the new option.
function mending() {
  const box = document.getElementById("mend");
  if (!box) return;
  const text = document.getElementById("mend_text");
  const status = document.getElementById("mend-status");
  const reason = document.getElementById("reason");
  const unanswerable = document.getElementById("choice-unanswerable");
  let timer = null;
  let seq = 0;
  let verdict = {key: null, ok: false};

  const option = () => {
    const el = box.querySelector("input[name=mend_option]:checked");
    return el ? el.value : "";
  };
  const key = () => option() + "\n" + text.value;
  const empty = () => box.disabled || (!option() && !text.value.trim());

  async function check() {
    const mine = ++seq;
    const sent = key();
    if (empty()) { status.textContent = ""; return; }
    const resp = await fetch(box.dataset.check, {
      method: "POST",
      headers: {"Content-Type": "application/x-www-form-urlencoded", "X-CSRF-Token": box.dataset.csrf},
      body: new URLSearchParams({mend_option: option(), mend_text: text.value}),
    });
    const out = await resp.json();
    if (mine !== seq) return;
    verdict = {key: sent, ok: resp.ok && out.ok};
    status.className = verdict.ok ? "mend-ok" : "error";
    if (!resp.ok) status.textContent = out.error || "error";
    else status.textContent = out.ok ? "Accepted: the new option will read “" + out.text + "”." : out.problems.join(" ");
  }

  const soon = () => { clearTimeout(timer); timer = setTimeout(check, 400); };
  const sync = () => {
    box.disabled = !(unanswerable.checked && reason.value === "multiple correct options");
    soon();
  };
  document.querySelectorAll("input[name=choice]").forEach((el) => el.addEventListener("change", sync));
  reason.addEventListener("change", sync);
  box.addEventListener("input", soon);
  box.addEventListener("change", soon);
  document.getElementById("mend-clear").addEventListener("click", () => {
    box.querySelectorAll("input[name=mend_option]").forEach((el) => { el.checked = false; });
    text.value = "";
    soon();
  });
  // in the capture phase, before answerKeys() marks the form as sent: a held-back form is not sent
  box.form.addEventListener("submit", async (ev) => {
    if (empty() || (verdict.key === key() && verdict.ok)) return;
    ev.preventDefault();
    ev.stopImmediatePropagation();
    clearTimeout(timer);
    await check();
    if (verdict.key === key() && verdict.ok) box.form.submit();
  }, true);
  const passage = document.querySelector(".passage");
  if (box.dataset.kind === "span" && passage) {
    passage.addEventListener("mouseup", () => {
      const picked = window.getSelection().toString().split(/\s+/).join(" ").trim();
      if (picked && !box.disabled) { text.value = picked; soon(); }
    });
  }
  box.disabled = !(unanswerable.checked && reason.value === "multiple correct options");
  check();
}

// The keys of an answer page (the hint line, templates/_keys.html, lists them): 1–9 choose the
// n-th answer (options A–D, or the page's n-th choice), u "cannot be answered" (then the arrows
// pick the reason), Enter saves, Tab goes into the edit box where the page has one. While the
// person types in a text box the keys are theirs (Ctrl+Enter still saves; Enter saves from a
// one-line box, not from a textarea).
function answerKeys() {
  const save = document.getElementById("save");
  if (!save || !save.form) return;
  const form = save.form;
  let sent = false;
  const typing = (el) => el.isContentEditable || el.tagName === "TEXTAREA" ||
    (el.tagName === "INPUT" && !["radio", "checkbox", "button", "submit", "reset", "hidden"].includes(el.type));
  const submit = () => {
    if (sent) return;
    sent = true;
    if (form.requestSubmit) form.requestSubmit(save); else save.click();
  };
  form.addEventListener("submit", () => { sent = true; });
  window.addEventListener("pageshow", () => { sent = false; });  // back to a page kept in memory
  document.addEventListener("keydown", (ev) => {
    if (ev.defaultPrevented || ev.isComposing || ev.altKey) return;
    const target = ev.target instanceof Element ? ev.target : document.body;
    if (ev.key === "Enter") {
      const modified = ev.ctrlKey || ev.metaKey;
      if (ev.repeat || (target.tagName === "TEXTAREA" && !modified)) return;
      if (!modified && (target.tagName === "A" || target.tagName === "BUTTON")) return;  // their own action
      ev.preventDefault();
      submit();
      return;
    }
    if (ev.ctrlKey || ev.metaKey || typing(target)) return;
    if (ev.key === "Tab" && !ev.shiftKey) {
      const box = document.getElementById("edit-box");
      if (!box) return;
      ev.preventDefault();
      box.focus();
      return;
    }
    const choices = Array.from(form.querySelectorAll("input[name=choice]")).filter((el) => el.value !== "unanswerable");
    if (/^[1-9]$/.test(ev.key) && Number(ev.key) <= choices.length) {
      ev.preventDefault();
      choices[Number(ev.key) - 1].click();
      return;
    }
    const unanswerable = document.getElementById("choice-unanswerable");
    if ((ev.key === "u" || ev.key === "U") && unanswerable) {
      ev.preventDefault();
      unanswerable.click();
      const reason = document.getElementById("reason");
      if (reason) reason.focus();
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  spanSelection(); authoring(); spanAuthoring(); editChecks(); answerKeys(); mending();
});
