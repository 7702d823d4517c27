"""remove-disks' plan: every replica of a removed log dir to another dir of its broker, largest first to the dir
with the most room; a removed, cordoned or offline dir takes none; a replica no dir has room for stays, named; an
unknown dir is a request error naming the broker's dirs; Kafka's reassignment JSON with log_dirs."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from kafka_rebalancer.model.schemas import LOG_DIRS, REPLICA_LOG_DIRS
from kafka_rebalancer.operations.request import RequestError, make_request
from kafka_rebalancer.plan.log_dir_plan import balance_plan, log_dir_document, removal_plan
from kafka_rebalancer.plan.promises import log_dir_promises


def dirs(*rows: tuple[int, str, int | None, int, bool]) -> pd.DataFrame:
    """(broker, path, capacity, used, cordoned)"""
    return pd.DataFrame([{"broker_id": b, "log_dir": d, "capacity_bytes": c, "capacity_source": "capacity file",
                          "used_bytes": u, "volume_total_bytes": 10_000, "volume_usable_bytes": 5_000,
                          "cordoned": cordoned, "offline": False} for b, d, c, u, cordoned in rows],
                        columns=LOG_DIRS.names)


def replicas(*rows: tuple[str, int, int, str, int]) -> pd.DataFrame:
    return pd.DataFrame([{"topic": t, "partition": p, "broker_id": b, "log_dir": d, "size_bytes": s,
                          "future_log_dir": None} for t, p, b, d, s in rows], columns=REPLICA_LOG_DIRS.names)


def test_largest_first_to_the_dir_with_most_room_and_what_fits_nowhere_stays() -> None:
    log_dirs = dirs((1, "/a", 1000, 900, False), (1, "/b", 1000, 400, False), (1, "/c", 1000, 500, False),
                    (1, "/d", 1000, 0, True), (2, "/a", 1000, 100, False), (2, "/b", 1000, 0, False))
    on_dirs = replicas(("t", 0, 1, "/a", 500), ("t", 1, 1, "/a", 300), ("t", 2, 1, "/a", 100), ("u", 0, 1, "/b", 5),
                       ("t", 0, 2, "/a", 100))
    plan = removal_plan(log_dirs, on_dirs, {(1, "/a")}, {"t": "pool", "u": "pool"})
    # /b has 600 free, /c 500, /d is cordoned: 500 -> /b (100 left), 300 -> /c (200 left), 100 -> /c.
    assert plan.moves[["topic", "partition", "broker_id", "source_dir", "target_dir"]].values.tolist() == [
        ["t", 0, 1, "/a", "/b"], ["t", 1, 1, "/a", "/c"], ["t", 2, 1, "/a", "/c"]]
    assert set(plan.moves["broker_pool"]) == {"pool"} and plan.stranded == []
    tight = removal_plan(dirs((1, "/a", 1000, 900, False), (1, "/b", 1000, 800, False)),
                         replicas(("t", 0, 1, "/a", 500)), {(1, "/a")}, {"t": "pool"})
    assert tight.moves.empty and tight.stranded == [
        "t-0 on broker 1 (500 bytes in /a): the most room in another log dir is 200 bytes (/b)"]
    document = json.loads(log_dir_document(plan.moves, {("t", 0): [2, 1], ("t", 1): [1], ("t", 2): [1, 3]}))
    assert document["partitions"][0] == {"topic": "t", "partition": 0, "replicas": [2, 1], "log_dirs": ["any", "/b"]}


def test_an_unknown_directory_names_the_brokers_directories_and_the_request_checks_its_form() -> None:
    with pytest.raises(RequestError, match=r"2:/x is not a log dir of broker 2 \(its log dirs: /a, /b\)"):
        removal_plan(dirs((2, "/a", 1000, 0, False), (2, "/b", 1000, 0, False)), replicas(), {(2, "/x")}, {})
    with pytest.raises(RequestError, match=r"names every log dir of broker 2, whose replicas would have nowhere"):
        removal_plan(dirs((2, "/a", 1000, 0, False), (2, "/b", 1000, 0, False)), replicas(), {(2, "/a"), (2, "/b")},
                     {})
    from kafka_rebalancer.config import RebalancerConfig

    config = RebalancerConfig.model_validate({"cluster": {"name": "c"}, "pools": {"p": {"brokers": [1, 2]}}})
    with pytest.raises(RequestError, match=r"'log_dirs': 'b:/a': expected broker:path"):
        make_request(config, action="remove-disks", log_dirs=["b:/a"], reason="disk")
    request = make_request(config, action="remove-disks", log_dirs=["2:/a", "1:/b"], reason="disk")
    assert request.scope.removed_log_dirs == {(2, "/a"), (1, "/b")} and request.scope.pools == frozenset()


def test_the_promise_holds_when_the_removed_directory_is_empty_and_excuses_what_the_plan_could_not_move() -> None:
    from kafka_rebalancer.config import RebalancerConfig

    config = RebalancerConfig.model_validate({"cluster": {"name": "c"}, "pools": {"p": {"brokers": [1, 2]}}})
    request = make_request(config, action="remove-disks", log_dirs=["1:/a", "2:/a"], reason="disk")
    after = replicas(("t", 0, 1, "/b", 5), ("t", 1, 1, "/a", 5), ("t", 2, 1, "/a", 5))
    rows = log_dir_promises(request, after, [("t", 1, 1), ("t", 0, 1)])
    verdicts = {(r.broker_id, r.partition if pd.notna(r.partition) else None): r.verdict for r in rows.itertuples()}
    assert verdicts == {(1, 1): "broken", (1, 2): "cannot", (2, None): "kept"}


def test_a_brokers_directories_are_balanced_inside_it_leaving_its_leaving_replicas_and_other_brokers_alone() -> None:
    log_dirs = dirs((1, "/a", 1000, 700, False), (1, "/b", 1000, 100, False),
                    (2, "/a", 1000, 700, False), (2, "/b", 1000, 100, False),  # broker 2 is not planned
                    (3, "/a", 1000, 700, False), (3, "/b", 1000, 100, True))  # a cordoned dir: left alone
    on_dirs = replicas(("t", 0, 1, "/a", 400), ("t", 1, 1, "/a", 200), ("t", 2, 1, "/a", 100), ("t", 3, 1, "/b", 100),
                       ("t", 0, 2, "/a", 700), ("t", 0, 3, "/a", 700))
    plan = balance_plan(log_dirs, on_dirs, [1, 3], 1.10, 0.9, leaving=[("t", 0, 1)], topic_pool={"t": "p"})
    # Broker 1 without t-0, which leaves it: /a 300, /b 100, mean 20 %, band [18, 22] %, target [18.2, 21.8] %:
    # /a may give 118 bytes and /b take 118: t-2 (100), not t-1 (200). Both end at 20 %.
    assert plan.moves[["partition", "broker_id", "source_dir", "target_dir"]].values.tolist() == [
        [2, 1, "/a", "/b"]]
    assert balance_plan(log_dirs, on_dirs, [1], 3.0, 0.9, leaving=[], topic_pool={}).moves.empty  # within ±200 %


def test_the_validation_checks_each_move_between_directories_against_the_snapshot() -> None:
    from kafka_rebalancer.model.reassignment import Reassignment
    from kafka_rebalancer.model.schemas import LOG_DIR_MOVES
    from kafka_rebalancer.snapshot.build import SnapshotTables
    from kafka_rebalancer.validate.log_dir_checks import log_dir_check_rows

    snapshot = SnapshotTables(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), [],
                              dirs((1, "/a", 1000, 600, False), (1, "/b", 1000, 500, False), (1, "/c", 1000, 0, True),
                                   (1, "/d", 1000, 0, False)),
                              replicas(("t", 0, 1, "/a", 400), ("t", 1, 1, "/a", 100), ("t", 2, 1, "/a", 100),
                                       ("t", 3, 1, "/b", 10)))
    moves = pd.DataFrame([("p", "t", 0, 1, "/a", "/b", 700), ("p", "t", 1, 1, "/b", "/d", 100),
                          ("p", "t", 2, 1, "/a", "/c", 100), ("p", "t", 3, 1, "/b", "/d", 10)],
                         columns=LOG_DIR_MOVES.names)
    rows = log_dir_check_rows(snapshot, moves, [Reassignment("t", 3, [2, 3])], frozenset({(1, "/a")}))
    facts = {int(r.partition): (r.source_matches_snapshot, r.stays_on_broker, r.target_takes_replicas, r.target_fits)
             for r in rows.itertuples()}
    assert facts == {0: (True, True, True, False),  # /b: 500 + 700 - 100 - 10 = 1090 of 1000
                     1: (False, True, True, True),  # t-1 is in /a, not /b
                     2: (True, True, False, True),  # /c is cordoned
                     3: (True, False, True, True)}  # t-3 leaves broker 1 in plan.json


def test_directory_bands_are_per_broker_and_skip_single_or_unknown_directories() -> None:
    from kafka_rebalancer.plan.log_dir_plan import directory_bands

    bands = directory_bands(dirs((1, "/a", 1000, 700, False), (1, "/b", 1000, 100, False), (2, "/a", 1000, 900, False),
                                 (3, "/a", None, 5, False), (3, "/b", 1000, 5, False)), 1.10)
    assert bands[["broker_id", "log_dir", "inside"]].values.tolist() == [[1, "/a", False], [1, "/b", False]]
    assert bands["lower"].round(3).tolist() == [0.36, 0.36] and bands["upper"].round(3).tolist() == [0.44, 0.44]


def test_an_arriving_replica_gets_the_directory_lowest_in_use_after_it_never_a_cordoned_one() -> None:
    from kafka_rebalancer.plan.log_dir_plan import arrival_dirs

    # Broker 1: /small (1,000) holds one large replica, /large (3,000) many small ones: Kafka alone would pick
    # /small (fewer partitions). Broker 2: one of its two dirs cordoned, so nothing to choose. Broker 3: a dir of
    # unknown capacity: the most room (the volume's usable 5,000, plus what leaves).
    log_dirs = dirs((1, "/small", 1000, 300, False), (1, "/large", 3000, 400, False), (2, "/a", 1000, 0, False),
                    (2, "/b", 1000, 0, True), (3, "/a", None, 100, False), (3, "/b", 9000, 8000, False))
    on_dirs = replicas(("s", 0, 1, "/small", 300), *(("m", p, 1, "/large", 100) for p in range(4)),
                       ("m", 9, 3, "/a", 100), ("m", 8, 3, "/b", 8000))
    arriving = [("t", 0, 1, 200), ("t", 1, 1, 600), ("t", 2, 1, 100), ("t", 0, 2, 200), ("t", 0, 3, 50)]
    targets = arrival_dirs(log_dirs, on_dirs, arriving, leaving=[("s", 0, 1)])
    # Largest first: 600 -> /large (1,000/3,000 = 0.33 against /small's 600/1,000, s-0 leaving); 200 -> /small
    # (0.2 against 0.4); 100 -> /small (0.3 against 0.37).
    assert targets == {("t", 1, 1): "/large", ("t", 0, 1): "/small", ("t", 2, 1): "/small", ("t", 0, 3): "/a"}
    assert arrival_dirs(log_dirs, on_dirs, arriving, leaving=[], removed=[(1, "/large")]).get(("t", 1, 1)) is None
    assert arrival_dirs(None, None, arriving, leaving=[]) == {}
    # The balance of broker 1's directories counts what arrives where: 1,000 landing on /large puts it above.
    landing = balance_plan(dirs((1, "/a", 1000, 500, False), (1, "/b", 1000, 500, False)),
                           replicas(("t", 0, 1, "/a", 500), ("t", 1, 1, "/b", 400), ("t", 2, 1, "/b", 100)), [1],
                           1.1, 0.9, leaving=[], topic_pool={}, arriving={(1, "/b"): 400})
    assert landing.moves[["partition", "source_dir", "target_dir"]].values.tolist() == [[2, "/b", "/a"]]


def test_plan_json_names_the_arrivals_directories_the_validation_checks_them_and_a_bad_field_is_refused() -> None:
    from kafka_rebalancer.errors import ConfigError
    from kafka_rebalancer.model.reassignment import dumps, parse_reassignment, reassignment_document
    from kafka_rebalancer.snapshot.build import SnapshotTables
    from kafka_rebalancer.validate.log_dir_checks import arrival_check_rows

    changes = pd.DataFrame({"topic": ["t", "t"], "partition": [0, 1], "old_replicas": [[1, 2], [2, 3]],
                            "new_replicas": [[3, 2], [2, 1]]})
    text = dumps(reassignment_document(changes, log_dirs={("t", 0, 3): "/b", ("t", 1, 1): "/c"}))
    plan = parse_reassignment(text, "plan.json")
    assert json.loads(text)["partitions"][0] == {"topic": "t", "partition": 0, "replicas": [3, 2],
                                                  "log_dirs": ["/b", "any"]}
    assert [e.target_dirs() for e in plan] == [{3: "/b"}, {1: "/c"}]
    assert "log_dirs" not in dumps(reassignment_document(changes))
    rollback = parse_reassignment(dumps(reassignment_document(changes, "old_replicas")), "rollback.json")
    snapshot = SnapshotTables(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), [],
                              dirs((3, "/a", 1000, 0, False), (3, "/b", 1000, 0, False), (1, "/c", 1000, 0, True),
                                   (1, "/d", 1000, 0, False)), replicas())
    rows = arrival_check_rows(snapshot, plan, rollback, frozenset())
    assert rows[["partition", "arrives", "target_takes_replicas"]].values.tolist() == [[0, True, True],
                                                                                       [1, True, False]]
    staying = parse_reassignment('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2],'
                                 ' "log_dirs": ["any", "/b"]}]}', "plan.json")
    assert arrival_check_rows(snapshot, staying, rollback, frozenset())["arrives"].tolist() == [False]
    for bad in ('["/b"]', '["b", "any"]', '"/b"', '[1, "any"]'):
        with pytest.raises(ConfigError, match=r"plan.json.*partitions\[0\]\.log_dirs.*one absolute path or \"any\""):
            parse_reassignment('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2],'
                               f' "log_dirs": {bad}}}]}}', "plan.json")
