"""The stream-table join without Spark: the step and the local runner against the oracle.

Seed 003's KStream-KTable table row by row, final vs eager, tombstones, NULL keys, late rows,
history retention, restart from an encoded state, and spec errors. Times are seconds after
2026-01-01; ``lateness_ms=0`` and the default ``HR`` unless a test says otherwise.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from typing import Any

import pyarrow as pa
import pytest

import interlace.testing.seed003_tables as seed
from interlace import ConfigError, StreamTableJoin
from interlace.operators.stream_table import StreamTablePlan, step
from interlace.operators.stream_table.plan import SIDE_COLUMN, STREAM, TABLE
from interlace.state import StateVersionError
from interlace.state.buffers import TIME_COLUMN
from interlace.state.tables import (
    StreamTableState,
    decode_stream_table_state,
    encode_stream_table_state,
)
from interlace.testing.local import run_stream_table_locally
from interlace.testing.log import JoinBatch, to_us
from interlace.testing.oracle import canonical_rows
from interlace.testing.oracles.stream_table import oracle_stream_table_join

BASE = dt.datetime(2026, 1, 1)
TS = pa.timestamp("ns")
KV = pa.schema([("k", pa.string()), ("v", pa.string()), ("event_time", TS)])
COLS = tuple(KV.names)
KW: dict[str, Any] = dict(seed.STREAM_TABLE_KWARGS)


def at(sec: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=sec)


def r(k: Any, v: Any, sec: float, **extra: Any) -> dict[str, Any]:
    return {"k": k, "v": v, "event_time": at(sec), **extra}


def check(spec: StreamTableJoin, log: list[JoinBatch], stream: pa.Schema = KV,
          table: pa.Schema = KV) -> Any:
    """Local run == oracle, batch by batch, with the same counters; return the oracle's."""
    run = run_stream_table_locally(spec, log, stream, table)
    want = oracle_stream_table_join(spec, log, left_columns=stream.names,
                                    right_columns=table.names)
    got: dict[int, list[dict[str, Any]]] = {}
    for b, row in run.rows:
        got.setdefault(b, []).append(row)
    want_by = want.rows_by_batch()
    assert run.watermarks_ms == want.spark_watermarks_ms
    for b in sorted(set(got) | set(want_by)):
        assert canonical_rows(got.get(b, [])) == canonical_rows(want_by.get(b, [])), f"batch {b}"
    for side in ("left", "right"):
        c = run.counters
        assert c.get(f"late_dropped_{side}", 0) == want.late_dropped[side], side
        assert c.get(f"dead_lettered_{side}", 0) == want.dead_lettered[side], side
        assert c.get(f"null_key_dropped_{side}", 0) == want.null_key_dropped[side], side
    assert run.spark_dropped == sum(want.spark_dropped.values())
    return want


# ---- seed 003: KStream-KTable --------------------------------------------------------------


@pytest.mark.parametrize("how", ["inner", "left"])
@pytest.mark.parametrize("emit", ["final", "eager"])
@pytest.mark.parametrize("one_per_batch", [True, False])
def test_seed003_kstream_ktable_matches_oracle_row_by_row(how: str, emit: str,
                                                          one_per_batch: bool) -> None:
    spec = StreamTableJoin(how=how, emit=emit, **KW)
    log = seed.stream_table_log(one_per_batch=one_per_batch)
    want = check(spec, log)
    pairs = sorted((o.row["left_v"], o.row["right_v"]) for o in want.rows
                   if o.row["left_k"] == seed.KEY)
    expected = sorted(p for entry in seed.STREAM_TABLE
                      for p in (entry[3] if how == "inner" else entry[4]))
    assert pairs == expected


@pytest.mark.parametrize("how", ["inner", "left"])
def test_seed003_eager_one_record_per_batch_emits_in_the_records_batch(how: str) -> None:
    spec = StreamTableJoin(how=how, emit="eager", **KW)
    run = run_stream_table_locally(spec, seed.stream_table_log(sentinel=False), KV, KV)
    got = [(b, row["left_v"], row["right_v"]) for b, row in run.rows]
    want = [(b, x, y) for b, entry in enumerate(seed.STREAM_TABLE)
            for x, y in (entry[3] if how == "inner" else entry[4])]
    assert got == want
    valid_from = {row["left_v"]: row["right_valid_from"] for _, row in run.rows}
    assert valid_from["B"] == seed.at(4) and valid_from["D"] == seed.at(14)


def test_output_columns_are_prefixed_stream_columns_then_values_then_valid_from() -> None:
    plan = StreamTablePlan.from_schemas(StreamTableJoin(**KW), KV, KV)
    assert plan.output_names == ("left_k", "left_v", "left_event_time", "right_v",
                                 "right_valid_from")
    dlq = StreamTablePlan.from_schemas(StreamTableJoin(late_data="dlq", **KW), KV, KV)
    assert dlq.output_names[-1] == "_dead_letter"


# ---- final vs eager ------------------------------------------------------------------------


def out_of_order_log() -> list[JoinBatch]:
    """The table's update at 5 s arrives after the stream row at 7 s (within lateness)."""
    return [
        JoinBatch(right=(r("a", "v1", 1),)),
        JoinBatch(left=(r("a", "o7", 7),)),
        JoinBatch(right=(r("a", "v5", 5),)),
        JoinBatch(left=(r("z", "S", 100),), right=(r("z", "S", 100),)),
    ]


def test_final_waits_for_the_watermark_and_sees_the_late_arriving_version() -> None:
    kw = {**KW, "lateness_ms": 10_000}
    final = check(StreamTableJoin(how="left", emit="final", **kw), out_of_order_log())
    eager = check(StreamTableJoin(how="left", emit="eager", **kw), out_of_order_log())
    tier = {o.row["left_v"]: o.row["right_v"] for o in final.rows}
    assert tier["o7"] == "v5"  # joined once wm > 7 s, after v5 arrived
    tier = {o.row["left_v"]: o.row["right_v"] for o in eager.rows}
    assert tier["o7"] == "v1"  # joined on arrival, against what had arrived: not revisited


# ---- tombstones -----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["inner", "left"])
def test_tombstones_by_column_give_the_same_rows_as_all_null_values(how: str) -> None:
    marked = seed.with_tombstone_column(seed.stream_table_log(), "v", sides=("right",))
    table = KV.append(pa.field("deleted", pa.bool_()))
    spec = StreamTableJoin(how=how, tombstone_column="deleted", **KW)
    want = check(spec, marked, KV, table)
    plain = check(StreamTableJoin(how=how, **KW), seed.stream_table_log())
    assert canonical_rows(want.rows) == canonical_rows(plain.rows)


def test_null_tombstone_flag_is_an_upsert_and_all_null_values_then_too() -> None:
    table = KV.append(pa.field("deleted", pa.bool_()))
    log = [
        JoinBatch(right=(r("a", None, 1, deleted=None), r("b", "x", 1, deleted=True))),
        JoinBatch(left=(r("a", "o", 2), r("b", "p", 2))),
        JoinBatch(left=(r("z", "S", 50),), right=(r("z", "S", 50, deleted=False),)),
    ]
    want = check(StreamTableJoin(how="left", tombstone_column="deleted", **KW), log, KV, table)
    valid = {o.row["left_v"]: o.row["right_valid_from"] for o in want.rows}
    assert valid["o"] == at(1) and valid["p"] is None


# ---- NULL keys ------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["inner", "left"])
@pytest.mark.parametrize("emit", ["final", "eager"])
def test_null_keys_never_match_and_are_counted(how: str, emit: str) -> None:
    log = [
        JoinBatch(left=(r(None, "n1", 1), r("a", "o1", 2)), right=(r(None, "t", 0), r("a", "x", 0))),
        JoinBatch(left=(r("z", "S", 50),), right=(r("z", "S", 50),)),
    ]
    want = check(StreamTableJoin(how=how, emit=emit, **KW), log)
    got = {o.row["left_v"]: o.row["right_v"] for o in want.rows}
    assert got.get("o1") == "x"
    assert ("n1" in got) == (how == "left") and got.get("n1") is None
    assert want.null_key_dropped["right"] == 1


# ---- late rows ------------------------------------------------------------------------------


def late_log() -> list[JoinBatch]:
    """W reaches 20 s in batch 2; the rows at 15 s pass Spark's filter (W_prev = 10 s)."""
    return [
        JoinBatch(left=(r("a", "o10", 10),), right=(r("a", "x", 10),)),
        JoinBatch(left=(r("a", "o20", 20),), right=(r("a", "y", 20),)),
        JoinBatch(left=(r("a", "o15", 15), r("a", "o30", 30)), right=(r("a", "w", 15),
                                                                      r("a", "z", 30))),
        JoinBatch(left=(r("q", "S", 90),), right=(r("q", "S", 90),)),
    ]


@pytest.mark.parametrize("emit", ["final", "eager"])
def test_late_rows_are_dropped_and_counted(emit: str) -> None:
    want = check(StreamTableJoin(how="left", emit=emit, **KW), late_log())
    assert want.late_dropped == {"left": 1, "right": 1}
    assert "o15" not in {o.row["left_v"] for o in want.rows}


@pytest.mark.parametrize("emit", ["final", "eager"])
def test_late_rows_become_dead_letters_under_dlq(emit: str) -> None:
    spec = StreamTableJoin(how="left", emit=emit, late_data="dlq", dlq_horizon_ms=60_000, **KW)
    want = check(spec, late_log())
    letters = [json.loads(o.row["_dead_letter"]) for o in want.rows if o.row["_dead_letter"]]
    assert sorted(d["side"] for d in letters) == ["left", "right"]
    assert {d["row"]["v"] for d in letters} == {"o15", "w"}
    assert all(d["reason"] == "late" for d in letters)


def test_history_retention_keeps_late_enough_updates_joinable() -> None:
    # HR = 10 s: the update at 15 s is not late at wm = 20 s (15 >= 20 - 10): it enters the
    # history, and o15 (also not late) joins it.
    spec = StreamTableJoin(how="left", history_retention_ms=10_000, **KW)
    want = check(spec, late_log())
    got = {o.row["left_v"]: o.row["right_v"] for o in want.rows}
    assert got["o15"] == "w" and want.late_dropped == {"left": 0, "right": 0}


# ---- history retention, step level ---------------------------------------------------------


def batch_of(plan: StreamTablePlan, rows: list[tuple[int, dict[str, Any]]]) -> pa.Table:
    cols: dict[str, list[Any]] = {n: [] for n in plan.input_schema.names}
    for side, row in rows:
        cols[SIDE_COLUMN].append(side)
        cols[TIME_COLUMN].append(to_us(row["event_time"]))
        for names, payload, s in ((plan.stream_names, plan.stream_payload, STREAM),
                                  (plan.table_names, plan.table_payload, TABLE)):
            for name, internal in zip(names, payload.names, strict=True):
                cols[internal].append(row.get(name) if s == side else None)
    return pa.table(cols, schema=plan.input_schema)


def test_retention_keeps_newer_versions_and_the_newest_before_and_drops_tombstones() -> None:
    spec = StreamTableJoin(history_retention_ms=1_000, **KW)
    plan = StreamTablePlan.from_schemas(spec, KV, KV)
    state = StreamTableState.empty(plan.history_schema, plan.held_schema)
    updates = [r("a", "1", 1), r("a", "2", 2), r("a", "3", 3), r("a", "4", 4),
               r("b", "1", 1), r("b", None, 2)]
    res = step(plan, state, batch_of(plan, [(TABLE, u) for u in updates]), None)
    assert res.state.history.num_rows == 6 and res.next_trim_us == to_us(at(3))
    # wm = 3.5 s: boundary 2.5 s; keep a@2 (newest at or before), a@3, a@4; b's newest
    # before the boundary is a tombstone: b is absent either way, dropped.
    res = step(plan, res.state, batch_of(plan, []), to_us(at(3.5)))
    kept = res.state.history.column(plan.value_internal[0]).to_pylist()
    assert kept == ["2", "3", "4"]
    assert res.counters["versions_evicted"] == 3
    assert res.next_trim_us == to_us(at(4))  # a@2 goes when wm - HR reaches a@3's 3 s


def test_held_rows_and_their_deadline_under_final() -> None:
    plan = StreamTablePlan.from_schemas(StreamTableJoin(how="left", **KW), KV, KV)
    state = StreamTableState.empty(plan.history_schema, plan.held_schema)
    res = step(plan, state, batch_of(plan, [(STREAM, r("a", "o", 5)), (STREAM, r("a", "p", 3))]),
               to_us(at(3)))
    assert res.output.num_rows == 0 and res.next_due_us == to_us(at(3))
    res = step(plan, res.state, batch_of(plan, []), to_us(at(3)) + 1)
    assert res.output.column("left_v").to_pylist() == ["p"] and res.next_due_us == to_us(at(5))


# ---- restart --------------------------------------------------------------------------------


def random_log(rnd: random.Random, n_batches: int = 6) -> list[JoinBatch]:
    log = []
    for b in range(n_batches):
        def rows(tag: str) -> tuple[dict[str, Any], ...]:
            return tuple(r(rnd.choice(["a", "b", "c", None]), rnd.choice([f"{tag}{b}", None]),
                           100 + b * 3 + rnd.randint(-6, 4)) for _ in range(rnd.randint(0, 4)))
        log.append(JoinBatch(left=rows("L"), right=rows("R")))
    return log


def test_restart_from_encoded_state_mid_log_gives_the_uninterrupted_output() -> None:
    spec = StreamTableJoin(how="left", lateness_ms=2_000, late_data="dlq", **{
        k: v for k, v in KW.items() if k != "lateness_ms"})
    plan = StreamTablePlan.from_schemas(spec, KV, KV)
    rnd = random.Random(7)
    calls = [(b, to_us(at(100 + 3 * i)) if i else None) for i, b in enumerate(random_log(rnd, 8))]

    def run(restart_at: int | None) -> list[Any]:
        p = plan
        state = StreamTableState.empty(p.history_schema, p.held_schema)
        out = []
        for i, (b, wm) in enumerate(calls):
            if i == restart_at:
                blob = encode_stream_table_state(state, p.fp)
                p = StreamTablePlan.from_schemas(StreamTableJoin(**{
                    f: getattr(spec, f) for f in spec.__dataclass_fields__}), KV, KV)
                state = decode_stream_table_state(blob, p.fp, p.history_schema, p.held_schema)
            rows = [(STREAM, x) for x in b.left] + [(TABLE, x) for x in b.right]
            res = step(p, state, batch_of(p, rows), wm)
            out.extend(res.output.to_pylist())
            state = res.state
        return canonical_rows(out)

    uninterrupted = run(None)
    assert uninterrupted and all(run(k) == uninterrupted for k in (1, 3, 5))


def test_a_changed_spec_fails_loudly_on_the_stored_state() -> None:
    plan = StreamTablePlan.from_schemas(StreamTableJoin(how="left", **KW), KV, KV)
    state = StreamTableState.empty(plan.history_schema, plan.held_schema)
    blob = encode_stream_table_state(step(plan, state, batch_of(plan, [(TABLE, r("a", "x", 1))]),
                                          None).state, plan.fp)
    other = StreamTablePlan.from_schemas(StreamTableJoin(how="inner", **KW), KV, KV)
    with pytest.raises(StateVersionError, match="fingerprint"):
        decode_stream_table_state(blob, other.fp, other.history_schema, other.held_schema)


@pytest.mark.parametrize("seed_", range(30))
@pytest.mark.parametrize("emit", ["final", "eager"])
def test_random_messy_logs_match_the_oracle(seed_: int, emit: str) -> None:
    rnd = random.Random(seed_)
    spec = StreamTableJoin(
        left_keys=["k"], right_keys=["k"], event_time_column="event_time",
        how=rnd.choice(["inner", "left"]), emit=emit, lateness_ms=rnd.choice([0, 2_000, 5_000]),
        history_retention_ms=rnd.choice([None, 0, 1_000, 8_000]),
        late_data=rnd.choice(["drop", "dlq"]), dlq_horizon_ms=rnd.choice([3_000, 86_400_000]),
        key_groups=rnd.choice([1, 3]))
    check(spec, random_log(rnd))


# ---- spec and plan errors ------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "field"), [
    ({"left_keys": []}, "`left_keys`"),
    ({"right_keys": ["k", "v"]}, "`left_keys` and `right_keys`"),
    ({"left_keys": "k"}, "`left_keys`"),
    ({"how": "full"}, "`how`"),
    ({"emit": "lazy"}, "`emit`"),
    ({"late_data": "reopen"}, "`late_data`"),
    ({"late_data": "later"}, "`late_data`"),
    ({"lateness_ms": -1}, "`lateness_ms`"),
    ({"history_retention_ms": -5}, "`history_retention_ms`"),
    ({"history_retention_ms": 1.5}, "`history_retention_ms`"),
    ({"dlq_horizon_ms": 0}, "`dlq_horizon_ms`"),
    ({"event_time_column": None}, "`event_time_column`"),
    ({"value_columns": ["k"]}, "`value_columns`"),
    ({"value_columns": ["event_time"]}, "`value_columns`"),
    ({"value_columns": ["v", "v"]}, "`value_columns`"),
    ({"tombstone_column": "k"}, "`tombstone_column`"),
    ({"value_columns": ["deleted"], "tombstone_column": "deleted"}, "`value_columns`"),
    ({"key_groups": 0}, "key_groups"),
    ({"left_prefix": 3}, "`left_prefix`"),
])
def test_spec_errors_name_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        StreamTableJoin(**{**KW, **fields})
    assert field in str(err.value)


def test_reopen_error_says_what_to_use_instead() -> None:
    with pytest.raises(ConfigError, match="use late_data='drop'.*'dlq'"):
        StreamTableJoin(late_data="reopen", **KW)


@pytest.mark.parametrize(("fields", "table", "field"), [
    ({"tombstone_column": "deleted"}, KV.append(pa.field("deleted", pa.string())),
     "`tombstone_column`"),
    ({"tombstone_column": "gone"}, KV, "`tombstone_column`"),
    ({"value_columns": ["price"]}, KV, "`value_columns`"),
    ({"right_keys": ["id"]}, KV, "`right_keys`"),
    ({"left_keys": ["id"]}, KV, "`left_keys`"),
    ({"right_event_time_column": "valid_from"}, KV, "`right_event_time_column`"),
    ({"left_prefix": "x_", "right_prefix": "x_"}, KV, "`left_prefix`"),
    ({"right_prefix": "right_valid_"}, KV.append(pa.field("from", pa.string())), "`right_prefix`"),
    ({"left_prefix": "__il_"}, KV, "`left_prefix`"),
])
def test_plan_errors_name_the_field(fields: dict[str, Any], table: pa.Schema, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        StreamTablePlan.from_schemas(StreamTableJoin(**{**KW, **fields}), KV, table)
    assert field in str(err.value)


def test_incompatible_key_types_name_both_key_fields() -> None:
    stream = pa.schema([("k", pa.int64()), ("v", pa.string()), ("event_time", TS)])
    with pytest.raises(ConfigError, match="`left_keys`.*`right_keys`"):
        StreamTablePlan.from_schemas(StreamTableJoin(**KW), stream, KV)


def test_docs_stream_table_page_examples_run() -> None:
    import doctest
    from pathlib import Path

    page = Path(__file__).resolve().parents[3] / "docs" / "stream-table.md"
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5 and result.failed == 0


# ---- issue 34: a large history, its quiet rows left alone ----------------------------------


def test_a_call_on_a_large_history_leaves_quiet_keys_alone_and_gives_the_same_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """20,000 table keys (float and string key columns: -0.0 and 0.0 among them, some
    keys with several versions, some deleted), then micro-batches touching a few hundred:
    the calls split the quiet keys off (the default thresholds) and give the oracle's rows,
    counters and watermarks, as the calls that sort the whole history do."""
    import importlib

    step_module = importlib.import_module("interlace.operators.stream_table.step")
    rnd = random.Random(34)
    schema = pa.schema([("k1", pa.float64()), ("k2", pa.string()), ("v", pa.string()),
                        ("event_time", TS)])
    keys = [(float(i % 5_000) - 2_500.0, f"s{i // 5_000}") for i in range(20_000)]
    keys[:3] = [(-0.0, "z"), (0.0, "y"), (-0.0, "y")]

    def row(k: tuple[float, str], v: Any, sec: float) -> dict[str, Any]:
        return {"k1": k[0], "k2": k[1], "v": v, "event_time": at(sec)}

    snapshot = [row(k, f"v0-{i}", 1 + i % 3) for i, k in enumerate(keys)]
    snapshot += [row(keys[i], f"v1-{i}", 4) for i in range(0, 20_000, 97)]  # second versions
    snapshot += [row(keys[i], None, 5) for i in range(1, 20_000, 211)]  # deletes
    log = [JoinBatch(left=[], right=snapshot)]
    for b in range(1, 6):
        t = 10 + 5 * b
        log.append(JoinBatch(
            left=[row((-0.0, "y") if j == 0 else rnd.choice(keys), None, t + rnd.random())
                  for j in range(300)],
            right=[row(rnd.choice(keys), f"v{b}-{j}", t + rnd.random()) for j in range(50)]))
    spec = StreamTableJoin(left_keys=["k1", "k2"], right_keys=["k1", "k2"],
                           event_time_column="event_time", how="left", emit="final",
                           lateness_ms=1_000, history_retention_ms=2_000, key_groups=1)
    calls: list[bool] = []
    split = step_module._split_quiet

    def spy(*args: Any) -> Any:
        quiet, active = split(*args)
        calls.append(quiet is not None and quiet.num_rows > 10_000)
        return quiet, active

    monkeypatch.setattr(step_module, "_split_quiet", spy)
    check(spec, log, schema, schema)
    assert sum(calls) >= 4, calls  # the micro-batches after the snapshot split
    monkeypatch.setattr(step_module, "_SPLIT_MIN_ROWS", 10**12)
    calls.clear()
    check(spec, log, schema, schema)
    assert not any(calls)
