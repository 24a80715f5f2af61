"""``interlace explain --operator stream_table``: seed 003's KStream-KTable table; no Spark.

Every test calls :func:`interlace.cli.main` in-process. Under ``--emit eager`` the table is
seed 003's, row by row (Kafka looks the current table up as each record arrives); under
``final`` and with late rows, each micro-batch's cells are what
:func:`interlace.testing.oracles.oracle_stream_table_join` says that batch emits.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from interlace.cli import main
from interlace.testing.log import JoinBatch
from interlace.testing.oracles import oracle_stream_table_join
from interlace.testing.seed003_tables import STREAM_TABLE

BASE = dt.datetime(2026, 1, 1)

#: Seed 003's KStream-KTable records (the stream's null records left out, as Kafka skips
#: them): a right record with value null is a tombstone.
SEED = [{"side": side, "ts": ts, "key": "k1", "value": value}
        for ts, side, value, _, _ in STREAM_TABLE]


def _run(capsys, tmp_path, events, *args):
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"events": events}))
    code = main(["explain", str(path), "--operator", "stream_table", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def _cells(table):
    """Parse the table into its header and one ``{column: cell}`` dict per micro-batch."""
    lines = table.splitlines()
    header = [h.strip() for h in lines[0].split(" | ")]
    assert set(lines[1]) <= {"-", "+"}
    rows = [[c.strip() for c in line.split(" | ")] for line in lines[2:]]
    return header, rows


def _pairs(pairs):
    return "  ".join(sorted(f"{s} - {'null' if t is None else t}" for s, t in pairs))


def test_eager_reproduces_seed_003s_kstream_ktable_table_row_by_row(tmp_path, capsys):
    code, out, err = _run(capsys, tmp_path, SEED, "--emit", "eager")
    assert code == 0, err
    header, rows = _cells(out)
    assert header == ["ts", "left", "right", "inner", "left"]
    assert len(rows) == len(STREAM_TABLE) + 1 and rows[-1][0] == "(no-data batch)"
    for row, (ts, side, value, inner, left) in zip(rows, STREAM_TABLE, strict=False):
        shown = "null" if value is None else value
        assert row[:3] == [str(ts), shown if side == "left" else "", shown if side == "right"
                           else ""], row
        assert row[3:] == [_pairs(inner), _pairs(left)], (ts, out)
    assert rows[-1][3:] == ["", ""]
    assert "B - a" in out and "C - null" in out  # a partner, and a tombstoned key


def _oracle_cells(events, **spec):
    """Each micro-batch's inner and left cells, from the oracle on the same log."""
    log = [JoinBatch(left=(r,)) if e["side"] == "left" else JoinBatch(right=(r,))
           for e in events
           for r in [{"key": e["key"], "value": e["value"],
                      "ts": BASE + dt.timedelta(seconds=e["ts"])}]]
    cells = {}
    for how in ("inner", "left"):
        result = oracle_stream_table_join(
            None, log, left_columns=["key", "value", "ts"], right_columns=["key", "value", "ts"],
            left_keys=["key"], right_keys=["key"], how=how, event_time_column="ts",
            value_columns=["value"], **spec)
        for b in range(result.num_batches):
            shown = []
            for r in result.rows_for_batch(b):
                if r.get("_dead_letter"):
                    shown.append("dead letter: " + json.loads(r["_dead_letter"])["side"])
                else:
                    lv, rv = r["left_value"], r["right_value"]
                    shown.append(f"{'null' if lv is None else lv} - "
                                 f"{'null' if rv is None else rv}")
            cells.setdefault(b, {})[how] = "  ".join(sorted(shown))
    return cells


LATE_LOG = [  # written in this order (--arrival file): the tier at 6 arrives after 20
    {"side": "right", "ts": 1, "key": "c1", "value": "gold"},
    {"side": "left", "ts": 4, "key": "c1", "value": "o1"},
    {"side": "left", "ts": 8, "key": "c1", "value": "o2"},
    {"side": "left", "ts": 20, "key": "c2", "value": "o3"},
    {"side": "right", "ts": 20, "key": "c2", "value": "bronze"},
    {"side": "right", "ts": 6, "key": "c1", "value": "silver"},
    {"side": "left", "ts": 3, "key": "c1", "value": "o0"},
    {"side": "right", "ts": 30, "key": "c1", "value": None},
    {"side": "left", "ts": 31, "key": "c1", "value": "o4"},
    {"side": "left", "ts": 40, "key": "c2", "value": "o5"},
    {"side": "right", "ts": 40, "key": "c1", "value": "x"},
]


@pytest.mark.parametrize(("options", "spec"), [
    ({}, {}),
    ({"--emit": "eager"}, {"emit": "eager"}),
    ({"--lateness-ms": 15_000}, {"lateness_ms": 15_000}),
    ({"--lateness-ms": 15_000, "--history-retention-ms": 0},
     {"lateness_ms": 15_000, "history_retention_ms": 0}),
    ({"--late-data": "dlq", "--lateness-ms": 2_000, "--dlq-horizon-ms": 60_000},
     {"late_data": "dlq", "lateness_ms": 2_000, "dlq_horizon_ms": 60_000}),
])
def test_each_batch_shows_what_the_oracle_emits_in_it(tmp_path, capsys, options, spec):
    args = [x for k, v in options.items() for x in (k, v)]
    code, out, err = _run(capsys, tmp_path, LATE_LOG, "--arrival", "file", *args)
    assert code == 0, err
    _, rows = _cells(out)
    want = _oracle_cells(LATE_LOG, **spec)
    assert len(rows) == len(want)
    for b, row in enumerate(rows):
        assert {"inner": row[3], "left": row[4]} == want[b], (b, out)
    assert any(row[4] for row in rows), out  # something is emitted


def test_final_waits_for_the_watermark_and_sees_a_version_that_arrived_later(tmp_path, capsys):
    code, out, _ = _run(capsys, tmp_path, LATE_LOG, "--arrival", "file", "--lateness-ms",
                        15_000, "--how", "left")
    assert code == 0
    # o2 (8 s) joins silver (valid from 6 s), which arrived four micro-batches after it.
    assert "o2 - silver" in out and "o1 - gold" in out
    code, eager, _ = _run(capsys, tmp_path, LATE_LOG, "--arrival", "file", "--lateness-ms",
                          15_000, "--how", "left", "--emit", "eager")
    assert "o2 - gold" in eager  # eager joined what it had


@pytest.mark.parametrize(("args", "needle"), [
    (["--allowed-lateness-ms", "5"], "--allowed-lateness-ms does not apply to --operator "
                                     "stream_table"),
    (["--time-window-ms", "5"], "--time-window-ms does not apply"),
    (["--kind", "tumbling"], "--kind does not apply"),
    (["--late-data", "reopen"], "`late_data`='reopen' is not supported by the stream-table join"),
    (["--how", "full"], "`how` must be one of 'inner', 'left'"),
])
def test_options_a_stream_table_join_does_not_take_are_refused(tmp_path, capsys, args, needle):
    code, out, err = _run(capsys, tmp_path, SEED, *args)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and needle in err, err


def test_the_stream_table_options_are_refused_by_the_other_operators(tmp_path, capsys):
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"events": SEED}))
    for args in (["--emit", "eager", "--time-window-ms", "5"],
                 ["--history-retention-ms", "0", "--time-window-ms", "5"]):
        assert main(["explain", str(path), *args]) == 2
        assert "does not apply to --operator join" in capsys.readouterr().err


def test_a_stream_table_event_needs_a_side(tmp_path, capsys):
    code, _, err = _run(capsys, tmp_path, [{"ts": 1, "key": "k", "value": "a"}])
    assert code == 2 and "event 0: field `side` must be 'left' or 'right'" in err


def test_the_help_example_runs(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stream-table example"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" "))
    text = " ".join(line.strip() for line in lines[start + 1:end])
    log_text, command = text.split("interlace explain ")
    (tmp_path / "st.json").write_text(log_text)
    argv = ["explain", *command.split()]
    assert main([str(tmp_path / a) if a == "st.json" else a for a in argv]) == 0
    _, rows = _cells(capsys.readouterr().out)
    assert [r[3:] for r in rows[:4]] == [["", ""], ["o1 - gold", "o1 - gold"], ["", ""],
                                         ["", "o2 - null"]]
