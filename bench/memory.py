"""A real server's resident memory (the server process and its children) as a class arrives: after the first
visitor, with 10 idle, with 10 exploring the walk-through (each its own sentence), and with 2 of them also
training tiny tales while the others type a new sentence each. `python -c "from bench import memory;
memory.run(visitors=30)"` measures a class of 30."""
import time

from .live import (CLASS_SENTENCES, launch, look_at, open_class, open_view, rss_mb, serve, start_trainers,
                   step_slugs, typing_latencies)
from .report import Report

AREA = "memory"


def run(report: Report | None = None, visitors: int = 10, trainers: int = 2) -> None:
    from playwright.sync_api import sync_playwright

    report = report or Report()
    memory = {}
    with sync_playwright() as playwright:
        browser = launch(playwright)
        with serve() as (base, server):
            tabs = [browser.new_context().new_page() for _ in range(visitors)]
            open_view(tabs[0], base, "home")
            memory["first visitor"] = rss_mb(server.pid)
            for page in tabs[1:]:
                open_view(page, base, "home")
            memory[f"{visitors} idle"] = rss_mb(server.pid)
            open_class(tabs, base, step_slugs())
            memory[f"{visitors} exploring"] = rss_mb(server.pid)
            coach_browser, coaches = start_trainers(playwright, base, trainers)
            time.sleep(5)
            for page in tabs:
                look_at(page)
            typing_latencies(tabs, CLASS_SENTENCES[:visitors], rounds=1, together=False)
            memory[f"{trainers} also training"] = rss_mb(server.pid)
            for page in coaches:
                page.get_by_role("button", name="Pause", exact=True).click()
        browser.close()
        coach_browser.close()
    added = (memory[f"{visitors} exploring"] - memory["first visitor"]) / (visitors - 1)
    report.record("memory.training_mb", memory[f"{trainers} also training"])
    report.line(AREA, "server memory (RSS): " + ", ".join(f"{mb:.0f} MB with {name}" for name, mb in memory.items())
                + f"; about {added:.1f} MB per further exploring visitor")
