"""A class on the app as Streamlit Community Cloud runs it: `streamlit run streamlit_app.py` (bench/live.py's `serve`,
as every browser test starts it) with the four settings Cloud forces whatever config.toml says (run on save, fast
reruns, XSRF protection, usage statistics: set here as Streamlit's environment variables, the way a host overrides
config.toml), in a memory cgroup of Cloud's largest size, 2.7 GB (bench/cgroup.py). A teacher at a projector and a
student on a phone, in Chromium, follow "Attention in ten minutes" to its question; the answer is counted.

It needs a machine that can make a cgroup (Linux, cgroup v1, root): elsewhere it skips and says why, and under CI
(CI=true) it fails instead.
"""
import asyncio
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import expect

from bench.cgroup import CLOUD_MEMORY_BYTES, Cgroup, unavailable
from bench.live import serve
from bench.websocket_session import Session
from browser_support import PHONE, PROJECTOR
from conftest import _in_ci
from explorer import lessons
from test_browser_lessons import Watched, answer_and_reveal, join, start_class

CLOUD_FORCES = {"STREAMLIT_SERVER_RUN_ON_SAVE": "true", "STREAMLIT_RUNNER_FAST_RERUNS": "true",
                "STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION": "true", "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "true"}
LESSON = lessons.ready_lessons()["attention-in-ten-minutes"]       # five steps; a question on the last
# With usage statistics on, Streamlit's frontend first fetches its metrics settings from Streamlit's site. This machine
# cannot reach it, so the browser logs these; on Cloud the fetch succeeds and statistics are sent from every browser.
USAGE_STATISTICS = re.compile(r"data\.streamlit\.io/metrics\.json|metrics config|metrics tracking")


@pytest.fixture(scope="module")
def cloud_server():
    """The server as Cloud runs it: (base URL, server process, its cgroup)."""
    why = unavailable()
    if why:
        (pytest.fail if _in_ci() else pytest.skip)(f"cannot run the server in a 2.7 GB memory cgroup here: {why}")
    with Cgroup(memory_bytes=CLOUD_MEMORY_BYTES, name="cloud-test") as group, \
            serve(env=CLOUD_FORCES, cgroup=group) as (base, server):
        yield base, server, group


def settings_sent_to_a_browser(base: str):
    """The settings the server sends a new session (new_session's config), read over its websocket."""
    async def read():
        async with Session(base, "") as visitor:
            await visitor.wait_for(lambda run: run.full)
            return visitor.config
    # In a thread of its own: the session's Playwright (sync API) keeps an event loop running on this one.
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, read()).result()


def test_the_server_runs_in_a_2_7_gb_memory_cgroup_with_usage_statistics_and_run_on_save_on(cloud_server):
    base, server, group = cloud_server
    assert group.holds(server.pid)
    assert 0 <= CLOUD_MEMORY_BYTES - group.memory_limit_bytes() < 4096             # the kernel counts in pages
    config = settings_sent_to_a_browser(base)
    assert config.gather_usage_stats and config.allow_run_on_save


def test_a_teacher_and_a_phone_follow_a_lesson_to_its_question_and_the_answer_is_counted(chromium, cloud_server):
    base, server, group = cloud_server
    count = len(LESSON.steps)
    projector = chromium.new_context(viewport=PROJECTOR)
    phone = chromium.new_context(**PHONE)
    try:
        teacher = Watched(projector.new_page(), "the teacher")
        code = start_class(teacher, base, LESSON)
        student = Watched(phone.new_page(), "the student")
        join(student, base, code, "Ada")
        teacher.page.get_by_role("button", name="Show the class's step").click()
        for index in range(1, count):
            teacher.box().get_by_role("button", name="Next").click()
            expect(teacher.box().get_by_text(f"step {index + 1} of {count}")).to_be_visible()
            expect(student.box().get_by_text(f"step {index + 1} of {count}")).to_be_visible()
            expect(student.page).to_have_url(re.compile(rf"/{LESSON.steps[index].page}\?"))
        answer_and_reveal(teacher, [student], LESSON.steps[-1].question.prompt)   # "1 of 1" counted, then revealed
        for watched in (teacher, student):
            statistics = [p for p in watched.problems if USAGE_STATISTICS.search(p)]
            assert statistics, f"{watched.who}'s browser never asked for Streamlit's usage statistics settings"
            watched.problems = [p for p in watched.problems if p not in statistics]
            watched.check(f"step {count} of {count}")
        assert server.poll() is None and group.holds(server.pid) and group.oom_kills() == 0
    finally:
        projector.close()
        phone.close()
