"""How the suite runs in parallel (python3 dev.py test): the real-browser tests in three groups, each a unit of work
run one test after another on one worker, handed out first, and every other file a unit of its own
(tests/conftest.py's scheduler)."""
import conftest
import dev


def test_dev_py_runs_the_suite_in_parallel_with_the_browser_tests_in_their_groups(monkeypatch, pytestconfig):
    assert dev.PARALLEL == ["-n", "auto", "--dist", "loadgroup"]
    monkeypatch.setattr(pytestconfig.option, "dist", "loadgroup")
    monkeypatch.setattr(pytestconfig.option, "numprocesses", 2, raising=False)
    monkeypatch.setattr(pytestconfig.option, "tx", ["popen", "popen"], raising=False)
    monkeypatch.setattr(pytestconfig.option, "loadscopereorder", True, raising=False)
    scheduler = conftest.pytest_xdist_make_scheduler(pytestconfig, log=None)
    assert pytestconfig.option.loadscopereorder is False            # units in the collection's order
    scopes = {nodeid: scheduler._split_scope(nodeid) for nodeid in (
        "tests/test_browser_lab.py::test_a", "tests/test_browser_why.py::test_b[x@y]", "tests/test_load.py::test_c",
        "tests/test_hostile.py::test_d", "tests/test_url.py::test_e", "tests/test_url.py::test_f[1]",
        "tests/test_lab.py::test_g", "tests/test_browser_a11y.py::test_h[home-phone]",
        "tests/test_browser_links.py::test_i", "tests/test_browser.py::test_j")}
    assert scopes == {"tests/test_browser_lab.py::test_a": "browser", "tests/test_browser_why.py::test_b[x@y]": "browser",
                      "tests/test_load.py::test_c": "browser", "tests/test_hostile.py::test_d": "browser",
                      "tests/test_url.py::test_e": "tests/test_url.py", "tests/test_url.py::test_f[1]": "tests/test_url.py",
                      "tests/test_lab.py::test_g": "tests/test_lab.py",
                      "tests/test_browser_a11y.py::test_h[home-phone]": "browser-a11y",
                      "tests/test_browser_links.py::test_i": "browser-walks", "tests/test_browser.py::test_j": "browser-walks"}
    monkeypatch.setattr(pytestconfig.option, "dist", "load")
    assert conftest.pytest_xdist_make_scheduler(pytestconfig, log=None) is None       # xdist's own, unchanged


def test_the_browser_groups_come_first_in_the_collection(request):
    """Each worker hands out units in the collection's order: the browser groups, the longest units, start first."""
    items = request.session.items
    groups = [conftest.browser_group(item.nodeid) for item in items]
    first_other = next((n for n, g in enumerate(groups) if g is None), len(groups))
    assert all(g is None for g in groups[first_other:])
    seen = [g for n, g in enumerate(groups[:first_other]) if n == 0 or groups[n - 1] != g]
    assert len(seen) == len(set(seen))                               # each group's tests together


def test_dev_py_keeps_a_worker_count_given_on_the_command_line(monkeypatch):
    calls = []
    monkeypatch.setattr(dev, "ensure_env", lambda requirements: None)
    monkeypatch.setattr(dev.subprocess, "call", lambda args, cwd: calls.append(args) or 0)
    dev.main(["test", "-k", "tokenizer"])
    dev.main(["test", "-n", "0"])
    dev.main(["test", "--quick"])
    assert calls[0][1:] == ["-m", "pytest", *dev.PARALLEL, "-k", "tokenizer"]
    assert calls[1][1:] == ["-m", "pytest", "-n", "0"]
    assert calls[2][1:] == ["-m", "pytest", *dev.PARALLEL, "-m", dev.QUICK]
