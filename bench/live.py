"""A real server and a real browser, for the benchmark and the browser tests (tests/browser_support.py):
`streamlit run` on 127.0.0.1 and Debian's Chromium through Playwright (never a downloaded browser): the full browser
for the benchmark, which measures what a student's browser spends; its headless shell for the tests."""
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote_plus

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"                          # Debian's chromium: the full browser, run headless
# Debian's chromium-headless-shell: the same Chromium (version, Blink, V8) without the full browser's own user
# interface, which --headless still runs (a renderer for its hidden tab strip, per window). What Playwright runs for
# headless tests by default, and what the tests run: 12% less of Chromium's CPU on the projector's walk (97.5 s
# against 110.5), the whole suite in 11.4 min against 13.7 (docs/figures.md, "The test suite").
HEADLESS_SHELL = "/usr/bin/chromium-headless-shell"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(timeout: float = 60, env: dict | None = None, cgroup=None, port: int | None = None):
    """Start `streamlit run streamlit_app.py` on a free port, as a user starts it (.streamlit/config.toml and
    Streamlit's defaults, which agree with what Community Cloud forces; nothing else but where to listen); yields
    (base URL, server process). `env` adds environment variables for the server (e.g. a Hugging Face cache);
    `cgroup` (an entered bench.cgroup.Cgroup) runs the server under its CPU quota and memory limit from its start;
    `port` starts it on that port instead (a server restarted where its pages will look for it again)."""
    port = port or free_port()
    log = tempfile.NamedTemporaryFile("w+", prefix="streamlit-", suffix=".log", delete=False)
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "streamlit_app.py", "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
        preexec_fn=cgroup.join if cgroup else None)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if urllib.request.urlopen(base + "/_stcore/health", timeout=1).status == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError("streamlit did not start:\n" + log.read()[-3000:])
            time.sleep(0.2)
        yield base, server
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
        log.close()
        os.unlink(log.name)


def launch(playwright, executable: str = CHROMIUM):
    """Chromium, headless (the full browser unless `executable` names another)."""
    return playwright.chromium.launch(executable_path=executable, args=ARGS)


# A run has drawn its page and ended: Streamlit marks its script state as not running, the page's title (every page
# has one: explorer/app/layout.py, `page_header`) is there, so is the app's CSS (explorer/app/styles.py; it lands
# about 0.1 s after the run ends), and every chart the run placed (its element's key starts with "chart_":
# explorer/app/plotly_component.py) has its plot in the page: the chart component's code loads on its own, after the
# run has ended on a page's first visit. The state alone is "not running" too before a new session's first run starts.
RUN_ENDED = """() => document.querySelector("[data-test-script-state='notRunning']") !== null
                  && document.querySelector("[data-testid='stMain'] h1") !== null
                  && getComputedStyle(document.documentElement).getPropertyValue("--explorer-styles").trim() === 'applied'
                  && [...document.querySelectorAll("[data-testid='stElementContainer'][class*='st-key-chart_']")]
                       .every(chart => chart.querySelector('.explorer-plot, .js-plotly-plot'))"""


def wait_until_run(page, new_document: bool = False) -> None:
    """Wait for the app to finish its script run: the app's frame is there, and its run has ended with the page
    drawn (RUN_ENDED). After an action on an open page, a moment is left first for the run to start (the page of
    the last run shows RUN_ENDED until then); a `new_document` has no title before its first run draws one."""
    page.wait_for_selector("[data-testid='stApp']")
    if not new_document:
        page.wait_for_timeout(300)
    page.wait_for_function(RUN_ENDED, polling=100)     # every animation frame ("raf") would cost the CPU the run needs


def open_view(page, app_url: str, slug: str, **query) -> None:
    """Open page `slug` with these URL parameters (model=, text=, ...) and wait for its script run."""
    path = "" if slug == "home" else slug
    page.goto(f"{app_url}/{path}" + ("?" + "&".join(f"{k}={quote_plus(str(v))}" for k, v in query.items())
                                     if query else ""))
    wait_until_run(page, new_document=True)


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children, in MB (Linux /proc)."""
    total = 0
    for p in [pid, *_children(pid)]:
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(c) for c in f.read().split()]
    except OSError:
        return []
    return kids + [g for k in kids for g in _children(k)]


# --- what the benchmark watches in the browser ------------------------------------------------------------

def chromium_pids() -> set[int]:
    """Every Chromium process on the machine (Debian's /usr/bin/chromium runs /usr/lib/chromium/chromium)."""
    return {int(p) for p in os.listdir("/proc") if p.isdigit() and "/chromium/" in _cmdline(p).split(" ")[0]}


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().replace("\0", " ")
    except OSError:
        return ""


def cpu_seconds(pids: set[int], reaped: bool = False) -> float:
    """User + system CPU seconds of these processes so far (Linux /proc); with `reaped`, also the CPU of
    their children that have exited (a process's cutime and cstime: Chromium ends utility processes and
    renderers while a page runs, and their CPU would be lost)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if reaped else 0)
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> set[int]:
    """`root` and every process descended from it (by parent pid, read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo += children.get(pid, [])
    return tree


def own_chromium_pids() -> set[int]:
    """Every Chromium process this process started (through Playwright's driver): the browser, its zygotes,
    renderers, GPU and utility processes, crashpad. Unlike `chromium_pids`, none of another program's."""
    return {pid for pid in process_tree(os.getpid()) if "/chromium/" in _cmdline(str(pid)).split(" ")[0]}


class ChromiumCpu:
    """Cores used by this process's Chromium between `start()` and `stop()`: every process of its tree, those
    that exit in between included (their CPU stays in their parent's reaped time)."""

    def start(self) -> None:
        self._pids = own_chromium_pids()
        self._cpu, self._clock = cpu_seconds(self._pids, reaped=True), time.perf_counter()

    def stop(self) -> float:
        # a process that ended in the window has moved its CPU into its parent's reaped time; one that started
        # in it counts from zero
        cpu = cpu_seconds(own_chromium_pids(), reaped=True) - self._cpu
        return cpu / (time.perf_counter() - self._clock)


def idle_priority(pids: set[int]) -> None:
    """Put every thread of these processes under SCHED_IDLE: they run only when a core is otherwise free.

    Nice values do not do it: Playwright's driver (not this process) starts Chromium, and Chromium,
    running as root here, sets its own processes' nice values. Processes they start later inherit it.
    """
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))
            except OSError:
                pass


def start_tiny_tales(page, base: str) -> None:
    """A visitor opens the training lab, picks the tiny-tales preset and presses Start."""
    open_view(page, base, "training")
    page.locator("[data-testid='stSelectbox']:has(input[aria-label='Preset'])").click()
    page.get_by_role("option", name="tales", exact=True).click()
    wait_until_run(page)
    page.get_by_role("button", name="Start", exact=True).click()


def watch_network(page) -> dict:
    """Chromium's network log of `page` from now on (its DevTools protocol): request id -> url, status,
    headers (lower-case), `cached` (served from the browser's cache) and `wire` (bytes received, headers
    included, once loaded)."""
    log = {}
    network = page.context.new_cdp_session(page)
    network.send("Network.enable")
    network.on("Network.responseReceived", lambda e: log.setdefault(e["requestId"], {}).update(
        url=e["response"]["url"], status=e["response"]["status"],
        cached=bool(e["response"].get("fromDiskCache") or e["response"].get("fromMemoryCache")),
        headers={k.lower(): v for k, v in e["response"]["headers"].items()}))
    network.on("Network.requestServedFromCache", lambda e: log.setdefault(e["requestId"], {}).update(cached=True))
    network.on("Network.loadingFinished", lambda e: log.setdefault(e["requestId"], {}).update(
        wire=e["encodedDataLength"]))
    return log


def look_at(page) -> None:
    """The visitor looking at their screen: bring the tab to the front and let it paint once (a hidden
    tab does not draw, and its first paint in front is not part of the next update)."""
    page.bring_to_front()
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


# One per round: never a sentence the server has already traced.
VERBS = ["ran", "slept", "hid", "jumped", "fell", "sang", "swam", "ate", "barked", "danced"]

# Installed in a tab before its visitor presses Enter: the page's own clock stamps the Enter key and every
# later change to the page's main area (charts, text, tables) or to its run state, at the animation frame
# that paints it.
# Stamping in the page leaves out Playwright's round trips (about 0.05-0.1 s per update, more when the
# machine is busy), which a student does not wait for.
_WATCH = """() => {
  const t = window.__update = {enter: null, last: null};
  document.querySelector('[data-testid=stSidebar] input[aria-label=Sentence]').addEventListener('keydown',
    e => { if (e.key === 'Enter') t.enter = performance.now(); }, {once: true});
  const stamp = () => { if (t.enter !== null) requestAnimationFrame(() => { t.last = performance.now(); }); };
  new MutationObserver(stamp).observe(document.querySelector('[data-testid=stMain]'),
                                      {subtree: true, childList: true, attributes: true, characterData: true});
  // the script run ending counts too: a new sentence may leave a section looking the same
  new MutationObserver(stamp).observe(document.querySelector('[data-testid=stApp]'),
                                      {attributes: true, attributeFilter: ['data-test-script-state']});
}"""

# True once the page has been still for `quiet` ms after its last change.
_SETTLED = "quiet => window.__update.last !== null && performance.now() - window.__update.last > quiet"

# Every chart on the page has been drawn (plotly.js loads once per page, then each chart draws).
CHARTS_DRAWN = """() => { const plots = [...document.querySelectorAll('.js-plotly-plot')];
  return plots.length > 0 && plots.every(plot => plot.querySelector('.svg-container')); }"""

# Counts the Plotly charts the page builds from scratch (each new chart adds an .svg-container).
COUNT_CHARTS = """() => { window.__built = 0; window.__builtVega = 0;
  const count = (n, css) => (n.matches(css) ? 1 : 0) + n.querySelectorAll(css).length;
  new MutationObserver(ms => { for (const m of ms) for (const n of m.addedNodes) if (n.nodeType === 1) {
    window.__built += count(n, '.svg-container'); window.__builtVega += count(n, '.vega-embed'); } })
  .observe(document.body, {subtree: true, childList: true}); }"""


def typing_latencies(tabs, sentences, rounds: int, together: bool, first_round: int = 0) -> list[float]:
    """Seconds from pressing Enter on a new sentence (a different one each round) to the last change
    its page paints; one visitor after another, or all tabs at the same instant."""
    latencies = []
    for round_ in range(first_round, first_round + rounds):
        # a new verb and a new length each round: every page then has something to redraw (a chart of the
        # sentence's shapes looks the same for a sentence of the same length)
        ending = f" and the dog {VERBS[round_ % len(VERBS)]}" + " again" * (1 + round_ % 3)
        pending = []
        for i, page in enumerate(tabs):
            look_at(page)
            box = page.get_by_role("textbox", name="Sentence", exact=True)
            box.fill(sentences[i] + ending)
            page.evaluate(_WATCH)
            box.press("Enter")
            pending.append(page)
            if not together:
                latencies.append(_wait_redrawn(pending.pop(), ending))
        for page in pending:
            look_at(page)
            latencies.append(_wait_redrawn(page, ending))
    return latencies


def _wait_redrawn(page, ending: str, quiet_ms: int = 700) -> float:
    """Seconds from Enter to the page's last change, once the new sentence reached the URL, the script
    run has ended and nothing on the page changed for `quiet_ms` (no chart still drawing)."""
    import re
    page.wait_for_url(re.compile(re.escape(quote_plus(ending)) + "(&|$)"))   # the new sentence reached the URL
    page.wait_for_selector("[data-test-script-state='notRunning']")
    try:
        page.wait_for_function(_SETTLED, arg=quiet_ms, polling=100)
    except Exception as error:          # say which page did not settle, and what the probe saw
        raise RuntimeError(f"{page.url} did not settle: {page.evaluate('() => window.__update')}") from error
    update = page.evaluate("() => window.__update")
    return (update["last"] - update["enter"]) / 1e3


# Twelve words, every one known to tinytales; in a class, visitor i types sentence i.
PAGE_SENTENCE = "the fat cat sat on the mat because it was tired"
CLASS_SENTENCES = [f"the {a} cat sat on the mat because it was {b}"
                   for b in ("tired", "sad", "happy", "hungry", "cold", "sleepy")
                   for a in ("big", "small", "old", "young", "fat", "little", "red")]


def step_slugs() -> list[str]:
    """The walk-through's step pages (home left out), in order."""
    from explorer.registry import STEPS
    return [step.slug for step in STEPS if step.slug != "home"]


def open_class(tabs, base: str, slugs: list[str], **query) -> list[str]:
    """Visitor i opens step page slugs[i % len(slugs)] with sentence i; returns the page of each visitor."""
    pages = [slugs[i % len(slugs)] for i in range(len(tabs))]
    for page, slug, sentence in zip(tabs, pages, CLASS_SENTENCES):
        open_view(page, base, slug, text=sentence, **query)
    return pages


def start_trainers(playwright, base: str, n: int):
    """`n` visitors in a browser of their own, each training tiny tales in the lab; returns (browser, tabs).

    Their own browsers would run on their own computers; here they share the cores, so their Chromium runs at
    idle priority to leave the server and the measured tabs what a classroom would (the server's side of
    their training, ticks and redraws, is still measured)."""
    before = chromium_pids()
    browser = launch(playwright)
    idle_priority(chromium_pids() - before)
    tabs = [browser.new_context().new_page() for _ in range(n)]
    idle_priority(chromium_pids() - before)
    for page in tabs:
        start_tiny_tales(page, base)
    return browser, tabs
