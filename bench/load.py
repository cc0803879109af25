"""A real server and Chromium on the same cores: the cold start, and how long a visitor waits from pressing
Enter on a new sentence to the page redrawn, with 10 sessions spread over the walk-through (nobody training, 2
training, all typing at the same instant); then the server-side cost of one update while two trainings tick in
the same process (AppTest).

`python -c "from bench import load; load.run(slugs=['attention'])"` puts everyone on one page, and
`load.run(visitors=30, rounds=1)` measures a class of 30."""
import statistics
import threading
import time

from .apptest import open_app
from .live import (CLASS_SENTENCES, launch, look_at, open_class, open_view, serve, start_trainers, step_slugs,
                   typing_latencies)
from .report import Report
from .timing import p95

AREA = "load"


def run(report: Report | None = None, visitors: int = 10, trainers: int = 2, rounds: int = 3,
        slugs: list[str] | None = None) -> None:
    report = report or Report()
    classroom(report, visitors, trainers, rounds, slugs)
    contention(report)


def classroom(report: Report, visitors: int, trainers: int, rounds: int, slugs: list[str] | None) -> None:
    slugs = slugs or step_slugs()
    updates, pages = typing_updates(report, visitors, trainers, rounds, slugs)
    report.record("load.p95_s", p95(updates["nobody training"]))
    report.record("load.p95_training_s", p95(updates[f"{trainers} training"]))
    print_updates(report, AREA, updates, pages, visitors, trainers, slugs)


def typing_updates(report: Report, visitors: int, trainers: int, rounds: int, slugs: list[str], cgroup=None,
                   area: str = AREA) -> tuple[dict[str, list[float]], list[str]]:
    """A real server (under `cgroup`'s limits when given) and `visitors` Chromium tabs on `slugs`: seconds from
    Enter to the page redrawn, by condition (nobody training, `trainers` training, all at the same instant);
    and the page of each visitor."""
    from playwright.sync_api import sync_playwright

    sentences = CLASS_SENTENCES[:visitors]
    with sync_playwright() as playwright:
        browser = launch(playwright)
        start = time.perf_counter()
        with serve(cgroup=cgroup) as (base, _):
            first = browser.new_page()
            open_view(first, base, "home")
            report.line(area, f"cold start: server start to the first page rendered in Chromium "
                              f"{time.perf_counter() - start:.1f} s")
            tabs = [first, *[browser.new_context().new_page() for _ in range(visitors - 1)]]
            pages = open_class(tabs, base, slugs)
            # Students open the page, then type: let every tab draw its page in front and the machine settle
            # first (measured without this, the first few updates wait for the other tabs' first drawing).
            for page in tabs:
                look_at(page)
            time.sleep(3)
            updates = {"nobody training": typing_latencies(tabs, sentences, rounds=rounds, together=False)}
            coach_browser, coaches = start_trainers(playwright, base, trainers)
            updates[f"{trainers} training"] = typing_latencies(tabs, sentences, rounds=rounds, together=False,
                                                               first_round=rounds)
            updates[f"{trainers} training, all {visitors} at the same instant"] = typing_latencies(
                tabs, sentences, rounds=rounds, together=True, first_round=2 * rounds)
            for page in coaches:
                page.get_by_role("button", name="Pause", exact=True).click()
        browser.close()
        coach_browser.close()
    return updates, pages


def print_updates(report: Report, area: str, updates: dict[str, list[float]], pages: list[str], visitors: int,
                  trainers: int, slugs: list[str]) -> None:
    report.line(area, f"typing a new sentence with {visitors} sessions open on {', '.join(slugs)} (one visitor at a "
                      f"time unless said), Enter to the page's last change painted; all {visitors + trainers} "
                      "browser tabs share this machine's cores with the server:")
    for name, times in updates.items():
        report.line(area, f"  {name}: median {statistics.median(times):.2f} s, p95 {p95(times):.2f} s, "
                          f"slowest {max(times):.2f} s ({len(times)} updates)")
        if len(slugs) > 1:
            by_page = {slug: [t for t, p in zip(times, pages * (len(times) // visitors)) if p == slug]
                       for slug in slugs}
            report.line(area, "    median by page: " + ", ".join(f"{slug} {statistics.median(t):.2f} s"
                                                                 for slug, t in by_page.items() if t))


def contention(report: Report, updates: int = 10, slug: str = "feedforward") -> None:
    """Server-side cost of one visitor's update (a new sentence on page `slug`; feed-forward has the slowest
    script run), alone and while two trainings tick in other threads of the same process."""
    from explorer.lab.training import PRESETS, new_run

    at = open_app(f"pages/{slug}.py")

    def updates_median(salt: str) -> float:
        times = []
        for i in range(updates):                # always a sentence this server has not seen (no cache hit)
            at.text_input(key="text").set_value(f"the {salt} cat sat on the mat because it was tired {i} "
                                                * (1 + i % 2))
            start = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    alone = updates_median("big")
    stop = threading.Event()

    def train():
        lab_run = new_run(PRESETS["tales"][1], "bench")
        while not stop.is_set() and not lab_run.finished:
            lab_run.tick()
            stop.wait(0.6)                  # the lab's tick interval

    threads = [threading.Thread(target=train) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(2)
    busy = updates_median("small")
    stop.set()
    for thread in threads:
        thread.join()
    report.line(AREA, f"server-side script run for a new sentence on the {slug} page: {alone * 1e3:.0f} ms alone, "
                      f"{busy * 1e3:.0f} ms while 2 trainings tick in the same process (medians of {updates})")
