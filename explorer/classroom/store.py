"""Where a live class lives: its lesson, the step the teacher shows, who joined and what they answered.

Two stores with one interface, both plain Python (no Streamlit). A student's app polls `position` each second (the
step, the revealed steps and the lesson's version, never the lesson) and reads `lesson` once per class and version.

- `MemoryStore`: in this process, the default (one Streamlit server, as on Community Cloud).
- `RedisStore`: in Redis (`CLASS_STORE_URL=redis://...`), so every replica behind a load balancer sees the
  same classes.

Rules both keep (tests/test_class_store.py runs the same tests on each, Redis on a real server):

- A class is opened with a lesson and gets a short join code (students type it) and a teacher key (a secret
  only the teacher's session holds; only its hash is stored). Moving the class and revealing need the key.
- The teacher's second screen (a laptop beside the projector, or their phone) holds the peek key, `peek_key(key)`,
  made from the teacher key (only its hash is stored too): it moves the class and reveals, but cannot end it, and a
  teacher key cannot be worked back from it.
- A student joins with a code and an optional display name (plain text, cut to NAME_CHARS); a class holds at
  most MAX_STUDENTS. A student is known by an id their own app keeps, so a reload finds them again.
- One answer per student per step, changeable until the teacher reveals that step; after the reveal it stays.
  `answers` and `roster` give them all (the class's summary); nothing of a class outlives it: closing it or its
  expiry drops its answers and names.
- A class that nobody touched for IDLE_SECONDS is gone; an unknown or expired code is `None`, never an error.
- A class the teacher closed is remembered as ended (`ended`) for IDLE_SECONDS, so a student is told that the teacher
  ended it, not that the code is unknown.
- `server_id` names the store's life: it changes when the classes start from nothing (a new server process for the
  in-process store; a Redis that lost its data), so a page whose URL names an older one knows that its class was
  lost to a restart, not ended or expired.
- One session may send at most RATE_LIMIT joins or answers per RATE_WINDOW seconds (a flood is refused).
"""
import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass, field

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"   # no 0/O, 1/I/L: read aloud and typed without mistakes
CODE_LENGTH = 6
IDLE_SECONDS = 4 * 3600            # a class nobody touched for 4 hours is gone
PRESENT_SECONDS = 30               # a student seen within this many seconds counts as present
MAX_STUDENTS = 300
MAX_CLASSES = 500                  # in one process (MemoryStore); Redis holds what its memory allows
NAME_CHARS = 40
ANSWER_CHARS = 80
RATE_LIMIT, RATE_WINDOW = 20, 10.0  # joins or answers per session per window


class WrongKey(PermissionError):
    """Only the teacher's session (holding the teacher key) can move the class or reveal."""


class TooMany(RuntimeError):
    """The class is full, or this session sent too many requests in a short time."""


@dataclass(frozen=True)
class ClassState:
    """What every screen in the class reads: the lesson, the step shown, and which steps are revealed."""
    code: str
    lesson: dict
    step: int
    revealed: frozenset[int] = field(default_factory=frozenset)

    version: str = ""

    @property
    def is_revealed(self) -> bool:
        return self.step in self.revealed


@dataclass(frozen=True)
class Position:
    """Where the class is, without its lesson: what a student's poll reads each second. The lesson's `version`
    (a hash of it) lets an app parse the lesson once and keep it (a class's lesson never changes)."""
    code: str
    step: int
    revealed: frozenset[int]
    version: str

    @property
    def is_revealed(self) -> bool:
        return self.step in self.revealed


def lesson_version(lesson: dict) -> str:
    """A short hash of a lesson: the same lesson, the same version."""
    return hashlib.sha256(json.dumps(lesson, sort_keys=True).encode()).hexdigest()[:16]


def normalise_code(text: str) -> str:
    """A code as a student types it ("ab c-23d ") in the form the store keeps ("ABC23D")."""
    return "".join(c for c in str(text).upper() if c.isalnum())[:16]


def clean_text(text: str, limit: int) -> str:
    """Plain text of at most `limit` characters: control characters and line breaks become spaces."""
    text = "".join(" " if not c.isprintable() else c for c in str(text))
    return " ".join(text.split())[:limit]


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _leads(key: str, key_hash: str | None, peek_hash: str | None) -> bool:
    """Whether `key` is the one whose hash is `key_hash`, or the one whose hash is `peek_hash` (if any)."""
    given = _hash(str(key))
    return any(stored and hmac.compare_digest(stored, given) for stored in (key_hash, peek_hash))


def peek_key(key: str) -> str:
    """The second screen's key of the class whose teacher key is `key` (HMAC-SHA256 of "peek", 24 characters: the
    teacher's session makes it again whenever it draws the link; a store keeps only its hash)."""
    digest = hmac.new(str(key).encode(), b"peek", hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest[:18]).decode()


def _new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


class _RateLimiter:
    """At most RATE_LIMIT events per RATE_WINDOW seconds per sender (a sliding log, in this process)."""

    def __init__(self):
        self._events: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def allow(self, sender: str) -> bool:
        now = time.monotonic()
        with self._lock:
            if len(self._events) > 10 * MAX_STUDENTS * 4:          # bounded: forget senders gone quiet
                self._events = {s: t for s, t in self._events.items() if t and now - t[-1] < RATE_WINDOW}
            recent = [t for t in self._events.get(sender, []) if now - t < RATE_WINDOW]
            if len(recent) >= RATE_LIMIT:
                self._events[sender] = recent
                return False
            self._events[sender] = [*recent, now]
            return True


@dataclass
class _Class:
    lesson: dict
    key_hash: str
    version: str = ""
    peek_hash: str = ""                                            # the second screen's key (`peek_key`)
    step: int = 0
    revealed: set[int] = field(default_factory=set)
    names: dict[str, str] = field(default_factory=dict)            # student id -> display name
    seen: dict[str, float] = field(default_factory=dict)           # student id -> last seen (time.time())
    answers: dict[int, dict[str, str]] = field(default_factory=dict)   # step -> student id -> answer
    touched: float = field(default_factory=time.time)


class MemoryStore:
    """Classes in this process's memory (one Streamlit server). Thread-safe; bounded in classes and students."""

    def __init__(self):
        self._classes: dict[str, _Class] = {}
        self._ended: dict[str, float] = {}                         # code -> when its teacher closed it
        self._lock = threading.Lock()
        self._limiter = _RateLimiter()
        self._server_id = secrets.token_hex(4)                     # this process's classes

    def server_id(self) -> str:
        """A new id for each process: its classes die with it."""
        return self._server_id

    # --- the teacher ---------------------------------------------------------------------------

    def open_class(self, lesson: dict) -> tuple[str, str]:
        """A new class on `lesson` at its first step: (join code, teacher key)."""
        key = secrets.token_urlsafe(18)
        with self._lock:
            self._forget_idle()
            if len(self._classes) >= MAX_CLASSES:
                raise TooMany("This server holds as many classes as it can; try again later.")
            code = _new_code()
            while code in self._classes or code in self._ended:
                code = _new_code()
            self._classes[code] = _Class(lesson=json.loads(json.dumps(lesson)), key_hash=_hash(key),
                                         version=lesson_version(lesson), peek_hash=_hash(peek_key(key)))
        return code, key

    def move(self, code: str, key: str, step: int) -> ClassState:
        """Show step `step` to the whole class (clamped to the lesson's steps)."""
        with self._lock:
            c = self._teacher(code, key)
            c.step = max(0, min(int(step), len(c.lesson.get("steps", [])) - 1))
            return self._state(code, c)

    def reveal(self, code: str, key: str, step: int) -> ClassState:
        with self._lock:
            c = self._teacher(code, key)
            c.revealed.add(int(step))
            return self._state(code, c)

    def close(self, code: str, key: str) -> None:
        """End the class (the teacher key only: a second screen cannot end it)."""
        with self._lock:
            self._teacher(code, key, peek=False)
            self._classes.pop(normalise_code(code), None)
            self._ended[normalise_code(code)] = time.time()
            while len(self._ended) > MAX_CLASSES:                 # bounded: the oldest first
                del self._ended[next(iter(self._ended))]

    def leads(self, code: str, key: str) -> bool:
        """Whether `key` moves class `code` and reveals: its teacher key, or its second screen's (`peek_key`)."""
        with self._lock:
            c = self._get(code)
            return c is not None and _leads(key, c.key_hash, c.peek_hash)

    def ended(self, code: str) -> bool:
        """Whether the teacher closed class `code` (within the last IDLE_SECONDS)."""
        with self._lock:
            closed = self._ended.get(normalise_code(code))
            return closed is not None and time.time() - closed <= IDLE_SECONDS

    # --- everyone ------------------------------------------------------------------------------

    def state(self, code: str) -> ClassState | None:
        """The class's lesson and step, or None for an unknown or expired code."""
        with self._lock:
            c = self._get(code)
            return None if c is None else self._state(normalise_code(code), c)

    def position(self, code: str) -> Position | None:
        """The class's step, its revealed steps and its lesson's version (no lesson: a poll's cheap read)."""
        with self._lock:
            c = self._get(code)
            return None if c is None else Position(normalise_code(code), c.step, frozenset(c.revealed), c.version)

    def lesson(self, code: str) -> dict | None:
        """The class's lesson (read once per class and version by an app; see `position`)."""
        with self._lock:
            c = self._get(code)
            return None if c is None else c.lesson

    def join(self, code: str, student: str, name: str = "") -> bool:
        """Add `student` (or find them again after a reload); False for an unknown or expired code."""
        if not self._limiter.allow(student):
            raise TooMany("Too many requests from this screen in a short time: wait a few seconds.")
        with self._lock:
            c = self._get(code)
            if c is None:
                return False
            if student not in c.names and len(c.names) >= MAX_STUDENTS:
                raise TooMany(f"This class is full ({MAX_STUDENTS} students).")
            c.names[student] = clean_text(name, NAME_CHARS) or c.names.get(student, "")
            c.seen[student] = c.touched = time.time()
            return True

    def seen(self, code: str, student: str) -> None:
        """A student's app is still following (called by its polling)."""
        with self._lock:
            c = self._get(code)
            if c is not None and student in c.names:
                c.seen[student] = time.time()

    def answer(self, code: str, student: str, step: int, choice: str) -> bool:
        """Record (or change) `student`'s answer to step `step`; False once that step is revealed."""
        if not self._limiter.allow(student):
            raise TooMany("Too many answers from this screen in a short time: wait a few seconds.")
        with self._lock:
            c = self._get(code)
            if c is None or student not in c.names or int(step) in c.revealed:
                return False
            c.answers.setdefault(int(step), {})[student] = clean_text(choice, ANSWER_CHARS)
            c.seen[student] = c.touched = time.time()
            return True

    def my_answer(self, code: str, student: str, step: int) -> str | None:
        with self._lock:
            c = self._get(code)
            return None if c is None else c.answers.get(int(step), {}).get(student)

    def tally(self, code: str, step: int) -> dict[str, int]:
        """How many students gave each answer to step `step`."""
        with self._lock:
            c = self._get(code)
            counts: dict[str, int] = {}
            for choice in ([] if c is None else c.answers.get(int(step), {}).values()):
                counts[choice] = counts.get(choice, 0) + 1
            return counts

    def answers(self, code: str, step: int) -> dict[str, str]:
        """Every student's answer to step `step`, by student id (for the class's summary)."""
        with self._lock:
            c = self._get(code)
            return {} if c is None else dict(c.answers.get(int(step), {}))

    def roster(self, code: str) -> dict[str, str]:
        """Every student who joined, by id, with their display name ("" for none)."""
        with self._lock:
            c = self._get(code)
            return {} if c is None else dict(c.names)

    def present(self, code: str) -> int:
        """Students seen within the last PRESENT_SECONDS."""
        with self._lock:
            c = self._get(code)
            now = time.time()
            return 0 if c is None else sum(now - t <= PRESENT_SECONDS for t in c.seen.values())

    def names(self, code: str) -> list[str]:
        with self._lock:
            c = self._get(code)
            return [] if c is None else sorted(n for n in c.names.values() if n)

    # --- inside ------------------------------------------------------------------------------------

    def _get(self, code: str) -> _Class | None:
        code = normalise_code(code)
        c = self._classes.get(code)
        if c is not None and time.time() - c.touched > IDLE_SECONDS:
            del self._classes[code]
            return None
        return c

    def _teacher(self, code: str, key: str, peek: bool = True) -> _Class:
        c = self._get(code)
        if c is None or not _leads(key, c.key_hash, c.peek_hash if peek else None):
            raise WrongKey("Only the teacher who started this class can move it or reveal an answer.")
        c.touched = time.time()
        return c

    @staticmethod
    def _state(code: str, c: _Class) -> ClassState:
        return ClassState(code=code, lesson=c.lesson, step=c.step, revealed=frozenset(c.revealed), version=c.version)

    def _forget_idle(self) -> None:
        now = time.time()
        for code in [k for k, c in self._classes.items() if now - c.touched > IDLE_SECONDS]:
            del self._classes[code]


# Redis: one hash per class and small companions, every key expiring IDLE_SECONDS after the class was last touched.
# The checks that must not race (a full class, an answer after the reveal) run as Lua scripts inside Redis.
_JOIN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 and redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[3]) then return -1 end
if ARGV[2] ~= '' or redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) end
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
return 1
"""
_ANSWER = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then return 0 end
if redis.call('SISMEMBER', KEYS[3], ARGV[2]) == 1 then return 0 end
redis.call('HSET', KEYS[4], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[5], ARGV[4], ARGV[1])
return 1
"""


class RedisStore:
    """Classes in Redis, shared by every replica (`CLASS_STORE_URL=redis://host:6379/0`)."""

    SERVER_ID = "class-store:id"

    def __init__(self, url: str):
        import redis                          # only a deployment with CLASS_STORE_URL needs the package's server

        self._redis = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5)
        self._join = self._redis.register_script(_JOIN)
        self._answer = self._redis.register_script(_ANSWER)
        self._limiter = _RateLimiter()        # per replica: a session talks to one replica (session affinity)

    def server_id(self) -> str:
        """Kept in Redis, so the same for every replica and through a replica's restart; a Redis that lost its
        data gets a new one from the first replica that asks."""
        self._redis.set(self.SERVER_ID, secrets.token_hex(4), nx=True)
        return self._redis.get(self.SERVER_ID) or ""

    @staticmethod
    def _keys(code: str) -> dict[str, str]:
        base = f"class:{normalise_code(code)}"
        return {"class": base, "names": base + ":names", "seen": base + ":seen", "revealed": base + ":revealed"}

    def _touch(self, code: str, *extra: str) -> None:
        keys = [*self._keys(code).values(), *extra]
        pipe = self._redis.pipeline()
        for key in keys:
            pipe.expire(key, IDLE_SECONDS)
        pipe.execute()

    def _answers_key(self, code: str, step: int) -> str:
        return f"{self._keys(code)['class']}:answers:{int(step)}"

    def open_class(self, lesson: dict) -> tuple[str, str]:
        key = secrets.token_urlsafe(18)
        for _ in range(20):
            code = _new_code()
            k = self._keys(code)["class"]
            if self._redis.hsetnx(k, "lesson", json.dumps(lesson)):
                self._redis.hset(k, mapping={"key_hash": _hash(key), "peek_hash": _hash(peek_key(key)), "step": 0,
                                             "version": lesson_version(lesson)})
                self._redis.expire(k, IDLE_SECONDS)
                self._redis.delete(k + ":ended")          # a code used again
                return code, key
        raise TooMany("Could not find a free class code; try again.")

    def leads(self, code: str, key: str) -> bool:
        return _leads(key, *self._redis.hmget(self._keys(code)["class"], "key_hash", "peek_hash"))

    def _teacher(self, code: str, key: str, peek: bool = True) -> None:
        key_hash, peek_hash = self._redis.hmget(self._keys(code)["class"], "key_hash", "peek_hash")
        if not _leads(key, key_hash, peek_hash if peek else None):
            raise WrongKey("Only the teacher who started this class can move it or reveal an answer.")

    def move(self, code: str, key: str, step: int) -> ClassState:
        self._teacher(code, key)
        state = self.state(code)
        step = max(0, min(int(step), len(state.lesson.get("steps", [])) - 1))
        self._redis.hset(self._keys(code)["class"], "step", step)
        self._touch(code)
        return self.state(code)

    def reveal(self, code: str, key: str, step: int) -> ClassState:
        self._teacher(code, key)
        self._redis.sadd(self._keys(code)["revealed"], int(step))
        self._touch(code, self._answers_key(code, step))
        return self.state(code)

    def close(self, code: str, key: str) -> None:
        self._teacher(code, key, peek=False)
        base = self._keys(code)["class"]
        self._redis.delete(*self._keys(code).values(), *self._redis.keys(base + ":answers:*"))
        self._redis.set(base + ":ended", 1, ex=IDLE_SECONDS)

    def ended(self, code: str) -> bool:
        return bool(self._redis.exists(self._keys(code)["class"] + ":ended"))

    def state(self, code: str) -> ClassState | None:
        k = self._keys(code)
        fields = self._redis.hmget(k["class"], "lesson", "step", "version")
        if fields[0] is None:
            return None
        revealed = frozenset(int(s) for s in self._redis.smembers(k["revealed"]))
        return ClassState(code=normalise_code(code), lesson=json.loads(fields[0]), step=int(fields[1] or 0),
                          revealed=revealed, version=fields[2] or "")

    def position(self, code: str) -> Position | None:
        k = self._keys(code)
        pipe = self._redis.pipeline(transaction=False)             # one round trip
        pipe.hmget(k["class"], "step", "version")
        pipe.smembers(k["revealed"])
        (step, version), revealed = pipe.execute()
        if step is None:
            return None
        return Position(normalise_code(code), int(step), frozenset(int(s) for s in revealed), version or "")

    def lesson(self, code: str) -> dict | None:
        raw = self._redis.hget(self._keys(code)["class"], "lesson")
        return None if raw is None else json.loads(raw)

    def join(self, code: str, student: str, name: str = "") -> bool:
        if not self._limiter.allow(student):
            raise TooMany("Too many requests from this screen in a short time: wait a few seconds.")
        k = self._keys(code)
        result = self._join(keys=[k["class"], k["names"], k["seen"]],
                            args=[student, clean_text(name, NAME_CHARS), MAX_STUDENTS, time.time()])
        if result == -1:
            raise TooMany(f"This class is full ({MAX_STUDENTS} students).")
        if result == 1:
            self._touch(code)
        return result == 1

    def seen(self, code: str, student: str) -> None:
        k = self._keys(code)
        if self._redis.hexists(k["names"], student):
            self._redis.zadd(k["seen"], {student: time.time()})

    def answer(self, code: str, student: str, step: int, choice: str) -> bool:
        if not self._limiter.allow(student):
            raise TooMany("Too many answers from this screen in a short time: wait a few seconds.")
        k, answers = self._keys(code), self._answers_key(code, step)
        done = self._answer(keys=[k["class"], k["names"], k["revealed"], answers, k["seen"]],
                            args=[student, int(step), clean_text(choice, ANSWER_CHARS), time.time()])
        if done:
            self._touch(code, answers)
        return bool(done)

    def my_answer(self, code: str, student: str, step: int) -> str | None:
        return self._redis.hget(self._answers_key(code, step), student)

    def tally(self, code: str, step: int) -> dict[str, int]:
        counts: dict[str, int] = {}
        for choice in self._redis.hvals(self._answers_key(code, step)):
            counts[choice] = counts.get(choice, 0) + 1
        return counts

    def answers(self, code: str, step: int) -> dict[str, str]:
        return self._redis.hgetall(self._answers_key(code, step))

    def roster(self, code: str) -> dict[str, str]:
        return self._redis.hgetall(self._keys(code)["names"])

    def present(self, code: str) -> int:
        return int(self._redis.zcount(self._keys(code)["seen"], time.time() - PRESENT_SECONDS, "+inf"))

    def names(self, code: str) -> list[str]:
        return sorted(n for n in self._redis.hvals(self._keys(code)["names"]) if n)
