"""interlace on a Spark standalone cluster on loopback: a master and two one-core workers.

One cluster per module (the ``cluster`` fixture starts it from the PySpark installation's
``spark-class`` and stops it, executors included, even on failure). Executors are separate
JVMs with their own Python workers, so this is the deployment the local-mode tests cannot
show: pickled operator functions, accumulator updates sent over the network, state stores and
shuffle files on executors that can die.

The driver of each test runs in a subprocess (this file run as a script, or the CLI), never in
the pytest process: only one SparkContext can live in a process, and the rest of the suite
keeps its session-scoped ``local[2]`` one. The tests:

* the join and window replays against their oracles, batch by batch, with exact counters;
* ``interlace demo --master spark://...``: its three DuckDB tables against the oracles;
* an executor JVM killed with SIGKILL in the middle of a micro-batch, while a downstream stage
  of the batch runs: Spark retries the lost task and re-executes the lost operator tasks
  (their shuffle output died with the executor), the standalone worker starts a new
  executor; the DuckDB target holds exactly the oracle's rows, once, and the operator
  counters equal the oracle's although the re-executed tasks reported theirs again.

Run with ``flock /tmp/spark.lock pytest tests/deploy/test_cluster.py -s`` to see what
happened (which tasks failed and which stages were re-run, rows and counters before/after).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import pickle
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
PYTHON = sys.executable
T0 = dt.datetime(2026, 1, 1)
SLOW_BATCH = 2  # the micro-batch whose executor gets killed
GATE_TIMEOUT_S = 120


# ------------------------------------------------------------------------------------------
# The cluster
# ------------------------------------------------------------------------------------------


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment of every process this module starts: loopback only, this interpreter."""
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(_spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "localhost",
        "PYSPARK_PYTHON": PYTHON,
        "PYSPARK_DRIVER_PYTHON": PYTHON,
        "PYTHONUNBUFFERED": "1",
    })
    # The tests' JVM flags (conftest.py) for the master and workers too; drivers and their
    # executors get them from PYSPARK_SUBMIT_ARGS.
    env["SPARK_DAEMON_JAVA_OPTS"] = os.environ.get("INTERLACE_TEST_JVM_OPTIONS", "")
    env.update(extra or {})
    return env


class Cluster:
    """A master and two one-core, 1 GiB workers, each a ``spark-class`` JVM."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        self.work_dirs: list[Path] = []

    def _launch(self, name: str, args: list[str], extra_env: dict[str, str]) -> None:
        log = self.root / f"{name}.log"
        self.logs.append(log)
        with log.open("wb") as fh:
            self.procs.append(subprocess.Popen(
                [str(_spark_home() / "bin" / "spark-class"), *args],
                stdout=fh, stderr=subprocess.STDOUT, env=_env(extra_env),
                cwd=self.root, start_new_session=True))

    def start(self) -> None:
        daemon = {"SPARK_DAEMON_MEMORY": "512m", "SPARK_NO_DAEMONIZE": "1"}
        self._launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                "--port", str(self.port), "--webui-port", "0"],
                     {**daemon, "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"})
        self._wait_for(self.logs[0], r"I have been elected leader", 1)
        for i in (1, 2):
            work = self.root / f"worker{i}"
            work.mkdir()
            self.work_dirs.append(work)
            self._launch(f"worker{i}", [
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                "--webui-port", "0", "--cores", "1", "--memory", "1g", "--work-dir", str(work),
                self.url], daemon)
        self._wait_for(self.logs[0], r"Registering worker 127\.0\.0\.1:\d+ with 1 cores", 2)

    def _wait_for(self, log: Path, pattern: str, count: int, timeout: float = 90) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = log.read_text(errors="replace") if log.exists() else ""
            if len(re.findall(pattern, text)) >= count:
                return
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                break
            time.sleep(0.3)
        tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                          for p in self.logs if p.exists())
        msg = f"cluster did not come up ({pattern!r} x{count}):\n{tails}"
        raise RuntimeError(msg)

    def executors(self, app_id: str) -> dict[str, int]:
        """Executor id -> pid of this app's CoarseGrainedExecutorBackend JVMs (a /proc scan).

        Only processes whose working directory is inside one of this cluster's worker
        directories (``WORK_DIR/APP_ID/EXECUTOR_ID``) count.
        """
        found = {}
        for pid, argv in _processes():
            if "org.apache.spark.executor.CoarseGrainedExecutorBackend" not in argv:
                continue
            if app_id not in argv:
                continue
            try:
                cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
            except OSError:
                continue
            if not any(w in cwd.parents for w in self.work_dirs):
                continue
            found[argv[argv.index("--executor-id") + 1]] = pid
        return found

    def stop(self) -> None:
        """Stop workers (they kill their executors), then the master; no JVM left behind."""
        for p in reversed(self.procs):
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.time() + 20
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.1, deadline - time.time()))
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        # Anything still running inside the worker folders (an executor or a Python daemon of
        # a killed executor) is ours: stop it by pid.
        for pid, _argv in _processes():
            try:
                cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
            except OSError:
                continue
            if any(w == cwd or w in cwd.parents for w in self.work_dirs):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _processes() -> list[tuple[int, list[str]]]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if raw:
            out.append((int(entry.name), raw.decode(errors="replace").rstrip("\0").split("\0")))
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def run_driver(mode: str, cluster: Cluster, workdir: Path, timeout: float = 240, **args: Any):
    """Run this file as the driver script (``mode``) against ``cluster``; return its output."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec = {"master": cluster.url, "workdir": str(workdir), **args}
    proc = subprocess.run([PYTHON, str(HERE), mode, json.dumps(spec)], env=_env(), cwd=workdir,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"driver {mode} failed:\n{proc.stderr[-8000:]}"
    with (workdir / "result.pickle").open("rb") as fh:
        return pickle.load(fh)  # noqa: S301 - written by our own driver


# ------------------------------------------------------------------------------------------
# Logs and oracles
# ------------------------------------------------------------------------------------------

JOIN_DDL = "id BIGINT, v STRING, ts TIMESTAMP"
WINDOW_DDL = "user STRING, amount BIGINT, page STRING, ts TIMESTAMP"


def at(sec: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=sec)


def join_log(seed: int = 5, n_batches: int = 5, per_side: int = 30, keys: int = 24):
    """Rows of many keys (so every key group and both executors get work), some late."""
    from interlace.testing.log import JoinBatch

    rnd = random.Random(seed)
    log = []
    for b in range(n_batches):
        def rows(tag: str, b: int = b):
            out = []
            for i in range(per_side):
                late = rnd.random() < 0.1 and b > 1
                sec = (b - 2) * 10 + rnd.randrange(5000) / 1000 if late else \
                    b * 10 + rnd.randrange(10_000) / 1000
                out.append({"id": rnd.randrange(keys), "v": f"{tag}{b}_{i}", "ts": at(sec)})
            return tuple(out)
        log.append(JoinBatch(left=rows("L"), right=rows("R")))
    log.append(JoinBatch(left=({"id": 10_000, "v": "SL", "ts": at(1000)},),
                         right=({"id": 10_000, "v": "SR", "ts": at(1000)},)))
    return log


def join_spec():
    from interlace import Join

    return Join(left_keys=["id"], right_keys=["id"], how="full", lower_ms=-3_000, upper_ms=4_000,
                event_time_column="ts", lateness_ms=2_000, late_data="dlq", key_groups=8)


def window_log(seed: int = 9, n_batches: int = 5, per_batch: int = 40):
    from interlace.testing.window_oracle import WindowBatch

    rnd = random.Random(seed)
    log = []
    for b in range(n_batches):
        rows = []
        for _ in range(per_batch):
            # Late rows: in windows emitted a batch or two before, after Spark's pre-filter
            # (the previous W ~ 10b - 32 s under reopen): the operator reopens or drops them.
            late = rnd.random() < 0.15 and b > 2
            sec = b * 10 - 31.5 + rnd.randrange(10_000) / 1000 if late else \
                b * 10 + rnd.randrange(10_000) / 1000
            rows.append({"user": f"u{rnd.randrange(12)}", "amount": rnd.randrange(100),
                         "page": f"/p{rnd.randrange(9)}", "ts": at(sec)})
        log.append(WindowBatch(rows=tuple(rows)))
    log.append(WindowBatch(rows=({"user": "zz", "amount": 0, "page": "-", "ts": at(1000)},)))
    return log


def window_specs():
    from interlace import Aggregation, Window

    aggs = [Aggregation(agg="count", as_="n"), Aggregation(agg="sum", column="amount", as_="s"),
            Aggregation(agg="count_distinct", column="page", mode="exact",
                        max_distinct_values_per_group=100, as_="pages")]
    common = {"event_time_column": "ts", "group_by": ["user"], "lateness_ms": 2_000,
              "max_groups_per_window": 100, "aggregations": aggs, "key_groups": 8}
    # Tumbling windows under late_data="reopen" run on the cluster in the demo test, with the
    # exact counters of the clicks too late even for reopen.
    return {
        "hopping-dlq": Window(kind="hopping", duration_ms=10_000, hop_ms=5_000, late_data="dlq",
                              **common),
    }


def names(ddl: str) -> list[str]:
    from interlace.pipeline import parse_ddl

    return [c for c, _ in parse_ddl(ddl)]


def join_counts_from_rows(rows, left_time: str = "left_ts", right_time: str = "right_ts"):
    """matches / unmatched_left / unmatched_right of join output rows (dead letters left out)."""
    from interlace.testing.oracle import DEAD_LETTER_COLUMN

    c: Counter[str] = Counter()
    for r in rows:
        if r.get(DEAD_LETTER_COLUMN) is not None:
            continue
        left, right = r.get(left_time) is not None, r.get(right_time) is not None
        c["matches" if left and right else "unmatched_left" if left else "unmatched_right"] += 1
    return dict(c)


def assert_per_batch(got_by_batch, want_rows_by_batch, label: str) -> None:
    from interlace.testing.oracle import canonical_rows

    for b in sorted(set(got_by_batch) | set(want_rows_by_batch)):
        assert canonical_rows(got_by_batch.get(b, [])) == canonical_rows(
            want_rows_by_batch.get(b, [])), f"{label}: batch {b}"


def read_event_log(events: Path) -> dict[str, Any]:
    """What Spark's event log says about failures: lost tasks, re-run stages, executors."""
    evs = []
    for f in sorted(p for p in events.iterdir() if p.is_file() and not p.name.startswith(".")):
        for line in f.read_text().splitlines():
            if line.strip():
                evs.append(json.loads(line))
    stage_batch: dict[int, str | None] = {}
    for e in evs:
        if e["Event"] == "SparkListenerJobStart":
            props = e.get("Properties") or {}
            for s in e.get("Stage IDs", []):
                stage_batch[s] = props.get("streaming.sql.batchId")

    def operator_stage(info: dict[str, Any]) -> bool:
        return any("InPandasWithState" in json.dumps(r) for r in info.get("RDD Info", []))

    failed, stages, ops = [], [], set()
    for e in evs:
        if e["Event"] == "SparkListenerStageSubmitted":
            info = e["Stage Info"]
            sid, att = info["Stage ID"], info["Stage Attempt ID"]
            if operator_stage(info):
                ops.add(sid)
            stages.append({"stage": sid, "attempt": att, "tasks": info["Number of Tasks"],
                           "batch": stage_batch.get(sid), "operator": operator_stage(info)})
        if e["Event"] == "SparkListenerTaskEnd":
            reason = e.get("Task End Reason") or {}
            if reason.get("Reason") not in (None, "Success"):
                ti = e["Task Info"]
                failed.append({"stage": e["Stage ID"], "stage_attempt": e["Stage Attempt ID"],
                               "partition": ti.get("Partition ID", ti["Index"]),
                               "task_attempt": ti["Attempt"], "executor": ti["Executor ID"],
                               "reason": reason["Reason"], "batch": stage_batch.get(e["Stage ID"])})
    counts = Counter(e["Event"] for e in evs)
    return {
        "failed_tasks": failed,
        "rerun_stages": [s for s in stages if s["attempt"] > 0],
        "operator_tasks_per_batch": _operator_tasks(evs, ops, stage_batch),
        "executors_added": counts["SparkListenerExecutorAdded"],
        "executors_removed": counts["SparkListenerExecutorRemoved"],
    }


def _operator_tasks(evs, ops, stage_batch) -> dict[str, int]:
    """Successful operator tasks per batch (more than the partitions: some ran twice)."""
    n: Counter[str] = Counter()
    for e in evs:
        if e["Event"] == "SparkListenerTaskEnd" and e["Stage ID"] in ops:
            if (e.get("Task End Reason") or {}).get("Reason") == "Success":
                n[str(stage_batch.get(e["Stage ID"]))] += 1
    return dict(n)


# ------------------------------------------------------------------------------------------
# 1. Replays against the oracles
# ------------------------------------------------------------------------------------------


def test_join_and_window_replays_on_the_cluster_match_the_oracles(cluster, tmp_path):
    from interlace.testing.log import JoinBatch
    from interlace.testing.oracle import oracle_join
    from interlace.testing.window_oracle import WindowBatch, oracle_window

    out = run_driver("replay", cluster, tmp_path / "replay")
    assert out["executors"] == 2, "both workers ran an executor"
    # Join: batch by batch, Spark's W per batch, and exact counters.
    log, spec = join_log(), join_spec()
    result, counters = out["join"]
    want = oracle_join(spec, result.scheduled(log, JoinBatch), left_columns=names(JOIN_DDL),
                       right_columns=names(JOIN_DDL))
    assert [b.watermark_ms for b in result.batches] == want.spark_watermarks_ms
    assert_per_batch(result.rows_by_batch(), want.rows_by_batch(), "join")
    for side in ("left", "right"):
        assert counters.get(f"late_dropped_{side}", 0) == want.late_dropped[side]
        assert counters.get(f"dead_lettered_{side}", 0) == want.dead_lettered[side]
    expected = join_counts_from_rows([o.row for o in want.rows])
    assert {k: counters.get(k, 0) for k in expected} == expected
    assert sum(want.dead_lettered.values()) > 0 and expected["matches"] > 0
    print(f"\n[cluster] join replay: {len(result.rows)} rows in {len(result.batches)} batches "
          f"= oracle; counters {json.dumps(counters, sort_keys=True)}")
    # Windows: hopping, late rows dead-lettered.
    wlog = window_log()
    for name, wspec in window_specs().items():
        result, counters = out[name]
        want = oracle_window(wspec, result.scheduled(wlog, WindowBatch), columns=names(WINDOW_DDL))
        assert [b.watermark_ms for b in result.batches] == want.spark_watermarks_ms
        exp: dict[int, list[dict[str, Any]]] = {}
        for o in want.rows:
            exp.setdefault(o.batch, []).append(o.row)
        assert_per_batch(result.rows_by_batch(), exp, name)
        assert counters.get("late_dropped", 0) == want.late_dropped
        assert counters.get("dead_lettered", 0) == want.dead_lettered
        emitted = sum(1 for o in want.rows if o.row.get("_dead_letter") is None)
        assert counters.get("windows_emitted", 0) == emitted
        assert want.dead_lettered > 0
        print(f"[cluster] window replay {name}: {len(result.rows)} rows = oracle; counters "
              f"{json.dumps(counters, sort_keys=True)}")


def _driver_replay(args: dict[str, Any]) -> dict[str, Any]:
    from interlace import stream_join, window_aggregate
    from interlace.metrics import counters
    from interlace.testing.replay import replay_streams

    spark = driver_session(args, "interlace-cluster-replay")
    wait_for_executors(spark, 2)
    root = Path(args["workdir"])
    out: dict[str, Any] = {"executors": len(executor_ids(spark))}
    schema = _schema(JOIN_DDL)
    log = join_log()
    acc = counters(spark)
    result = replay_streams(
        spark, {"left": (schema, [list(b.left) for b in log]),
                "right": (schema, [list(b.right) for b in log])},
        lambda f: stream_join(f["left"], f["right"], join_spec(), counters=acc),
        workdir=root / "join")
    out["join"] = (result, dict(acc.value))
    wschema = _schema(WINDOW_DDL)
    wlog = window_log()
    for name, wspec in window_specs().items():
        acc = counters(spark)
        result = replay_streams(
            spark, {"events": (wschema, [list(b.rows) for b in wlog])},
            lambda f, wspec=wspec, acc=acc: window_aggregate(f["events"], wspec, counters=acc),
            workdir=root / name)
        out[name] = (result, dict(acc.value))
    spark.stop()
    return out


# ------------------------------------------------------------------------------------------
# 2. The demo with --master
# ------------------------------------------------------------------------------------------


def test_demo_with_master_runs_on_the_cluster_and_matches_the_oracles(cluster, tmp_path):
    import duckdb

    from interlace.demo import (
        CLICKS_DDL,
        ORDERS_DDL,
        PAYMENTS_DDL,
        demo_pipelines,
        generate_clicks,
        generate_orders_payments,
    )
    from interlace.testing.log import JoinBatch
    from interlace.testing.oracle import DEAD_LETTER_COLUMN, canonical_rows, oracle_join
    from interlace.testing.window_oracle import WindowBatch, oracle_window

    workdir = tmp_path / "demo"
    proc = subprocess.run(
        [str(Path(PYTHON).parent / "interlace"), "demo", "--workdir", str(workdir),
         "--master", cluster.url],
        env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-6000:]
    lines = proc.stdout.splitlines()
    join, window = demo_pipelines(workdir)
    orders, payments = generate_orders_payments()
    jwant = oracle_join(join.join, [JoinBatch(left=o, right=p) for o, p in
                                    zip(orders, payments, strict=True)],
                        left_columns=names(ORDERS_DDL), right_columns=names(PAYMENTS_DDL))
    wwant = oracle_window(window.window, [WindowBatch(rows=b) for b in generate_clicks()],
                          columns=names(CLICKS_DDL))
    con = duckdb.connect(str(workdir / "demo.duckdb"), read_only=True)
    try:
        def rows(table: str) -> list[dict[str, Any]]:
            cur = con.execute(f"SELECT * FROM {table}")
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

        joined, letters, clicks = rows("orders_payments"), rows("late_payments"), rows(
            "clicks_per_minute")
        commits = con.execute("SELECT tbl, count(*), count(DISTINCT batch_id), sum(rows) "
                              "FROM _interlace_commits GROUP BY tbl").fetchall()
    finally:
        con.close()
    normal = [{k: v for k, v in o.row.items() if k != DEAD_LETTER_COLUMN}
              for o in jwant.rows if o.row[DEAD_LETTER_COLUMN] is None]
    assert Counter(canonical_rows(joined)) == Counter(canonical_rows(normal))
    dead = [{DEAD_LETTER_COLUMN: o.row[DEAD_LETTER_COLUMN]} for o in jwant.rows
            if o.row[DEAD_LETTER_COLUMN] is not None]
    got_dead = [{DEAD_LETTER_COLUMN: r["dead_letter"]} for r in letters]
    assert Counter(canonical_rows(got_dead)) == Counter(canonical_rows(dead))
    assert len(dead) == jwant.dead_lettered["right"] > 0
    last: dict[tuple[Any, ...], dict[str, Any]] = {}
    for o in wwant.rows:
        k = (o.row["window_start"], o.row["window_end"], o.row["user"])
        if k not in last or o.row["revision"] > last[k]["revision"]:
            last[k] = o.row

    def exact(rs):
        return Counter(canonical_rows({k: v for k, v in r.items() if k != "unique_pages"}
                                      for r in rs))

    assert exact(clicks) == exact(last.values())
    for tbl, n, distinct, _written in commits:
        assert n == distinct, f"{tbl}: a batch id committed twice"
    # The counters the summary prints came back from the executors, exactly.
    summary = next(line for line in lines if "clicks too late even for reopen" in line)
    m = re.search(r"(\d+) clicks too late even for reopen \((\d+) of them", summary)
    assert m is not None, summary
    assert (int(m[1]), int(m[2])) == (wwant.late_dropped + wwant.spark_dropped,
                                      wwant.spark_dropped)
    print(f"\n[cluster] demo --master {cluster.url}: {len(joined)} joined rows, {len(letters)} "
          f"dead letters, {len(clicks)} click windows = oracles; commits {commits}")


# ------------------------------------------------------------------------------------------
# 3./4. SIGKILL an executor in the middle of a micro-batch
# ------------------------------------------------------------------------------------------


def test_executor_sigkill_mid_batch_recovers_exactly_once_with_exact_counters(cluster, tmp_path):
    import duckdb

    from interlace.demo import ORDERS_DDL, PAYMENTS_DDL, demo_pipelines
    from interlace.testing.log import JoinBatch
    from interlace.testing.oracle import DEAD_LETTER_COLUMN, canonical_rows, oracle_join

    workdir = tmp_path / "kill"
    control = workdir / "control"
    control.mkdir(parents=True)
    spec = {"master": cluster.url, "workdir": str(workdir)}
    log_file = (workdir / "driver.log").open("w")
    driver = subprocess.Popen([PYTHON, str(HERE), "kill", json.dumps(spec)], env=_env(),
                              cwd=workdir, stdout=log_file, stderr=subprocess.STDOUT)
    db = workdir / "out.duckdb"
    try:
        # Wait until the slow batch's downstream tasks hold their input and wait at the gate.
        # Both (one per executor) if they come, else the one that did within 15 s.
        deadline, first = time.time() + 200, None
        started: list[dict[str, Any]] = []
        while time.time() < deadline and driver.poll() is None:
            started = [json.loads(p.read_text()) for p in control.glob("started-*.json")]
            first = first or (time.time() if started else None)
            if len(started) >= 2 or (first is not None and time.time() > first + 15):
                break
            time.sleep(0.2)
        assert started, (workdir / "driver.log").read_text()[-6000:]
        app_id = json.loads((control / "app.json").read_text())["app_id"]
        progress = [json.loads(x) for x in (control / "progress.jsonl").read_text().splitlines()]
        before = progress[-1]
        con = duckdb.connect(str(db), read_only=True)
        try:
            rows_before = con.execute("SELECT count(*) FROM orders_payments").fetchone()[0]
        finally:
            con.close()
        victim = min(started, key=lambda s: int(s["executor_id"]))
        executors = cluster.executors(app_id)
        assert executors.get(victim["executor_id"]) == victim["executor_pid"], (executors, victim)
        assert len(executors) == 2
        os.kill(victim["executor_pid"], signal.SIGKILL)
        while Path(f"/proc/{victim['executor_pid']}").exists():
            time.sleep(0.1)
        (control / "go").write_text("killed")
        driver.wait(240)
    finally:
        if driver.poll() is None:
            (control / "go").write_text("timeout")
            driver.kill()
            driver.wait()
        log_file.close()
    assert driver.returncode == 0, (workdir / "driver.log").read_text()[-8000:]
    with (workdir / "result.pickle").open("rb") as fh:
        out = pickle.load(fh)  # noqa: S301
    events = read_event_log(workdir / "events")

    # What Spark did: the killed executor's task failed, the operator tasks whose output died
    # with it ran again, and the worker started a new executor.
    lost = [f for f in events["failed_tasks"] if f["reason"] == "ExecutorLostFailure"]
    assert lost and all(f["executor"] == victim["executor_id"] for f in lost)
    assert all(f["batch"] == str(SLOW_BATCH) for f in lost)
    assert events["executors_added"] >= 3 and events["executors_removed"] >= 1
    assert any(s["operator"] for s in events["rerun_stages"]), events["rerun_stages"]
    ops = events["operator_tasks_per_batch"]
    assert ops[str(SLOW_BATCH)] > ops["0"], ops  # some operator tasks ran twice

    # Exactly once into DuckDB, and exactly the oracle.
    join, _ = demo_pipelines(workdir)
    orders, payments = kill_log()
    want = oracle_join(join.join, [JoinBatch(left=o, right=p) for o, p in
                                   zip(orders, payments, strict=True)],
                       left_columns=names(ORDERS_DDL), right_columns=names(PAYMENTS_DDL))
    con = duckdb.connect(str(db), read_only=True)
    try:
        cur = con.execute("SELECT * FROM orders_payments")
        cols = [d[0] for d in cur.description]
        got = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
        letters = [r[0] for r in con.execute("SELECT dead_letter FROM late_payments").fetchall()]
        commits = con.execute("SELECT tbl, batch_id, rows FROM _interlace_commits "
                              "ORDER BY tbl, batch_id").fetchall()
    finally:
        con.close()
    normal = [{k: v for k, v in o.row.items() if k != DEAD_LETTER_COLUMN}
              for o in want.rows if o.row[DEAD_LETTER_COLUMN] is None]
    assert Counter(canonical_rows(got)) == Counter(canonical_rows(normal))
    dead = [o.row[DEAD_LETTER_COLUMN] for o in want.rows if o.row[DEAD_LETTER_COLUMN] is not None]
    assert Counter(canonical_rows({"d": json.loads(x)} for x in letters)) == Counter(
        canonical_rows({"d": json.loads(x)} for x in dead))
    per_table = Counter(t for t, _, _ in commits)
    assert len(commits) == len(set((t, b) for t, b, _ in commits))
    assert per_table["orders_payments"] == out["batches"]

    # Counters: exact, although the re-run operator tasks reported theirs a second time.
    counters, legacy = out["counters"], out["legacy"]
    exact = {
        **join_counts_from_rows([o.row for o in want.rows], "order_ts", "pay_ts"),
        "dead_lettered_right": want.dead_lettered["right"],
        "dead_lettered_left": want.dead_lettered["left"],
        "late_dropped_left": want.late_dropped["left"],
        "late_dropped_right": want.late_dropped["right"],
    }
    assert {k: counters.get(k, 0) for k in exact} == exact
    assert counters == out["uninterrupted"]
    print(f"\n[cluster] SIGKILL executor {victim['executor_id']} (pid {victim['executor_pid']}) "
          f"while batch {SLOW_BATCH}'s stage {victim['stage']} task for partition "
          f"{victim['partition']} (attempt {victim['attempt']}) waited at the gate")
    for f in events["failed_tasks"]:
        print(f"[cluster]   failed: batch {f['batch']} stage {f['stage']}.{f['stage_attempt']} "
              f"partition {f['partition']} attempt {f['task_attempt']} on executor "
              f"{f['executor']}: {f['reason']}")
    for s in events["rerun_stages"]:
        print(f"[cluster]   re-run: batch {s['batch']} stage {s['stage']} attempt {s['attempt']} "
              f"({s['tasks']} tasks{', the operator' if s['operator'] else ''})")
    print(f"[cluster]   operator tasks run per batch: {ops}; executors added "
          f"{events['executors_added']}, removed {events['executors_removed']}")
    print(f"[cluster]   DuckDB rows before the kill {rows_before} (batches < {SLOW_BATCH}), after "
          f"{len(got)} = oracle {len(normal)}; {len(letters)} dead letters; commits {commits}")
    print(f"[cluster]   counters before the kill {json.dumps(before['counters'], sort_keys=True)}")
    print(f"[cluster]   counters after           {json.dumps(counters, sort_keys=True)}")
    print(f"[cluster]   additive (old) counters  {json.dumps(legacy, sort_keys=True)}")
    assert rows_before < len(got)
    # The old additive merge counts the re-run operator tasks twice: what the fix is for.
    assert any(legacy.get(k, 0) > v for k, v in counters.items()), legacy


def kill_log():
    from interlace.demo import generate_orders_payments

    return generate_orders_payments(n_batches=4, orders_per_batch=120, seed=3)


def _gate(control: str, slow: bool, frames):
    """Test-only ``mapInPandas`` step after the operator: in the slow batch, hold each task
    (its input already read) until the test has killed an executor."""
    import json
    import os
    import time
    from pathlib import Path

    from pyspark import TaskContext

    held = list(frames)
    folder = Path(control)
    if slow and not (folder / "go").exists():
        ctx = TaskContext.get()
        pid = os.getpid()
        exec_pid, exec_id = pid, None
        while exec_pid > 1:  # the executor JVM is an ancestor (via pyspark.daemon)
            argv = Path(f"/proc/{exec_pid}/cmdline").read_bytes().split(b"\0")
            if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in argv:
                exec_id = argv[argv.index(b"--executor-id") + 1].decode()
                break
            stat = Path(f"/proc/{exec_pid}/stat").read_text()
            exec_pid = int(stat.rsplit(")", 1)[1].split()[1])
        info = {"pid": pid, "executor_pid": exec_pid, "executor_id": exec_id,
                "stage": ctx.stageId(), "partition": ctx.partitionId(),
                "attempt": ctx.attemptNumber()}
        tmp = folder / f".started-{pid}.tmp"
        tmp.write_text(json.dumps(info))
        tmp.replace(folder / f"started-{pid}.json")
        deadline = time.time() + 120
        while not (folder / "go").exists() and time.time() < deadline:
            time.sleep(0.1)
    yield from held


class Tee:
    """Counters sink feeding the idempotent accumulator and, for comparison, an additive one
    (the merge before the fix) with the same per-call counts."""

    def __init__(self, fixed: Any, additive: Any) -> None:
        self.fixed = fixed
        self.additive = additive

    @property
    def accum_param(self) -> Any:
        return self.fixed.accum_param

    def add(self, term: Any) -> None:
        self.fixed.add(term)
        self.additive.add(getattr(term, "counts", term))


def _driver_kill(args: dict[str, Any]) -> dict[str, Any]:
    import functools

    from interlace.operators.common.names import DEAD_LETTER_COLUMN
    from pyspark.accumulators import AccumulatorParam
    from pyspark.sql import types as T

    import interlace.metrics as metrics
    from interlace import stream_join
    from interlace.demo import ORDERS_DDL, PAYMENTS_DDL, demo_pipelines
    from interlace.connectors.duckdb import DuckDBTarget
    from interlace.testing.local import run_join_locally
    from interlace.testing.log import JoinBatch
    from interlace.testing.replay import write_parquet_rows

    class Additive(AccumulatorParam):  # the merge before the fix
        def zero(self, value):
            return {}

        def addInPlace(self, a, b):  # noqa: N802
            for k, v in b.items():
                a[k] = a.get(k, 0) + v
            return a

    root = Path(args["workdir"])
    control = root / "control"
    # Both executors share this host, and by default a reducer reads a dead executor's shuffle
    # files straight from its disk, so nothing would be re-run. On a real cluster they are on
    # different hosts: fetch over the network, as there.
    spark = driver_session(args, "interlace-cluster-kill",
                           **{"spark.shuffle.readHostLocalDisk": "false"})
    (control / "app.json").write_text(json.dumps({"app_id": spark.sparkContext.applicationId}))
    wait_for_executors(spark, 2)
    orders, payments = kill_log()
    inputs = (("orders", orders, ORDERS_DDL), ("payments", payments, PAYMENTS_DDL))
    for name, batches, ddl in inputs:
        (root / "in" / name).mkdir(parents=True)
        for i, rows in enumerate(batches):
            write_parquet_rows(root / "in" / name / f"{i:06d}.parquet", rows, _schema(ddl),
                               1_700_000_000.0 + i)
    spec = demo_pipelines(root)[0].join
    acc = metrics.counters(spark)
    legacy = spark.sparkContext.accumulator({}, Additive())
    sink_counters = Tee(acc, legacy)
    frames = [spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).parquet(
        str(root / "in" / name)) for name, ddl in (("orders", ORDERS_DDL),
                                                   ("payments", PAYMENTS_DDL))]
    out = stream_join(*frames, spec, counters=sink_counters)
    target = DuckDBTarget(root / "out.duckdb", "orders_payments", "kill-test")
    dead = DuckDBTarget(root / "out.duckdb", "late_payments", "kill-test")
    target.prepare(out.drop(DEAD_LETTER_COLUMN).schema)
    dead.prepare(T.StructType([T.StructField("dead_letter", T.StringType())]))
    batches = []

    def sink(df: Any, batch_id: int) -> None:
        # A downstream stage after the operator (repartition + the gate), so the operator's
        # tasks are shuffle-map tasks whose output can die with an executor.
        gate = functools.partial(_gate, str(control), batch_id == SLOW_BATCH)
        pdf = df.repartition(2).mapInPandas(gate, df.schema).toPandas()
        letters = pdf.loc[pdf[DEAD_LETTER_COLUMN].notna(), [DEAD_LETTER_COLUMN]].rename(
            columns={DEAD_LETTER_COLUMN: "dead_letter"})
        pdf = pdf[pdf[DEAD_LETTER_COLUMN].isna()].drop(columns=[DEAD_LETTER_COLUMN])
        dead.write(letters.reset_index(drop=True), batch_id)
        n = target.write(pdf.reset_index(drop=True), batch_id)
        batches.append(batch_id)
        line = {"batch": batch_id, "rows": n, "counters": dict(acc.value),
                "legacy": dict(legacy.value)}
        with (control / "progress.jsonl").open("a") as fh:
            fh.write(json.dumps(line) + "\n")

    q = (out.writeStream.foreachBatch(sink).option("checkpointLocation", str(root / "ckpt"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    result = {"batches": len(batches), "counters": dict(acc.value), "legacy": dict(legacy.value)}
    spark.stop()
    # The same function without Spark, uninterrupted (interlace.testing.local).
    import pyarrow as pa

    def arrow(ddl: str) -> Any:
        types = {"BIGINT": pa.int64(), "STRING": pa.string(), "DOUBLE": pa.float64(),
                 "TIMESTAMP": pa.timestamp("ns")}
        return pa.schema([(c, types[t.upper()]) for c, t in
                          (part.split() for part in ddl.split(", "))])

    local = run_join_locally(spec, [JoinBatch(left=o, right=p) for o, p in
                                    zip(orders, payments, strict=True)],
                             arrow(ORDERS_DDL), arrow(PAYMENTS_DDL))
    result["uninterrupted"] = dict(local.counters)
    return result


# ------------------------------------------------------------------------------------------
# The driver side (this file run as a script)
# ------------------------------------------------------------------------------------------


def _schema(ddl: str) -> Any:
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(ddl)


def driver_session(args: dict[str, Any], name: str, **conf: str) -> Any:
    from interlace.session import local_session

    events = Path(args["workdir"]) / "events"
    events.mkdir(parents=True, exist_ok=True)
    return local_session(name, master=args["master"], shuffle_partitions=4, conf={
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.executor.memory": "512m",
        "spark.cores.max": "2",
        "spark.executorEnv.PYSPARK_PYTHON": PYTHON,
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
        **conf,
    })


def executor_ids(spark: Any) -> list[str]:
    """Ids of the executors registered with the driver (the driver itself not included)."""
    ids = spark.sparkContext._jsc.sc().getExecutorIds().mkString(",")
    return [i for i in ids.split(",") if i]


def wait_for_executors(spark: Any, n: int, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if len(executor_ids(spark)) >= n:
            return
        time.sleep(0.3)
    msg = f"fewer than {n} executors registered"
    raise RuntimeError(msg)


DRIVERS = {"replay": _driver_replay, "kill": _driver_kill}

if __name__ == "__main__":
    spec = json.loads(sys.argv[2])
    result = DRIVERS[sys.argv[1]](spec)
    with (Path(spec["workdir"]) / "result.pickle").open("wb") as fh:
        pickle.dump(result, fh)
