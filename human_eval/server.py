"""The annotation and authoring web app: Python's threaded HTTP server over the study database.

Safety: a person reaches only pages under their own secret token (stored hashed) and sees and
writes only their own queue; every write carries their CSRF token (a form field, or the
X-CSRF-Token header for the authoring API); every text is HTML-escaped (the JavaScript sets
textContent only), and the Content-Security-Policy allows no inline script, so a `<script>` in
a passage is shown as text and cannot run; tokens never leave in a Referer header. SQL is
parameterised throughout (store.py). The server binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import hmac
import html
import json
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from . import store

STATIC = Path(__file__).parent / "static"
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
MAX_BODY = 1 << 20
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
e = html.escape


class HumanEvalServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address, db_path, author_model=None):
        super().__init__(address, Handler)
        self.db_path = str(db_path)
        self.author_model = author_model
        self.model_lock = threading.Lock()
        self.local = threading.local()

    def db(self):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = store.connect(self.db_path)
        return conn


def page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>"
            "<link rel=stylesheet href=/static/style.css><script src=/static/app.js defer></script>"
            f"</head><body>{body}</body></html>")


class Handler(BaseHTTPRequestHandler):
    server: HumanEvalServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # no tokens in logs
        pass

    # ------------------------------------------------------------ responses

    def send(self, status: int, body: str | bytes, ctype: str = "text/html; charset=utf-8", extra=None):
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        for k, v in {**HEADERS, **(extra or {})}.items():
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def redirect(self, location: str):
        self.send(HTTPStatus.SEE_OTHER, "", extra={"Location": location})

    def deny(self, status=HTTPStatus.FORBIDDEN, message="access denied: open the link you were given"):
        self.send(status, page("advrace", f"<p class=error>{e(message)}</p>"))

    def send_json(self, status: int, obj):
        self.send(status, json.dumps(obj), "application/json")

    def body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ValueError("request too large")
        return self.rfile.read(n) if n else b""

    # ------------------------------------------------------------ routing

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def _route(self, method: str):
        try:
            path = urlsplit(self.path).path
            if method == "GET" and path.startswith("/static/"):
                return self._static(path[len("/static/"):])
            m = re.fullmatch(r"/a/([A-Za-z0-9_-]{1,200})(/.*)?", path)
            if m:
                return self._annotator(method, m.group(1), m.group(2) or "")
            m = re.fullmatch(r"/author/([A-Za-z0-9_-]{1,200})(/.*)?", path)
            if m:
                return self._author(method, m.group(1), m.group(2) or "")
            if path == "/":
                return self.send(200, page("advrace", "<p>Open the link you were given.</p>"))
            self.deny(HTTPStatus.NOT_FOUND, "no such page")
        except (ValueError, KeyError, json.JSONDecodeError) as exc:
            self.deny(HTTPStatus.BAD_REQUEST, f"bad request: {exc}")

    def _static(self, name: str):
        types = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
        if name not in types:
            return self.deny(HTTPStatus.NOT_FOUND, "no such file")
        self.send(200, (STATIC / name).read_bytes(), types[name])

    # ------------------------------------------------------------ annotators

    def _annotator(self, method, token, rest):
        db = self.server.db()
        person = store.person_by_token(db, token, "annotator")
        if person is None:
            return self.deny()
        base = f"/a/{token}"
        items = store.queue(db, person["id"])
        if rest in ("", "/") and method == "GET":
            todo = [r["position"] for r in items if r["annotation_id"] is None]
            return self.redirect(f"{base}/item/{todo[0]}" if todo and not person["finished"] else f"{base}/progress")
        if rest == "/progress" and method == "GET":
            return self.send(200, self._progress_page(person, items, base))
        if rest == "/finish" and method == "POST":
            form = self._form()
            if not self._csrf_ok(person, form.get("csrf")):
                return self.deny(message="missing or wrong form token; reload the page")
            db.execute("UPDATE people SET finished = 1 WHERE id = ?", (person["id"],))
            return self.redirect(f"{base}/progress")
        m = re.fullmatch(r"/item/(\d+)", rest)
        if not m or int(m.group(1)) >= len(items):
            return self.deny(HTTPStatus.NOT_FOUND, "no such item in your queue")
        pos = int(m.group(1))
        row = items[pos]
        if method == "GET":
            return self.send(200, self._item_page(person, row, pos, len(items), base))
        form = self._form()
        if not self._csrf_ok(person, form.get("csrf")):
            return self.deny(message="missing or wrong form token; reload the page")
        if person["finished"]:
            return self.deny(HTTPStatus.CONFLICT, "you have finished this study; answers can no longer change")
        item = store.item(db, row["item_id"])
        error = self._save(db, person, item, form)
        if error:
            return self.send(HTTPStatus.UNPROCESSABLE_ENTITY,
                             self._item_page(person, row, pos, len(items), base, error))
        items = store.queue(db, person["id"])
        after = [r["position"] for r in items if r["annotation_id"] is None and r["position"] > pos]
        before = [r["position"] for r in items if r["annotation_id"] is None]
        nxt = (after or before or [None])[0]
        self.redirect(f"{base}/item/{nxt}" if nxt is not None else f"{base}/progress")

    def _form(self) -> dict:
        values = parse_qs(self.body().decode("utf-8"), keep_blank_values=True)
        return {k: v[0] for k, v in values.items()}

    @staticmethod
    def _csrf_ok(person, given) -> bool:
        return bool(given) and hmac.compare_digest(str(given), person["csrf"])

    def _save(self, db, person, item, form) -> str | None:
        choice = form.get("choice", "")
        comment = form.get("comment", "")[:2000] or None
        if choice == "unanswerable":
            reason = form.get("reason", "")
            if reason not in store.REASONS:
                return "choose a reason why the question cannot be answered"
            store.save_annotation(db, person["id"], item["id"], unanswerable=True, reason=reason, comment=comment)
            return None
        p = item["payload"]
        if item["task"] == "multiple_choice":
            if not choice.isdigit() or int(choice) >= len(p["options"]):
                return "choose an option, or mark the question unanswerable"
            store.save_annotation(db, person["id"], item["id"], choice=int(choice), comment=comment)
            return None
        text, start = form.get("answer_text", ""), form.get("answer_start", "")
        if not text.strip():
            return "select the answer in the paragraph, or mark the question unanswerable"
        if start.isdigit() and p["context"][int(start):int(start) + len(text)] == text:
            begin = int(start)
        elif text in p["context"]:
            begin = p["context"].index(text)
        else:
            return "the answer must be a span of the paragraph"
        store.save_annotation(db, person["id"], item["id"], answer_text=text, answer_start=begin, comment=comment)
        return None

    def _progress_page(self, person, items, base) -> str:
        done = sum(1 for r in items if r["annotation_id"] is not None)
        links = " ".join(
            f"<a href='{base}/item/{r['position']}' class='{'done' if r['annotation_id'] else 'todo'}'>"
            f"{r['position'] + 1}</a>" for r in items)
        finish = ""
        if person["finished"]:
            finish = "<p class=done>You have finished. Thank you!</p>"
        elif done == len(items):
            finish = (f"<form method=post action='{base}/finish'><input type=hidden name=csrf "
                      f"value='{e(person['csrf'])}'><p>All answered. You can still change answers above; "
                      "when you are done:</p><button type=submit>Finish</button></form>")
        return page("Progress", f"<h1>Your progress</h1><p class=progress>{done} of {len(items)} answered</p>"
                                f"<nav>{links}</nav>{finish}")

    def _item_page(self, person, row, pos, total, base, error=None) -> str:
        db = self.server.db()
        item = store.item(db, row["item_id"])
        p = item["payload"]
        prior = db.execute("SELECT * FROM annotations WHERE person_id = ? AND item_id = ?",
                           (person["id"], item["id"])).fetchone()
        checked = lambda cond: " checked" if cond else ""  # noqa: E731
        parts = [f"<p class=progress>Question {pos + 1} of {total} · <a href='{base}/progress'>progress</a></p>"]
        if error:
            parts.append(f"<p class=error>{e(error)}</p>")
        parts.append(f"<form method=post action='{base}/item/{pos}'>"
                     f"<input type=hidden name=csrf value='{e(person['csrf'])}'>")
        unanswerable = bool(prior and prior["unanswerable"])
        if item["task"] == "multiple_choice":
            parts.append(f"<div class=passage>{e(p['passage'])}</div>")
            parts.append(f"<p class=question>{e(p['question'])}</p>")
            for i, option in enumerate(p["options"]):
                sel = prior is not None and not unanswerable and prior["choice"] == i
                parts.append(f"<label class=option><input type=radio name=choice value={i} id=choice-{i}"
                             f"{checked(sel)}> {LETTERS[i]}. {e(option)}</label>")
        else:
            parts.append("<p>Select the answer in the paragraph with the mouse.</p>")
            parts.append(f"<div id=context>{e(p['context'])}</div>")
            parts.append(f"<p class=question>{e(p['question'])}</p>")
            text = prior["answer_text"] if prior is not None and not unanswerable else ""
            start = prior["answer_start"] if prior is not None and not unanswerable else ""
            parts.append(f"<p>Your answer: <span id=selected>{e(text or '')}</span></p>"
                         f"<input type=hidden name=answer_text id=answer_text value='{e(text or '')}'>"
                         f"<input type=hidden name=answer_start id=answer_start value='{e(str(start))}'>"
                         f"<label class=option><input type=radio name=choice value=answer id=choice-answer"
                         f"{checked(bool(text))}> the selected span</label>")
        parts.append(f"<label class=option><input type=radio name=choice value=unanswerable id=choice-unanswerable"
                     f"{checked(unanswerable)}> The question cannot be answered</label>")
        reasons = "".join(f"<option value='{e(r)}'{' selected' if prior and prior['reason'] == r else ''}>{e(r)}</option>"
                          for r in store.REASONS)
        parts.append(f"<label>Reason (if it cannot be answered): <select name=reason id=reason>"
                     f"<option value=''>—</option>{reasons}</select></label>")
        comment = prior["comment"] if prior is not None and prior["comment"] else ""
        parts.append(f"<p><label>Comment (optional)<textarea name=comment id=comment>{e(comment)}</textarea>"
                     f"</label></p><button type=submit id=save>Save and continue</button></form>")
        return page(f"Question {pos + 1}", "".join(parts))

    # ------------------------------------------------------------ authors

    def _author(self, method, token, rest):
        db = self.server.db()
        person = store.person_by_token(db, token, "author")
        if person is None:
            return self.deny()
        base = f"/author/{token}"
        if rest in ("", "/") and method == "GET":
            query = parse_qs(urlsplit(self.path).query)
            return self.send(200, self._author_page(person, base, (query.get("from") or [None])[0]))
        if method != "POST" or rest not in ("/predict", "/submit"):
            return self.deny(HTTPStatus.NOT_FOUND, "no such page")
        if not self._csrf_ok(person, self.headers.get("X-CSRF-Token")):
            return self.send_json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong CSRF token"})
        model = self.server.author_model
        if model is None:
            return self.send_json(HTTPStatus.SERVICE_UNAVAILABLE,
                                  {"error": "no model: start the server with `advrace human-eval author --model`"})
        draft = json.loads(self.body().decode("utf-8"))
        problem = _check_draft(draft, need_label=rest == "/submit")
        if problem:
            return self.send_json(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": problem})
        with self.server.model_lock:
            out = model.analyse(draft["passage"], draft["question"], draft["options"])
        from .authoring import record_edit, submit

        if rest == "/predict":
            record_edit(db, person["id"], draft, out)
            return self.send_json(200, out)
        sid, fooled = submit(db, person["id"], draft, out, model.name)
        return self.send_json(200, {"id": sid, "fooled": fooled, **out})

    def _author_page(self, person, base, source) -> str:
        from .authoring import starting_point

        start = starting_point(self.server.db(), source)
        options = "".join(
            f"<p><label><input type=radio name=label value={i}{' checked' if i == start['label'] else ''}> "
            f"correct</label> <input class=option-input id=option-{i} value='{e(o)}'></p>"
            for i, o in enumerate(start["options"]))
        model = self.server.author_model
        return page("Write an adversarial question", (
            f"<h1>Write a question the model gets wrong</h1><p>Model: {e(model.name if model else 'none')}</p>"
            f"<form id=author-form data-csrf='{e(person['csrf'])}' data-base='{base}' "
            f"data-source='{e(start.get('source') or '')}'>"
            f"<label>Passage<textarea id=passage>{e(start['passage'])}</textarea></label>"
            f"<label>Question<textarea id=question>{e(start['question'])}</textarea></label>{options}"
            f"<button type=submit id=submit>Submit</button> <span id=status></span></form>"
            f"<p id=submitted></p><h2>Model</h2><p id=prediction></p><div id=probabilities></div>"
            f"<h2>Word importance</h2><div class=importance id=importance-question></div>"
            f"<div class=importance id=importance-passage></div>"))


def _check_draft(draft, need_label: bool) -> str | None:
    if not isinstance(draft, dict):
        return "expected a JSON object"
    if not isinstance(draft.get("passage"), str) or not isinstance(draft.get("question"), str):
        return "passage and question must be text"
    options = draft.get("options")
    if not isinstance(options, list) or not 2 <= len(options) <= 8 or not all(isinstance(o, str) for o in options):
        return "give 2 to 8 options"
    if len(draft["passage"]) > 20000:
        return "the passage is too long (20,000 characters at most)"
    if need_label:
        label = draft.get("label")
        if not isinstance(label, int) or isinstance(label, bool) or not 0 <= label < len(options):
            return "mark the correct option"
        if not draft["question"].strip() or not all(o.strip() for o in options):
            return "fill in the question and every option"
    return None


def serve(db_path, host: str = "127.0.0.1", port: int = 8000, author_model=None, ready=None):
    """Run until interrupted; `ready(server)` is called once listening (tests use it)."""
    server = HumanEvalServer((host, port), db_path, author_model)
    if ready:
        ready(server)
    try:
        server.serve_forever()
    finally:
        server.server_close()
