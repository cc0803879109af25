"""The class store keeps a live class's rules, in this process and in Redis (a real redis-server the test starts)."""
import concurrent.futures
import shutil
import socket
import subprocess
import time

import pytest

from explorer.classroom import open_store
from explorer.classroom import store as class_store

LESSON = {"title": "attention in ten minutes", "steps": [{"view": {"page": "attention"}}, {"view": {"page": "home"}},
                                                         {"view": {"page": "prediction"}}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url():
    """A throwaway redis-server on a free port, without persistence (Debian's package; .ci/run installs it)."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed (apt-get install redis-server; .ci/run does it)"
    port = free_port()
    server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    import redis
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            assert server.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
    yield url
    server.terminate()
    server.wait(10)


@pytest.fixture(params=["memory", "redis"])
def store(request):
    if request.param == "memory":
        return class_store.MemoryStore()
    url = request.getfixturevalue("redis_url")
    import redis
    redis.Redis.from_url(url).flushdb()
    return open_store(url)


def test_a_class_opens_with_a_short_code_students_join_and_follow_the_teacher(store):
    code, key = store.open_class(LESSON)
    assert 4 <= len(code) <= 8 and code.isalnum() and code == class_store.normalise_code(code)
    assert not set(code) & set("01OIL")
    assert store.state(code).step == 0 and store.state(code).lesson == LESSON
    assert store.join(code, "s1", "Ada") and store.join(class_store.normalise_code(code.lower()), "s2", "")
    assert store.present(code) == 2 and store.names(code) == ["Ada"]
    assert store.move(code, key, 2).step == 2 and store.state(code).step == 2
    assert store.move(code, key, 99).step == 2 and store.move(code, key, -5).step == 0   # clamped to the lesson


def test_a_poll_reads_the_position_and_the_lessons_version_without_the_lesson(store):
    code, key = store.open_class(LESSON)
    other, _ = store.open_class({**LESSON, "title": "another"})
    where = store.position(code)
    assert (where.code, where.step, where.revealed, where.is_revealed) == (code, 0, frozenset(), False)
    assert where.version == store.state(code).version == class_store.lesson_version(LESSON) != store.position(other).version
    assert store.lesson(code) == LESSON
    store.move(code, key, 2)
    store.reveal(code, key, 2)
    assert store.position(code) == class_store.Position(code, 2, frozenset({2}), where.version) and store.position(code).is_revealed
    assert store.position(code.lower()).code == code
    assert store.position("NOPE42") is None and store.lesson("NOPE42") is None


def test_only_the_teacher_key_moves_or_reveals(store):
    code, key = store.open_class(LESSON)
    other_code, other_key = store.open_class(LESSON)
    store.join(code, "s1")
    for wrong in ["", "s1", other_key, key[:-1]]:
        with pytest.raises(class_store.WrongKey):
            store.move(code, wrong, 1)
        with pytest.raises(class_store.WrongKey):
            store.reveal(code, wrong, 0)
    assert store.state(code).step == 0 and not store.state(code).revealed


def test_the_teachers_second_screen_moves_and_reveals_with_its_peek_key_but_cannot_end_the_class(store):
    code, key = store.open_class(LESSON)
    other_code, other_key = store.open_class(LESSON)
    peek = class_store.peek_key(key)
    assert peek not in (key, class_store.peek_key(other_key)) and peek == class_store.peek_key(key)   # made again
    assert len(peek) == 24 and peek.replace("-", "").replace("_", "").isalnum()                      # a URL's text
    assert store.leads(code, key) and store.leads(code, peek) and store.leads(code.lower(), peek)
    for wrong in ["", peek[:-1], class_store.peek_key(other_key), class_store.peek_key(peek), key + "peek"]:
        assert not store.leads(code, wrong)
        with pytest.raises(class_store.WrongKey):
            store.move(code, wrong, 1)
        with pytest.raises(class_store.WrongKey):
            store.reveal(code, wrong, 1)
    assert not store.leads(other_code, peek) and not store.leads("NOPE42", peek)
    assert store.move(code, peek, 1).step == 1 and store.reveal(code, peek, 1).revealed == {1}
    assert store.move(code, key, 2).step == 2                                  # the teacher's tab still leads
    with pytest.raises(class_store.WrongKey):
        store.close(code, peek)                                                # ending is the teacher's tab's alone
    assert store.state(code).step == 2 and not store.ended(code)
    if not isinstance(store, class_store.MemoryStore):                        # only hashes are kept
        assert not {key, peek} & set(store._redis.hvals(f"class:{code}"))
    store.close(code, key)
    assert not store.leads(code, peek) and not store.leads(code, key)


def test_an_unknown_or_expired_code_is_none_never_an_error(store, monkeypatch):
    assert store.state("NOPE42") is None and store.join("NOPE42", "s1") is False
    assert store.answer("NOPE42", "s1", 0, "a") is False and store.tally("NOPE42", 0) == {}
    assert store.state("") is None and store.state("<script>") is None
    if isinstance(store, class_store.MemoryStore):                  # Redis expires keys itself: its TTL is checked below
        code, _ = store.open_class(LESSON)
        monkeypatch.setattr(class_store.time, "time", lambda real=time.time: real() + class_store.IDLE_SECONDS + 1)
        assert store.state(code) is None
    else:
        code, _ = store.open_class(LESSON)
        store.join(code, "s1")
        client = store._redis
        assert 0 < client.ttl(f"class:{code}") <= class_store.IDLE_SECONDS and 0 < client.ttl(f"class:{code}:names") <= class_store.IDLE_SECONDS


def test_a_class_the_teacher_closed_is_remembered_as_ended_and_an_unknown_code_is_not(store):
    code, key = store.open_class(LESSON)
    other, _ = store.open_class(LESSON)
    assert not store.ended(code)
    store.close(code, key)
    assert store.state(code) is None and store.ended(code) and store.ended(code.lower())
    assert not store.ended(other) and not store.ended("NOPE42")        # running, or never was


def test_the_server_id_stays_for_the_stores_life_and_is_new_when_its_classes_start_from_nothing(store, redis_url):
    assert store.server_id() == store.server_id() and store.server_id()
    if isinstance(store, class_store.MemoryStore):               # a new process: a new in-process store
        assert class_store.MemoryStore().server_id() != store.server_id()
    else:                                              # every replica, and a replica restarted, read the same id ...
        assert open_store(redis_url).server_id() == store.server_id()
        before = store.server_id()
        store._redis.flushdb()                         # ... until Redis loses its data
        assert open_store(redis_url).server_id() != before


def test_one_answer_per_student_per_step_changeable_until_the_reveal(store):
    code, key = store.open_class(LESSON)
    for s in ["s1", "s2", "s3"]:
        store.join(code, s)
    assert store.answer(code, "s1", 0, "dog") and store.answer(code, "s2", 0, "dog")
    assert store.answer(code, "s1", 0, "cat")                          # changed: still one answer from s1
    assert store.tally(code, 0) == {"cat": 1, "dog": 1} and store.my_answer(code, "s1", 0) == "cat"
    assert not store.answer(code, "stranger", 0, "dog")                 # never joined
    store.reveal(code, key, 0)
    assert store.state(code).is_revealed
    assert not store.answer(code, "s1", 0, "dog") and not store.answer(code, "s3", 0, "dog")   # after the reveal
    assert store.tally(code, 0) == {"cat": 1, "dog": 1} and store.my_answer(code, "s1", 0) == "cat"
    assert store.answer(code, "s3", 1, "x") and store.tally(code, 1) == {"x": 1}              # another step


def test_every_answer_and_who_gave_it_are_read_for_the_summary_and_nothing_outlives_the_class(store):
    code, key = store.open_class(LESSON)
    store.join(code, "s1", "Ada")
    store.join(code, "s2", "")
    store.answer(code, "s1", 0, "dog")
    store.answer(code, "s2", 0, "cat")
    store.answer(code, "s2", 2, "1")
    assert store.answers(code, 0) == {"s1": "dog", "s2": "cat"} and store.answers(code, 2) == {"s2": "1"}
    assert store.answers(code, 1) == {} and store.roster(code) == {"s1": "Ada", "s2": ""}
    store.close(code, key)
    assert store.answers(code, 0) == {} and store.roster(code) == {} and store.answers(code, 2) == {}
    if not isinstance(store, class_store.MemoryStore):
        assert not store._redis.keys(f"class:{code}:*answers*") and not store._redis.keys(f"class:{code}:names")


def test_names_and_answers_are_plain_text_of_limited_length(store):
    code, _ = store.open_class(LESSON)
    store.join(code, "s1", "<b>Bob</b>\n\u0000" + "x" * 500)
    [name] = store.names(code)
    assert len(name) <= class_store.NAME_CHARS and "\n" not in name and "\u0000" not in name and name.startswith("<b>Bob</b>")
    store.answer(code, "s1", 0, "y" * 1000)
    assert [len(a) for a in store.tally(code, 0)] == [class_store.ANSWER_CHARS]


def test_a_reload_finds_the_student_again_and_keeps_their_name_and_answer(store):
    code, _ = store.open_class(LESSON)
    store.join(code, "s1", "Ada")
    store.answer(code, "s1", 0, "dog")
    assert store.join(code, "s1", "")                      # the reloaded app joins again without a name
    assert store.names(code) == ["Ada"] and store.my_answer(code, "s1", 0) == "dog" and store.present(code) == 1


def test_a_class_is_bounded_and_a_flood_from_one_session_is_refused(store, monkeypatch):
    monkeypatch.setattr(class_store, "MAX_STUDENTS", 5)
    code, _ = store.open_class(LESSON)
    for i in range(5):
        assert store.join(code, f"s{i}")
    with pytest.raises(class_store.TooMany):
        store.join(code, "late")
    assert store.join(code, "s0")                          # someone already in may come back
    refused = 0
    for i in range(class_store.RATE_LIMIT + 5):
        try:
            store.answer(code, "s1", 0, str(i))
        except class_store.TooMany:
            refused += 1
    allowed = class_store.RATE_LIMIT - 1                             # s1's join was one of its requests
    assert refused == class_store.RATE_LIMIT + 5 - allowed and store.tally(code, 0) == {str(allowed - 1): 1}


def test_sixty_answers_sent_within_one_second_are_all_counted_exactly_once(store):
    code, key = store.open_class(LESSON)
    students = [f"s{i}" for i in range(60)]
    for s in students:
        store.join(code, s)
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        done = list(pool.map(lambda s: store.answer(code, s, 0, "AB"[int(s[1:]) % 2]), students))
    assert all(done) and store.tally(code, 0) == {"A": 30, "B": 30} and store.present(code) == 60


def test_two_replicas_share_one_class_through_redis(redis_url):
    teacher_side, student_side = open_store(redis_url), open_store(redis_url)
    code, key = teacher_side.open_class(LESSON)
    assert student_side.join(code, "s1", "Ada")
    teacher_side.move(code, key, 1)
    assert student_side.state(code).step == 1
    student_side.answer(code, "s1", 1, "dog")
    assert teacher_side.tally(code, 1) == {"dog": 1}


def test_the_store_is_picked_from_the_environment(monkeypatch, redis_url):
    monkeypatch.delenv("CLASS_STORE_URL", raising=False)
    assert isinstance(open_store(), class_store.MemoryStore)
    monkeypatch.setenv("CLASS_STORE_URL", redis_url)
    assert isinstance(open_store(), class_store.RedisStore)
