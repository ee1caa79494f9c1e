"""Benchmark: the annotation app's own time per item, in a real browser (headless Chromium).

For a RACE study (the bundled sample's original and CharSwap splits) and a SQuAD study (the
bundled sample), each built here in a temporary folder with one annotator, it times every item as
an annotator meets it: the item page is opened, an answer chosen (key 1 on RACE, a span selected
on SQuAD), Enter pressed, and the next page loaded. The app's time is read in the browser, so the
driver's own round trips are not in it: the item page's load (navigation start to the end of its
load event) plus the save (the Enter keydown to the end of the next page's load event).

The baseline, timed in the same run and interleaved item by item, is the same steps on a static
copy of the same pages (the same bytes, headers, script and style, answered by a server that
stores nothing and redirects a save to the next page): what the browser and a Python HTTP server
cost by themselves. The figure to read is the ratio; the target is a median under 300 ms.

    python bench/human_eval_latency.py [--items 30] [--busy N]

--busy N runs N busy processes (`python3 -c 'while True: pass'`) beside it, as a loaded
machine has. Needs Debian's chromium and chromium-driver.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results  # noqa: E402  (bench/results.py)
from advrace.core.config import release_config_from_dict  # noqa: E402
from advrace.human_eval.server import (HEADERS, STATIC, STATIC_KEPT, STATIC_TYPES,  # noqa: E402
                                       STATIC_VERSION, HumanEvalServer)
from advrace.human_eval.study import create_study  # noqa: E402
from advrace.release import build_release  # noqa: E402

SAMPLES = ROOT / "advrace" / "sample_data"
# Set on the item page before Enter is pressed; read on the page it leads to (same origin).
MARK_ENTER = ("document.addEventListener('keydown', e => { if (e.key === 'Enter') "
              "sessionStorage.setItem('enter', String(performance.timeOrigin + e.timeStamp)); }, true);")
LOADED = ("const n = performance.getEntriesByType('navigation')[0];"
          "return n && n.loadEventEnd > 0 ? [performance.timeOrigin, n.loadEventEnd] : null;")


def build_studies(tmp: Path, items: int) -> dict[str, tuple[Path, str]]:
    """{name: (study database, annotator token)}: `items` judge items each (RACE half original,
    half CharSwap)."""
    out = {}
    for name, data, splits, per_split in (("RACE", SAMPLES / "race", ["charswap"], (items + 1) // 2),
                                          ("SQuAD", SAMPLES / "squad" / "sample-v1.1.json", [], items)):
        build_release(release_config_from_dict({"data": {"path": str(data)}, "splits": splits, "workers": 1}),
                      tmp / f"{name}-release")
        # one annotator times the pages, the original and CharSwap versions of a question alike
        study = create_study(tmp / f"{name}-release", tmp / f"{name}.db", per_split=per_split, annotators=1, seed=0,
                             same_annotator_versions=True)
        out[name] = (tmp / f"{name}.db", next(iter(study["annotators"].values())))
    return out


def start(server: ThreadingHTTPServer) -> str:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}"


def static_copy(pages: dict[str, bytes]) -> ThreadingHTTPServer:
    """A server that answers GET with the captured `pages` (path -> HTML) and the app's static
    files, and a POST to an item with a redirect to the next item, storing nothing."""

    class Static(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def reply(self, status, body=b"", ctype="text/html; charset=utf-8", extra=()):
            self.send_response(status)
            for k, v in {**HEADERS, **dict(extra)}.items():
                self.send_header(k, v)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            name, _, version = self.path.rpartition("/static/")[2].partition("?v=")
            if self.path.startswith("/static/") and name in STATIC_TYPES:  # kept by the browser, as the app's
                kept = STATIC_KEPT.items() if version == STATIC_VERSION else ()
                return self.reply(200, (STATIC / name).read_bytes(), STATIC_TYPES[name], kept)
            self.reply(200, pages[self.path]) if self.path in pages else self.reply(404)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            head, _, pos = self.path.rpartition("/")
            self.reply(303, extra=[("Location", f"{head}/{int(pos) + 1}")])

    return ThreadingHTTPServer(("127.0.0.1", 0), Static)


def chrome():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,900"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def loaded(driver) -> tuple[float, float]:
    """The page's (time origin, load event end), once its load event has ended."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 30, poll_frequency=0.005).until(lambda d: d.execute_script(LOADED))


def one_item(driver, url: str, choose) -> float:
    """Milliseconds the browser spent on one item: its page's load, then the save to the next
    page's load (the person's own time in between is not counted)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    origin, load_end = loaded(driver)
    driver.execute_script(MARK_ENTER)
    choose(driver)
    ActionChains(driver).send_keys(Keys.ENTER).perform()
    WebDriverWait(driver, 30, poll_frequency=0.005).until(lambda d: d.execute_script(
        "const n = performance.getEntriesByType('navigation')[0];"
        "return performance.timeOrigin > arguments[0] && n && n.loadEventEnd > 0;", origin))
    next_origin, next_end = driver.execute_script(LOADED)
    enter = float(driver.execute_script("return sessionStorage.getItem('enter')"))
    return load_end + (next_origin + next_end - enter)


def press_1(driver):
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys("1").perform()


def select_first_word(driver):
    """Select the paragraph's first word as the mouse would (the page's script takes a mouseup)."""
    driver.execute_script(
        "const box = document.getElementById('context'); const t = box.firstChild;"
        "const r = document.createRange(); r.setStart(t, 0); r.setEnd(t, t.textContent.search(/\\s/));"
        "const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(r);"
        "box.dispatchEvent(new MouseEvent('mouseup', {bubbles: true}));")


def measure(driver, db: Path, token: str, choose) -> dict:
    """Each item of the study, timed in the app and on its static copy, interleaved."""
    app = HumanEvalServer(("127.0.0.1", 0), db)
    app_url = start(app)
    queue = f"/a/{token}/item"
    pages, pos = {}, 0
    while True:  # capture every item page as the annotator first sees it, and the page after the last
        try:
            with urllib.request.urlopen(f"{app_url}{queue}/{pos}") as resp:
                pages[f"{queue}/{pos}"] = resp.read()
        except urllib.error.HTTPError:
            break
        pos += 1
    n = pos
    pages[f"{queue}/{n}"] = pages[f"{queue}/{n - 1}"]
    static = static_copy(pages)
    static_url = start(static)
    times = {"app": [], "static": []}
    try:
        one_item(driver, f"{static_url}{queue}/0", choose)  # warm-up: the browser's first page
        for pos in range(n):
            times["app"].append(one_item(driver, f"{app_url}{queue}/{pos}", choose))
            times["static"].append(one_item(driver, f"{static_url}{queue}/{pos}", choose))
    finally:
        for server in (app, static):
            server.shutdown()
            server.server_close()
    return {**times, "items": n, "page bytes": statistics.median(len(p) for p in pages.values())}


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=30, help="judge items per study (default 30)")
    ap.add_argument("--busy", type=int, default=0, help="busy processes to run beside it (default 0)")
    results.add_argument(ap)
    args = ap.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    figures = {"busy processes": args.busy}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            studies = build_studies(Path(tmp), args.items)
            driver = chrome()
            try:
                for name, (db, token) in studies.items():
                    got = measure(driver, db, token, press_1 if name == "RACE" else select_first_word)
                    app, static = statistics.median(got["app"]), statistics.median(got["static"])
                    print(f"{name}: {got['items']} items, pages of {got['page bytes']:.0f} bytes (median)")
                    print(f"  app:         median {app:.0f} ms, p90 {p90(got['app']):.0f} ms per item")
                    print(f"  static copy: median {static:.0f} ms, p90 {p90(got['static']):.0f} ms per item")
                    print(f"  ratio: the app takes {app / static:.2f}x the static copy's time")
                    figures[name] = (f"{got['items']} items; app median {app:.0f} ms, p90 {p90(got['app']):.0f} ms; "
                                     f"static median {static:.0f} ms; ratio {app / static:.2f}x")
            finally:
                driver.quit()
    finally:
        for p in busy:
            p.kill()
            p.wait()
    if args.record:
        results.record("human_eval_latency", figures)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
