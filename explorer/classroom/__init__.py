"""A live class: a teacher leads a lesson, every student follows on their own screen and answers (issue 24).

`store.py` keeps the classes (in this process, or in Redis for several replicas); `open_store` picks one.
"""
import os

from explorer.classroom.store import MemoryStore, RedisStore


def open_store(url: str | None = None):
    """The class store: Redis at `url` (default: the CLASS_STORE_URL environment variable), else this process's
    memory."""
    url = url if url is not None else os.environ.get("CLASS_STORE_URL", "")
    return RedisStore(url) if url else MemoryStore()
