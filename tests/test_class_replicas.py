"""Two replicas share one class through a real redis-server: two Python processes, each running the app (AppTest)
with CLASS_STORE_URL, the teacher on the first; students on both follow and every answer counts exactly once."""
from bench.replica import run_two


def test_two_replica_processes_share_a_class_through_redis_students_on_both_follow_and_answers_count_once():
    out = run_two(per_replica=3, moves=2)          # each replica checks that every student followed each Next
    assert [len(w) for w in out["waits"]] == [6, 6]                 # 3 students x 2 moves on each replica
    assert out["full_runs"] == [[1] * 6, [1] * 6]                   # one full run per follow, on both
    assert out["present"] == 6 and out["accepted"] == 12            # each student answered twice at once ...
    assert out["counted"] == {"it": 6}                              # ... and counts once, across both replicas
    assert out["redis_keys"] >= 4 and all(m > 0 for m in out["memory_mb"])
