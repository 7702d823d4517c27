"""JBOD in the review of a run: `show` and the report list each directory of a broker with moves between its log
directories (capacity and its source, use before and after the moves), the moves and the stranded replicas, and
the timeline marks the executor's log-dir steps; a run without such moves shows as it did."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
from rich.console import Console

from kafka_rebalancer.cli.tables import show_run
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.schemas import LOG_DIR_MOVES, LOG_DIRS, REPLICA_LOG_DIRS
from kafka_rebalancer.report.run_report import collect
from kafka_rebalancer.run_folder import PLAN, RunFolder, write_json, write_table
from kafka_rebalancer.snapshot import write_snapshot
from kafka_rebalancer.snapshot.build import SnapshotTables
from tests.unit.test_run_report import SMALL, make_cluster, replica_moves, report_of, section, write_plan

MIB = 2**20
STRANDED = "t-3 on broker {b} (943,718,400 bytes in /data/d1): the most room in another log dir is 10 bytes (/data/d2)"


def jbod_run(tmp_path: Path, snapshot_dirs: bool = True) -> tuple[RebalancerConfig, SnapshotTables, RunFolder,
                                                                    list[int]]:
    """A run whose snapshot has two log dirs on three brokers (the third with no moves), and its plan (replica
    moves between brokers as the report tests build them); returns the brokers with log dirs."""
    config, tables, run = make_cluster(tmp_path, SMALL, "manual__2026-11-27T10_00_00_00_00", snapshot=False)
    brokers = sorted(int(b) for b in tables.brokers["broker_id"])[:3]
    a, b, c = brokers
    dirs = pd.DataFrame([
        (a, "/data/d1", 1000 * MIB, "capacity file", 600 * MIB, False),
        (a, "/data/d2", 1000 * MIB, "capacity file", 100 * MIB, False),
        (b, "/data/d1", 2000 * MIB, "volume", 500 * MIB, False),
        (b, "/data/d2", None, "unknown", 0, True),
        (c, "/data/d1", 1000 * MIB, "volume", 10 * MIB, False),
        (c, "/data/d2", 1000 * MIB, "volume", 20 * MIB, False)],
        columns=["broker_id", "log_dir", "capacity_bytes", "capacity_source", "used_bytes", "cordoned"])
    dirs = dirs.assign(capacity_bytes=dirs["capacity_bytes"].astype("Int64"), volume_total_bytes=5000 * MIB,
                       volume_usable_bytes=4000 * MIB, offline=False)[LOG_DIRS.names]
    on_dirs = tables.replicas.loc[tables.replicas["broker_id"].isin(brokers), ["topic", "partition", "broker_id"]]
    on_dirs = on_dirs.assign(log_dir="/data/d1", size_bytes=1, future_log_dir=None)[REPLICA_LOG_DIRS.names]
    snapshot = replace(tables, log_dirs=dirs, replica_log_dirs=on_dirs) if snapshot_dirs else tables
    write_snapshot(run, snapshot, {"cluster": config.cluster.name})
    write_plan(run, config, tables, replica_moves(tables, 6))
    return config, tables, run, brokers


def add_log_dir_moves(run: RunFolder, moves: pd.DataFrame, facts: dict) -> None:
    """The plan stage again, with the log-dir moves and the summary's log_dir_moves as the plan job writes them."""
    plan_dir = run.stage_path(PLAN)
    files = {p.name: p.read_bytes() for p in plan_dir.iterdir() if p.is_file() and p.name != "files.json"}
    summary = json.loads(files.pop("summary.json"))
    with run.stage(PLAN) as out:
        for name, data in files.items():
            (out / name).write_bytes(data)
        write_table(out, LOG_DIR_MOVES, moves)
        write_json(out / "summary.json", {**summary, "log_dir_moves": facts})


def log_dir_moves(a: int, b: int) -> pd.DataFrame:
    """Broker a: 150 MiB from /data/d1 to /data/d2 in two moves; broker b: 40 MiB to its cordoned dir."""
    return pd.DataFrame([("pool-0", "t", 0, a, "/data/d1", "/data/d2", 100 * MIB),
                         ("pool-0", "t", 1, a, "/data/d1", "/data/d2", 50 * MIB),
                         (None, "u", 7, b, "/data/d1", "/data/d2", 40 * MIB)], columns=LOG_DIR_MOVES.names)


def remove_disks(run: RunFolder, a: int, b: int) -> None:
    add_log_dir_moves(run, log_dir_moves(a, b), {
        "why": "remove-disks", "removed": [f"{a}:/data/d1"], "moves": 3, "bytes": 190 * MIB,
        "stranded": [STRANDED.format(b=a)]})


def show_text(run: RunFolder) -> str:
    out = io.StringIO()
    show_run(Console(file=out, width=300), run)
    return out.getvalue()


def rows_of(html_table_part: str) -> list[str]:
    return html_table_part.split("<tr>")[1:]


def test_show_lists_each_directory_before_and_after_the_moves_and_the_stranded_replicas(tmp_path: Path) -> None:
    _, _, run, (a, b, c) = jbod_run(tmp_path)
    remove_disks(run, a, b)
    text = show_text(run)
    assert f"log dir moves (remove-disks): 3 replicas between the log dirs of their broker, 190.0 MiB; removed " \
           f"{a}:/data/d1" in text
    assert f"broker {a} log dirs: 2 replica move(s), 150.0 MiB" in text
    assert f"broker {b} log dirs: 1 replica move(s), 40.0 MiB" in text
    lines = text.splitlines()
    a_dirs = lines[next(i for i, line in enumerate(lines) if f"broker {a} log dirs" in line):]
    d1 = next(line for line in a_dirs if line.lstrip().startswith("/data/d1"))
    d2 = next(line for line in a_dirs if line.lstrip().startswith("/data/d2"))
    assert "1000.0 MiB (capacity file)" in d1 and "600.0 MiB -> 450.0 MiB" in d1 and "60.0% -> 45.0%" in d1
    assert "removed" in d1 and "-2 +0" in d1
    assert "100.0 MiB -> 250.0 MiB" in d2 and "10.0% -> 25.0%" in d2 and "-0 +2" in d2
    # Broker b's second dir: capacity unknown, cordoned; its use still counted.
    b_d2 = next(line for line in lines[next(i for i, line in enumerate(lines) if f"broker {b} log dirs" in line):]
                if line.lstrip().startswith("/data/d2"))
    assert "- (unknown)" in b_d2 and "0 B -> 40.0 MiB" in b_d2 and "- -> -" in b_d2 and "cordoned" in b_d2
    assert f"broker {c} log dirs" not in text  # no moves on it
    assert "stranded: 1 replica(s) stay in a removed log dir" in text and STRANDED.format(b=a) in text


def test_the_report_has_a_log_directories_section_with_the_table_the_moves_and_the_stranded(tmp_path: Path) -> None:
    _, _, run, (a, b, c) = jbod_run(tmp_path)
    remove_disks(run, a, b)
    data = collect(run)
    assert data.log_dirs is not None and not data.unreadable
    by_dir = {(u.broker_id, u.log_dir): u for u in data.log_dirs.directories}
    assert set(by_dir) == {(a, "/data/d1"), (a, "/data/d2"), (b, "/data/d1"), (b, "/data/d2")}
    d1 = by_dir[(a, "/data/d1")]
    assert (d1.used_before, d1.used_after, d1.state) == (600 * MIB, 450 * MIB, "removed")
    assert (d1.usage(d1.used_before), d1.usage(d1.used_after)) == (0.6, 0.45)

    page = report_of(run)
    part = section(page, "log-dirs")
    assert 'href="#section-log-dirs"' in page
    assert "3 replica(s) move between the log directories of their broker, 190.0 MiB (remove-disks)" in part
    assert f"Removed: {a}:/data/d1." in part
    row = next(r for r in rows_of(part) if f">{a}</td><td>/data/d1</td>" in r)
    for cell in ("1000.0 MiB", "capacity file", "600.0 MiB", "450.0 MiB", "60.0%", "45.0%", "removed"):
        assert f">{cell}</td>" in row, cell
    row = next(r for r in rows_of(part) if f">{a}</td><td>/data/d2</td>" in r)
    assert ">100.0 MiB</td>" in row and ">250.0 MiB</td>" in row and ">25.0%</td>" in row
    assert f">{c}</td><td>/data/d1</td>" not in part
    # The moves, largest first: partition, broker, from, to, bytes.
    moves = [r for r in rows_of(part) if "<td>t-0</td>" in r or "<td>t-1</td>" in r or "<td>u-7</td>" in r]
    assert [m.split("</td>")[1] for m in moves] == ["<td>t-0", "<td>t-1", "<td>u-7"]
    assert f"<td>u-7</td><td class=\"num\" data-value=\"{float(b)!r}\">{b}</td><td>/data/d1</td>" \
           "<td>/data/d2</td>" in part
    assert "Stranded: 1 replica(s) stay in a removed directory" in part and "943,718,400 bytes in /data/d1" in part


def test_the_timeline_marks_the_executors_log_dir_steps(tmp_path: Path) -> None:
    _, _, run, (a, b, _) = jbod_run(tmp_path)
    remove_disks(run, a, b)
    move = {"topic": "t", "partition": 0, "broker": a, "source_dir": "/data/d1", "target_dir": "/data/d2",
            "bytes": 100 * MIB}
    log = [{"action": "execute_started", "moves": 0},
           {"action": "log_dirs_cordoned", "cordoned": {str(a): "/data/d1"}},
           {"action": "log_dir_throttle_set", "brokers": [a], "rate_bytes_per_s": 1000},
           {"action": "log_dir_started", **move}, {"action": "log_dir_reissued", **move},
           {"action": "log_dir_completed", **move},
           {"action": "log_dir_skipped", **move, "partition": 1, "reason": f"no replica on broker {a}"},
           {"action": "log_dir_throttle_cleared", "brokers": [a], "rate_bytes_per_s": None},
           {"action": "execute_finished"}]
    folder = run.stage_path("execute/pool-0")
    folder.mkdir(parents=True)
    (folder / "execution_log.jsonl").write_text("".join(
        json.dumps({"ts": f"2026-11-27T10:0{i}:00.000+00:00", "pool": "pool-0", "plan_hash": "h", **e}) + "\n"
        for i, e in enumerate(log)))
    data = collect(run)
    assert data.executions is not None
    markers = [(m.group, m.label) for m in data.executions[0].markers]
    assert ("log dir", f"log_dir_completed t-0 (broker={a}, source_dir=/data/d1, target_dir=/data/d2)") in markers
    assert [g for g, label in markers if label.startswith("log_dir")] == [
        "log dir", "throttle", "log dir", "log dir", "log dir", "skip", "throttle"]
    timeline = section(report_of(run), "execution")
    assert '\\"name\\":\\"log dir\\"' in timeline or '"name":"log dir"' in timeline
    assert "triangle-up" in timeline


def test_a_snapshot_without_log_dirs_still_shows_the_moves_and_the_stranded(tmp_path: Path) -> None:
    _, _, run, (a, b, _) = jbod_run(tmp_path, snapshot_dirs=False)
    remove_disks(run, a, b)
    text = show_text(run)
    assert "600.0 MiB" not in text and "- -> 450.0 MiB" not in text and "(not in the snapshot)" in text
    assert "use before unknown" in text and STRANDED.format(b=a) in text
    part = section(report_of(run), "log-dirs")
    assert "use before is unknown" in part and "<td>t-0</td>" in part and "Stranded: 1 replica(s)" in part


def test_a_broken_log_dir_moves_table_is_named_and_the_rest_still_reported(tmp_path: Path) -> None:
    _, _, run, (a, b, _) = jbod_run(tmp_path)
    remove_disks(run, a, b)
    plan_dir = run.stage_path(PLAN)
    files = {p.name: p.read_bytes() for p in plan_dir.iterdir() if p.is_file() and p.name != "files.json"}
    with run.stage(PLAN) as out:  # the table cut short, its record matching: as a bad copy of a run leaves it
        for name, data in files.items():
            (out / name).write_bytes(data[:40] if name == f"{LOG_DIR_MOVES.name}.parquet" else data)
    page = report_of(run)
    assert "could not read this part of the run" in section(page, "log-dirs")
    assert "could not read" not in section(page, "moves") and 'id="moves"' in section(page, "moves")
    assert "log dir moves: could not read them: RunFolderError" in show_text(run)


def test_a_run_with_log_dirs_but_no_moves_between_them_shows_as_before(tmp_path: Path) -> None:
    _, _, run, _ = jbod_run(tmp_path / "jbod")
    data = collect(run)
    assert data.log_dirs is None and not data.unreadable
    page = report_of(run)
    assert "section-log-dirs" not in page and "Log directories" not in page
    # The same run without log dirs in its snapshot shows the same, its folder, plan hash and snapshot aside.
    _, _, plain, _ = jbod_run(tmp_path / "plain", snapshot_dirs=False)
    shown = show_text(run).splitlines()[2:]
    assert shown == show_text(plain).splitlines()[2:] and not [line for line in shown if "log dir" in line]
    after_snapshot = (lambda p: p.split('<section id="section-usage">', 1)[1])  # noqa: E731
    assert after_snapshot(report_of(plain)) == after_snapshot(page)


def test_replicas_arriving_into_named_directories_are_counted_per_directory(tmp_path: Path) -> None:
    from kafka_rebalancer.model.reassignment import dumps
    from kafka_rebalancer.model.schemas import PARTITION_CHANGES
    from kafka_rebalancer.run_folder import read_table

    _, _, run, _ = jbod_run(tmp_path)
    plan_dir = run.stage_path(PLAN)
    changes = read_table(plan_dir, PARTITION_CHANGES)
    first = changes.iloc[0]
    arriving = sorted(set(first["new_replicas"]) - set(first["old_replicas"]))[0]
    document = json.loads((plan_dir / "plan.json").read_text())
    entry = next(e for e in document["partitions"] if (e["topic"], e["partition"]) == (first["topic"],
                                                                                       first["partition"]))
    entry["log_dirs"] = ["/data/d2" if b == arriving else "any" for b in entry["replicas"]]
    files = {p.name: p.read_bytes() for p in plan_dir.iterdir() if p.is_file() and p.name != "files.json"}
    summary = json.loads(files.pop("summary.json"))
    files["plan.json"] = dumps(document).encode()
    with run.stage(PLAN) as out:
        for name, data in files.items():
            (out / name).write_bytes(data)
        write_json(out / "summary.json", {**summary, "arrival_log_dirs": 1})
    data = collect(run)
    assert data.log_dirs is not None and not data.unreadable, data.unreadable
    assert (data.log_dirs.arrivals_total, data.log_dirs.arrival_bytes_total) == (1, int(first["size_bytes"]))
    row = next(u for u in data.log_dirs.directories if (u.broker_id, u.log_dir) == (arriving, "/data/d2"))
    assert (row.arrivals, row.arrival_bytes) == (1, int(first["size_bytes"]))
    if row.used_before is not None:
        assert row.used_after == row.used_before + int(first["size_bytes"])
    assert "1 replica(s) arriving from other brokers go into the directory the plan names" in \
        section(report_of(run), "log-dirs")
    text = show_text(run)
    assert "1 arriving from other brokers into named log dirs" in text and "+1 arriving" in text
