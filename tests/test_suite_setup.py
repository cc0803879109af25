"""How the suite runs in parallel (python3 dev.py test): the real-browser tests as one unit of work, one test after
another on one worker, and every other file a unit of its own (tests/conftest.py's scheduler)."""
import conftest
import dev


def test_dev_py_runs_the_suite_in_parallel_with_the_browser_tests_in_one_group(monkeypatch, pytestconfig):
    assert dev.PARALLEL == ["-n", "auto", "--dist", "loadgroup"]
    monkeypatch.setattr(pytestconfig.option, "dist", "loadgroup")
    monkeypatch.setattr(pytestconfig.option, "numprocesses", 2, raising=False)
    monkeypatch.setattr(pytestconfig.option, "tx", ["popen", "popen"], raising=False)
    scheduler = conftest.pytest_xdist_make_scheduler(pytestconfig, log=None)
    scopes = {nodeid: scheduler._split_scope(nodeid) for nodeid in (
        "tests/test_browser_lab.py::test_a", "tests/test_browser_why.py::test_b[x@y]", "tests/test_load.py::test_c",
        "tests/test_hostile.py::test_d", "tests/test_url.py::test_e", "tests/test_url.py::test_f[1]",
        "tests/test_lab.py::test_g")}
    assert scopes == {"tests/test_browser_lab.py::test_a": "browser", "tests/test_browser_why.py::test_b[x@y]": "browser",
                      "tests/test_load.py::test_c": "browser", "tests/test_hostile.py::test_d": "browser",
                      "tests/test_url.py::test_e": "tests/test_url.py", "tests/test_url.py::test_f[1]": "tests/test_url.py",
                      "tests/test_lab.py::test_g": "tests/test_lab.py"}
    monkeypatch.setattr(pytestconfig.option, "dist", "load")
    assert conftest.pytest_xdist_make_scheduler(pytestconfig, log=None) is None       # xdist's own, unchanged


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
