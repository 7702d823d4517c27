"""The plan job's class-data archive (tools/jvm_archive.py): built from a training plan, checked by a JVM that must
start from it, kept while up to date, and used by the plan job's driver only.

The training and the checks need JVMs of their own (a JVM writes the archive when it exits), so these tests start
them in child processes instead of using the session's SparkSession."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kafka_rebalancer.spark_settings import JVM_ARCHIVE_ENV, PLAN_JVM_OPTIONS, plan_spark_conf
from tools.jvm_archive import DEFAULT_ARCHIVE, archive_key, check, ensure, up_to_date


def test_the_driver_starts_from_an_existing_archive_and_executors_never(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "plan-driver.jsa"
    monkeypatch.setenv(JVM_ARCHIVE_ENV, str(archive))
    # Missing: no option at all (a JVM given a missing archive starts without Java's own class-data archive too).
    assert "SharedArchiveFile" not in str(plan_spark_conf())
    archive.write_bytes(b"an archive")
    conf = plan_spark_conf("-Dsome.option=1")
    assert conf["spark.driver.extraJavaOptions"].split() == [
        PLAN_JVM_OPTIONS, "-Dsome.option=1", f"-XX:SharedArchiveFile={archive}"]
    assert conf["spark.executor.extraJavaOptions"].split() == [PLAN_JVM_OPTIONS, "-Dsome.option=1"]
    assert "SharedArchiveFile" not in plan_spark_conf(jvm_archive="")["spark.driver.extraJavaOptions"]


def test_the_archive_is_built_checked_and_kept_while_up_to_date(tmp_path: Path) -> None:
    # The plan job's own archive: `make test` builds it with `ensure` before the suite starts (a run of pytest
    # alone builds it here), so the suite does not train a second one (a minute and a half on two cores).
    archive = Path(os.environ.get(JVM_ARCHIVE_ENV) or DEFAULT_ARCHIVE)
    ensure(archive)
    key = archive.with_name(archive.name + ".key")
    assert archive.stat().st_size > 10 * 2**20 and key.read_text().strip() == archive_key()
    assert not [p.name for p in archive.parent.iterdir() if p.name.startswith("jvm-archive-")]  # no leftovers
    assert ensure(archive) is False and up_to_date(archive)
    check(archive)  # a JVM that must start from it (-Xshare:on) does
    # Built for another Java: `make` would rebuild it (a copy: the suite's archive stays as it is).
    stale = tmp_path / archive.name
    shutil.copyfile(archive, stale)
    stale.with_name(stale.name + ".key").write_text("built for another Java\n")
    assert not up_to_date(stale)


def test_the_check_fails_on_an_archive_the_jvm_cannot_use(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsa"
    broken.write_bytes(b"\0" * 4096)
    with pytest.raises(RuntimeError, match="verify failed"):
        check(broken)
