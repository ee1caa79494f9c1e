"""The annotation and authoring web app: Python's threaded HTTP server over the study database.

A request goes to the first entry of `ROUTES` (method + path pattern -> handler) that matches;
pages are Jinja2 templates (templates/) with autoescaping, and every SQL statement is in store.py.

Safety: a person reaches only pages under their own secret token (stored hashed) and sees and
writes only their own queue; every write carries their CSRF token (a form field, or the
X-CSRF-Token header for the authoring API); every text is HTML-escaped by the templates (the
JavaScript sets textContent only), and the Content-Security-Policy allows no inline script, so a
`<script>` in a passage is shown as text and cannot run; tokens never leave in a Referer header.
SQL is parameterised throughout (store.py). The server binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.core.text import LETTERS, plural

from . import mending, store
from .answers import YES, prior_answer, save_form, submitted_answer
from .authoring import AuthoringModel, submit
from .editing import EDIT_INSTRUCTIONS, edit_problem

HERE = Path(__file__).parent
STATIC = HERE / "static"
STATIC_TYPES = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
TEMPLATES = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(),
                        undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# The static files' address carries a digest of them (?v=), so that a browser keeps them between
# pages (a page then loads without fetching them again) and a changed app is a new address.
STATIC_VERSION = hashlib.sha256(b"".join((STATIC / n).read_bytes() for n in sorted(STATIC_TYPES))).hexdigest()[:16]
TEMPLATES.globals["static_version"] = STATIC_VERSION
STATIC_KEPT = {"Cache-Control": "public, max-age=31536000, immutable"}
MAX_BODY = 1 << 20
WRONG_FORM_TOKEN = "missing or wrong form token; reload the page"


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


# --------------------------------------------------------------------------- routes

# A path pattern is a regular expression in which <kind:name> (or <kind>, named after its kind)
# stands for a named part of one of these kinds; `below` is nothing, or anything from a slash on.
PARTS = {"token": r"[A-Za-z0-9_-]{1,200}", "int": r"\d+", "path": r".*", "below": r"(?:/.*)?"}


@dataclass(frozen=True)
class Route:
    methods: frozenset[str]
    pattern: re.Pattern
    handler: Callable
    role: str | None  # a person's page: the path's <token> must be theirs, in this role


def route(methods: str, path: str, handler: Callable, role: str | None = None) -> Route:
    regex = re.sub(r"<(?:(\w+):)?(\w+)>", lambda m: f"(?P<{m[2]}>{PARTS[m[1] or m[2]]})", path)
    return Route(frozenset(methods.split()), re.compile(regex), handler, role)


def annotator_base(token: str) -> str:
    return f"/a/{token}"


def author_base(token: str) -> str:
    return f"/author/{token}"


# ------------------------------------------------------------ pages for everyone


def home(req):
    req.page(HTTPStatus.OK, "message.html", title="advrace", message="Open the link you were given.", error=False)


def static_file(req, name):
    if name not in STATIC_TYPES:
        return req.deny(HTTPStatus.NOT_FOUND, "no such file")
    kept = req.query.get("v") == [STATIC_VERSION]
    req.send(HTTPStatus.OK, (STATIC / name).read_bytes(), STATIC_TYPES[name], STATIC_KEPT if kept else None)


# ------------------------------------------------------------ annotators


def resume(req, person, token):
    """The first unanswered question, or the progress page."""
    todo = [r["position"] for r in store.queue(req.db, person["id"]) if r["annotation_id"] is None]
    base = annotator_base(token)
    req.redirect(f"{base}/item/{todo[0]}" if todo and not person["finished"] else f"{base}/progress")


def progress_page(req, person, token):
    """The queue at a glance; with ?finish=1, the step that asks to confirm Finish."""
    items = store.queue(req.db, person["id"])
    req.page(HTTPStatus.OK, "progress.html", title="Progress", person=person, items=items,
             base=annotator_base(token), done=answered(items),
             confirm=(req.query.get("finish") or [""])[0] == "1" and not person["finished"])


def answered(items) -> int:
    return sum(1 for r in items if r["annotation_id"] is not None)


def finish(req, person, token):
    """Finish is final, so it waits for every question of the queue to have an answer ("cannot be
    answered" is one): a queue finished early would leave its items short of judgements."""
    if not csrf_ok(person, req.form().get("csrf")):
        return req.deny(message=WRONG_FORM_TOKEN)
    open_items = sum(1 for r in store.queue(req.db, person["id"]) if r["annotation_id"] is None)
    if open_items and not person["finished"]:
        return req.page(HTTPStatus.CONFLICT, "message.html", title="advrace", error=True,
                        message=f"{plural(open_items, 'question')} of your queue still without an answer; answer each "
                                "(“The question cannot be answered” is an answer) before you finish",
                        link=(f"{annotator_base(token)}/progress", "Back to your progress"))
    store.mark_finished(req.db, person["id"])
    req.redirect(f"{annotator_base(token)}/progress")


def item_page(req, person, token, pos):
    items = store.queue(req.db, person["id"])
    if int(pos) >= len(items):
        return not_in_queue(req, person, token)
    if person["finished"]:
        return show_finished_item(req, person, token, items, int(pos))
    store.record_view(req.db, person["id"], items[int(pos)]["item_id"])  # time per item: saved - first shown
    show_item(req, person, token, items, int(pos))


def save_answer(req, person, token, pos):
    items = store.queue(req.db, person["id"])
    if int(pos) >= len(items):
        return not_in_queue(req, person, token)
    pos = int(pos)
    form = req.form()
    if not csrf_ok(person, form.get("csrf")):
        return req.deny(message=WRONG_FORM_TOKEN)
    with store.transaction(req.db, immediate=True):  # Finish pressed in another tab meanwhile: nothing saved
        finished = store.is_finished(req.db, person["id"])
        error = None if finished else save_form(req.db, person, store.item(req.db, items[pos]["item_id"]), form)
    if finished:
        return req.page(HTTPStatus.CONFLICT, "message.html", title="Finished", error=True,
                        message="You have finished this study, so answers can no longer change; "
                                "nothing was saved.",
                        link=(f"{annotator_base(token)}/progress", "See your answers on the progress page"))
    if error:
        return show_item(req, person, token, items, pos, error, form)
    items = store.queue(req.db, person["id"])
    after = [r["position"] for r in items if r["annotation_id"] is None and r["position"] > pos]
    before = [r["position"] for r in items if r["annotation_id"] is None]
    nxt = (after or before or [None])[0]
    base = annotator_base(token)
    req.redirect(f"{base}/item/{nxt}" if nxt is not None else f"{base}/progress")


def not_in_queue(req, person, token, rest=""):
    req.deny(HTTPStatus.NOT_FOUND, "no such item in your queue")


def show_item(req, person, token, items, pos, error=None, form=None):
    """The item's page by its kind (`item_template`); after a refused save, `form` is what the
    person sent, shown again so that nothing they wrote is lost."""
    item = store.item(req.db, items[pos]["item_id"])
    template = item_template(item)
    context = dict(person=person, base=annotator_base(token), pos=pos, total=len(items), done=answered(items),
                   error=error, payload=item["payload"])
    status = HTTPStatus.UNPROCESSABLE_ENTITY if error else HTTPStatus.OK
    if template == "edit.html":
        p = item["payload"]
        prior = store.candidate(req.db, person["id"], item["id"])
        if form is not None:
            text, beyond = form.get("edit_text", ""), form.get("beyond_repair", "").lower() in YES
        else:
            text = (prior["text"] or "") if prior else p["machine"]
            beyond = bool(prior and prior["beyond_repair"])
        return req.page(status, template, title=f"Sentence {pos + 1}", instructions=EDIT_INSTRUCTIONS,
                        paragraph=marked(p["context"], {"sentence": p["sentence"], "fake": p.get("fake")}),
                        text=text, beyond_repair=beyond, **context)
    row = store.annotation(req.db, person["id"], item["id"])
    prior = prior_answer(row)
    grammatical = None if row is None or row["grammatical"] is None else ("yes" if row["grammatical"] else "no")
    if form is not None:
        prior, grammatical = submitted_answer(form), form.get("grammatical") or None
    if template == "verify.html":
        context["paragraph"] = marked(item["payload"]["context"], {"highlight": item["payload"]["highlight"]})
    else:
        context["mend"] = mending.page(req.db, person, item, form)
    req.page(status, template, title=f"Question {pos + 1}", multiple_choice=item["task"] == MULTIPLE_CHOICE,
             letters=LETTERS, reasons=store.REASONS, prior=prior, grammatical=grammatical, **context)


def item_template(item: dict) -> str:
    """The page an item is shown on: an edit item's edit page; a SQuAD item whose payload
    highlights a sentence (verify, or a control shown like one) the verify page; every other
    item the judge form (RACE verify items too: answered blind, like a judge item)."""
    if item["kind"] == store.EDIT:
        return "edit.html"
    if item["task"] == EXTRACTIVE_QA and "highlight" in item["payload"]:
        return "verify.html"
    return "item.html"


def marked(text: str, spans: dict) -> list[tuple[str, str]]:
    """`text` cut into (piece, class names) at each named span ([start, end], or None), a piece's
    classes naming the spans it lies in: the template marks them without any markup in the data."""
    spans = {name: span for name, span in spans.items() if span}
    cuts = sorted({0, len(text), *(i for span in spans.values() for i in span)})
    return [(text[s:e], " ".join(n for n, (lo, hi) in spans.items() if lo <= s and e <= hi))
            for s, e in zip(cuts, cuts[1:]) if e > s]


def check_edit(req, person, token, pos):
    """The live checks of an edit as the person types (JSON in: edit_text, beyond_repair; out:
    {"problem": why it would be refused, or null}); the same checks run again on save."""
    if not csrf_ok(person, req.headers.get("X-CSRF-Token")):
        return req.send_json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong CSRF token"})
    items = store.queue(req.db, person["id"])
    if int(pos) >= len(items):
        return req.send_json(HTTPStatus.NOT_FOUND, {"error": "no such item in your queue"})
    item = store.item(req.db, items[int(pos)]["item_id"])
    if item["kind"] != store.EDIT:
        return req.send_json(HTTPStatus.NOT_FOUND, {"error": "not a sentence to edit"})
    sent = json.loads(req.body().decode("utf-8") or "{}")
    if not isinstance(sent, dict):
        return req.send_json(HTTPStatus.BAD_REQUEST, {"error": "send a JSON object: edit_text, beyond_repair"})
    problem = edit_problem(item["payload"], str(sent.get("edit_text", "")), bool(sent.get("beyond_repair")))
    req.send_json(HTTPStatus.OK, {"problem": problem})


def show_finished_item(req, person, token, items, pos):
    """After Finish an item is shown read-only: the question and what the person answered."""
    item = store.item(req.db, items[pos]["item_id"])
    req.page(HTTPStatus.OK, "finished_item.html", title=f"Question {pos + 1}", person=person,
             base=annotator_base(token), pos=pos, total=len(items), done=answered(items), payload=item["payload"],
             multiple_choice=item["task"] == MULTIPLE_CHOICE, letters=LETTERS,
             answer=store.annotation(req.db, person["id"], item["id"]),
             candidate=store.candidate(req.db, person["id"], item["id"]))


def mend_check(req, person, token, pos):
    """The live checks of a new option (app.js asks as it is typed): JSON, as `mending.live`."""
    items = store.queue(req.db, person["id"])
    if int(pos) >= len(items):
        return req.send_json(HTTPStatus.NOT_FOUND, {"error": "no such item in your queue"})
    if not csrf_ok(person, req.headers.get("X-CSRF-Token")):
        return req.send_json(HTTPStatus.FORBIDDEN, {"error": WRONG_FORM_TOKEN})
    item = store.item(req.db, items[int(pos)]["item_id"])
    if not mending.offered(item):
        return req.send_json(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": "this question takes no new option"})
    req.send_json(HTTPStatus.OK, mending.live(req.db, item, req.form()))


# ------------------------------------------------------------ authors


def author_page(req, person, token):
    """The multiple-choice page, or the span page for a span model (with the study's SQuAD
    paragraphs to pick from)."""
    model = req.server.author_model
    kind = model or AuthoringModel
    req.page(HTTPStatus.OK, kind.template, title="Write an adversarial question", person=person,
             base=author_base(token), model_name=model.name if model else "none",
             start=kind.starting_point(req.db, (req.query.get("from") or [None])[0]),
             paragraphs=store.paragraphs(req.db) if kind.task == EXTRACTIVE_QA else [],
             threshold=getattr(model, "fooled_below", None))


def predict(req, person, token):
    analysed = analyse_draft(req, person, final=False)
    if analysed:
        draft, out = analysed
        store.add_edit(req.db, person["id"], draft, out)
        req.send_json(HTTPStatus.OK, out)


def submit_draft(req, person, token):
    analysed = analyse_draft(req, person, final=True)
    if analysed:
        draft, out = analysed
        sid, fooled = submit(req.db, person["id"], draft, out, req.server.author_model)
        req.send_json(HTTPStatus.OK, {"id": sid, "fooled": fooled, **out})


def no_such_page(req, person=None, token=None, rest=""):
    req.deny(HTTPStatus.NOT_FOUND, "no such page")


def analyse_draft(req, person, final: bool) -> tuple[dict, dict] | None:
    """The draft in the request body and the model's output on it; None once an error is sent."""
    if not csrf_ok(person, req.headers.get("X-CSRF-Token")):
        return req.send_json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong CSRF token"})
    model = req.server.author_model
    if model is None:
        return req.send_json(HTTPStatus.SERVICE_UNAVAILABLE,
                             {"error": "no model: start the server with `advrace human-eval author --model`"})
    draft = json.loads(req.body().decode("utf-8"))
    problem = model.check(draft, final)
    if problem:
        return req.send_json(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": problem})
    with req.server.model_lock:
        return draft, model.analyse_draft(draft)


def csrf_ok(person, given) -> bool:
    return bool(given) and hmac.compare_digest(str(given), person["csrf"])


ANNOTATOR, AUTHOR = store.ANNOTATOR, store.AUTHOR
# The first match wins. A person's unknown pages are refused only after their token is checked,
# so a wrong token is always "access denied".
ROUTES = (
    route("GET POST", "/", home),
    route("GET", "/static/<path:name>", static_file),
    route("GET", "/a/<token>/?", resume, ANNOTATOR),
    route("GET", "/a/<token>/progress", progress_page, ANNOTATOR),
    route("POST", "/a/<token>/finish", finish, ANNOTATOR),
    route("GET", "/a/<token>/item/<int:pos>", item_page, ANNOTATOR),
    route("POST", "/a/<token>/item/<int:pos>", save_answer, ANNOTATOR),
    route("POST", "/a/<token>/item/<int:pos>/check", check_edit, ANNOTATOR),
    route("POST", "/a/<token>/item/<int:pos>/mend-check", mend_check, ANNOTATOR),
    route("GET POST", "/a/<token><below:rest>", not_in_queue, ANNOTATOR),
    route("GET", "/author/<token>/?", author_page, AUTHOR),
    route("POST", "/author/<token>/predict", predict, AUTHOR),
    route("POST", "/author/<token>/submit", submit_draft, AUTHOR),
    route("GET POST", "/author/<token><below:rest>", no_such_page, AUTHOR),
)


# --------------------------------------------------------------------------- requests


class Handler(BaseHTTPRequestHandler):
    server: HumanEvalServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # no tokens in logs
        pass

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def dispatch(self):
        try:
            path = urlsplit(self.path).path
            for r in ROUTES:
                m = r.pattern.fullmatch(path)
                if m is None or self.command not in r.methods:
                    continue
                params = m.groupdict()
                if r.role is None:
                    return r.handler(self, **params)
                person = store.person_by_token(self.db, params["token"], r.role)
                if person is None:
                    return self.deny()
                return r.handler(self, person, **params)
            no_such_page(self)
        except (ValueError, KeyError, json.JSONDecodeError) as exc:
            self.deny(HTTPStatus.BAD_REQUEST, f"bad request: {exc}")

    # ------------------------------------------------------------ request

    @property
    def db(self):
        return self.server.db()

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.path).query)

    def body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ValueError("request too large")
        return self.rfile.read(n) if n else b""

    def form(self) -> dict:
        values = parse_qs(self.body().decode("utf-8"), keep_blank_values=True)
        return {k: v[0] for k, v in values.items()}

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

    def page(self, status: int, template: str, **context):
        self.send(status, TEMPLATES.get_template(template).render(**context))

    def redirect(self, location: str):
        self.send(HTTPStatus.SEE_OTHER, "", extra={"Location": location})

    def deny(self, status=HTTPStatus.FORBIDDEN, message="access denied: open the link you were given"):
        self.page(status, "message.html", title="advrace", message=message, error=True)

    def send_json(self, status: int, obj):
        self.send(status, json.dumps(obj), "application/json")


def serve(db_path, host: str = "127.0.0.1", port: int = 8000, author_model=None, ready=None):
    """Run until interrupted; `ready(server)` is called once listening (tests use it)."""
    server = HumanEvalServer((host, port), db_path, author_model)
    if ready:
        ready(server)
    try:
        server.serve_forever()
    finally:
        server.server_close()
