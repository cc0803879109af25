"""The app runs everywhere as Streamlit Community Cloud runs it: the settings Cloud forces are the app's own, so a
laptop, a school's server and the test server (bench/live.py) all run what students meet on Cloud."""
import inspect
import tomllib
from pathlib import Path

from streamlit import config

from bench import live

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = tomllib.loads((ROOT / ".streamlit/config.toml").read_text())
# What Community Cloud forces, whatever config.toml says, except usage statistics (docs/deploying.md says so)
CLOUD_FORCES = {"server.runOnSave": True, "runner.fastReruns": True, "server.enableXsrfProtection": True}


def setting(name: str):
    section, key = name.split(".")
    return SETTINGS.get(section, {}).get(key, config._config_options_template[name].default_val)


def test_the_settings_community_cloud_forces_are_the_apps_own():
    assert {name: setting(name) for name in CLOUD_FORCES} == CLOUD_FORCES


def test_no_file_watcher_stalls_the_server_for_every_session_when_a_page_imports_a_module():
    assert setting("server.fileWatcherType") == "none"


def test_the_test_server_is_started_with_nothing_but_where_to_listen():
    source = inspect.getsource(live.serve)
    flags = [word.strip('",') for word in source.split() if word.startswith('"--')]
    assert flags == ["--server.address", "--server.port", "--server.headless"]
