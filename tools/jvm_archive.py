"""A class-data archive for the plan job's driver JVM (Java's AppCDS), built once per Java and Spark install.

    python -m tools.jvm_archive [--archive PATH] [--force]

PATH defaults to $KAFKA_REBALANCER_JVM_ARCHIVE, else .cache/jvm/plan-driver.jsa. Nothing happens when the archive
there was built for the same Java, Spark jars and plan JVM options (its key, in PATH.key, says so).

Why: the plan job is a batch job that starts a fresh JVM every night, and a cold JVM spends seconds loading and
verifying Spark's classes from jars before any data moves (a warm JVM planned the medium benchmark in half the
time). A training run plans a small generated cluster in a JVM started with -XX:ArchiveClassesAtExit; at exit
the JVM writes the classes it loaded to the archive, and the plan job's driver maps them from it instead
(`kafka_rebalancer.spark_settings`). The archive is written atomically and checked before it is put in place by
starting a JVM that must use it (-Xshare:on fails if it cannot). A JVM given an archive that does not match its
build or class path warns and starts without it: a stale archive costs speed, never a plan.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafka_rebalancer.spark_settings import JVM_ARCHIVE_ENV, PLAN_JVM_OPTIONS

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ARCHIVE = REPO / ".cache" / "jvm" / "plan-driver.jsa"
SPARK_LOG_CONFIG = REPO / "spark" / "conf" / "log4j2.properties"
# Dumping warns about every class it cannot archive (generated code, signed jars): thousands of lines of noise.
QUIET_DUMP = "-Xlog:cds=off -Xlog:cds+dynamic=off"
TIMEOUT_S = 600


def _java() -> str:
    """The java that spark-submit starts (spark-class: $JAVA_HOME/bin/java, else java on the PATH)."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")


def archive_key() -> str:
    """What the archive is valid for: the JVM build, Spark's jars and the plan job's JVM options."""
    import pyspark

    version = subprocess.run([_java(), "-version"], capture_output=True, text=True, check=True).stderr
    jars = sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    return hashlib.sha256("\n".join([version, pyspark.__version__, PLAN_JVM_OPTIONS, *jars]).encode()).hexdigest()


def _session(java_options: str, jvm_archive: str) -> object:
    from pyspark.sql import SparkSession

    from kafka_rebalancer.spark_settings import plan_spark_conf

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    options = f"{java_options} -Dlog4j2.configurationFile={SPARK_LOG_CONFIG}"
    return (SparkSession.builder.master("local[2]").appName("kafka-rebalancer-jvm-archive")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config(map=plan_spark_conf(options, jvm_archive=jvm_archive)).getOrCreate())


def _stop_and_wait_for_jvm(spark: object) -> None:
    """Stop Spark and wait for the JVM to exit: it writes the archive on its way out."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()  # type: ignore[attr-defined]
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        proc.stdin.close()  # the JVM exits when its stdin closes (pyspark's gateway protocol)
        proc.wait(timeout=TIMEOUT_S)


def train(config_path: Path, run_dir: Path, dump: Path) -> None:
    """Plan a cluster in a JVM that writes the classes it loaded to `dump` when it exits."""
    from kafka_rebalancer.config import load_config
    from kafka_rebalancer.plan.job import run_plan
    from kafka_rebalancer.run_folder import RunFolder

    spark = _session(f"-XX:ArchiveClassesAtExit={dump} {QUIET_DUMP}", jvm_archive="")
    spark.sparkContext.setLogLevel("ERROR")  # type: ignore[attr-defined]
    run_plan(spark, load_config(config_path), RunFolder(run_dir))  # type: ignore[arg-type]
    _stop_and_wait_for_jvm(spark)


def verify(archive: Path) -> None:
    """Start the plan job's driver JVM on the archive with -Xshare:on, which fails unless the archive is used."""
    spark = _session("-Xshare:on", jvm_archive=str(archive))
    assert spark.range(3).count() == 3  # type: ignore[attr-defined]
    _stop_and_wait_for_jvm(spark)


def check(archive: Path) -> None:
    """Raise unless the plan job's driver JVM can start from the archive (a JVM of its own, in a child process)."""
    _child("verify", str(archive))


def _child(*args: str) -> None:
    """Run this module in a child process (each needs a JVM of its own); its output goes to ours."""
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    result = subprocess.run([sys.executable, "-m", "tools.jvm_archive", *args], cwd=REPO, env=env, timeout=TIMEOUT_S)
    if result.returncode != 0:
        raise RuntimeError(f"tools.jvm_archive {args[0]} failed (exit {result.returncode}); see the output above")


def build(archive: Path) -> None:
    """Train, check and put the archive (and its key) in place; a failure leaves the old archive as it was."""
    from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate, write_cluster

    started = time.monotonic()
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jvm-archive-", dir=archive.parent) as tmp:
        # Every kind of partition the planner meets (dead broker, scale-out, out-of-pool, under-replicated).
        tables, body = generate(SyntheticSpec(
            n_brokers=12, n_racks=3, n_pools=2, n_partitions=2000, partitions_per_topic=50, hot_brokers_per_pool=1,
            hot_weight=2.0, leader_skew=0.2, empty_brokers_per_pool=1, under_replicated_fraction=0.01,
            out_of_pool_fraction=0.005, dead_broker=True, seed=7))
        config_path, run = write_cluster(Path(tmp) / "cluster", tables, body)
        dump = Path(tmp) / "plan-driver.jsa"
        print("jvm archive: planning a generated cluster to record the classes the plan job loads ...", flush=True)
        _child("train", str(config_path), str(run.path), str(dump))
        if not dump.is_file():
            raise RuntimeError(f"the training JVM wrote no archive at {dump}")
        print("jvm archive: checking that a JVM can start from it ...", flush=True)
        check(dump)
        key = _key_file(archive)
        key.unlink(missing_ok=True)  # no key: the archive is rebuilt next time if we stop between the two renames
        dump.replace(archive)
        key.write_text(archive_key() + "\n")
    print(f"jvm archive: {archive} ({archive.stat().st_size / 2**20:.0f} MB) in {time.monotonic() - started:.0f}s",
          flush=True)


def _key_file(archive: Path) -> Path:
    return archive.with_name(archive.name + ".key")


def up_to_date(archive: Path) -> bool:
    """The archive is there and was built for this Java, these Spark jars and the plan job's JVM options."""
    key = _key_file(archive)
    return archive.is_file() and key.is_file() and key.read_text().strip() == archive_key()


def ensure(archive: Path, force: bool = False) -> bool:
    """Build the archive unless it is up to date; True when it was built."""
    if not force and up_to_date(archive):
        print(f"jvm archive: {archive} is up to date")
        return False
    build(archive)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step")
    parser.add_argument("--archive", type=Path, default=Path(os.environ.get(JVM_ARCHIVE_ENV) or DEFAULT_ARCHIVE))
    parser.add_argument("--force", action="store_true", help="rebuild even if the archive is up to date")
    training = sub.add_parser("train", help="(internal) plan a cluster in a JVM that dumps its classes at exit")
    for name in ("config", "run_dir", "dump"):
        training.add_argument(name, type=Path)
    sub.add_parser("verify", help="(internal) start a JVM that must use the archive").add_argument("dump", type=Path)
    args = parser.parse_args(argv)
    if args.step == "train":
        train(args.config, args.run_dir, args.dump)
    elif args.step == "verify":
        verify(args.dump)
    else:
        ensure(args.archive.resolve(), args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
