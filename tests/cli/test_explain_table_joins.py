"""``interlace explain --operator table`` and ``--operator foreign_key``: seed 003's tables; no Spark.

Every test calls :func:`interlace.cli.main` in-process; explain runs the operator functions
(``run_table_join_locally``, ``run_foreign_key_join_locally``). Under ``--emit eager`` with
one record per micro-batch the tables are seed 003's KTable-KTable and foreign-key tables row
by row (Kafka applies each record as it arrives); under ``final`` and with late records, each
micro-batch's cells are what :func:`~interlace.testing.oracles.oracle_table_join` /
:func:`~interlace.testing.oracles.oracle_foreign_key_join` say that batch emits.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from interlace.cli import main
from interlace.testing.log import JoinBatch
from interlace.testing.oracles import oracle_foreign_key_join, oracle_table_join
from interlace.testing.seed003_tables import FOREIGN_KEY, KEY, TABLE_TABLE

BASE = dt.datetime(2026, 1, 1)

#: Seed 003's KTable-KTable records: a record with value null is a tombstone.
TABLE_SEED = [{"side": side, "ts": ts, "key": KEY, "value": value}
              for ts, side, value, *_ in TABLE_TABLE]
#: Seed 003's foreign-key records: left (k, fk), right (fk, v); a left fk null deletes k.
FK_SEED = [{"side": side, "ts": ts, "key": key, "fk": field} if side == "left"
           else {"side": side, "ts": ts, "fk": key, "value": field}
           for ts, side, key, field, *_ in FOREIGN_KEY]


def _run(capsys, tmp_path, operator, events, *args):
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"events": events}))
    code = main(["explain", str(path), "--operator", operator, *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def _cells(table):
    """Parse the table into its header and one list of cells per micro-batch."""
    lines = table.splitlines()
    header = [h.strip() for h in lines[0].split(" | ")]
    assert set(lines[1]) <= {"-", "+"}
    return header, [[c.strip() for c in line.split(" | ")] for line in lines[2:]]


def _null(v):
    return "null" if v is None else str(v)


def _seed_cell(change, fk):
    """A seed 003 output (a Change, or None for no output) as explain prints it."""
    if change is None:
        return ""
    if change.op == "delete":
        return f"delete {change.key}"
    if fk:
        return f"({change.key},{_null(change.left)},{_null(change.right)})"
    return f"{_null(change.left)} - {_null(change.right)}"


def test_table_eager_reproduces_seed_003s_ktable_ktable_table_row_by_row(tmp_path, capsys):
    code, out, err = _run(capsys, tmp_path, "table", TABLE_SEED, "--emit", "eager")
    assert code == 0, err
    header, rows = _cells(out)
    assert header == ["ts", "left", "right", "inner", "left", "full"]
    assert len(rows) == len(TABLE_TABLE) + 1 and rows[-1][0] == "(no-data batch)"
    for row, (ts, side, value, inner, left, outer) in zip(rows, TABLE_TABLE, strict=False):
        shown = _null(value)
        assert row[:3] == [str(ts), shown if side == "left" else "",
                           shown if side == "right" else ""], row
        assert row[3:] == [_seed_cell(c, fk=False) for c in (inner, left, outer)], (ts, out)
    assert rows[-1][3:] == ["", "", ""]
    assert "delete k1" in out and "null - b" in out  # a delete, and a right-only full row


def test_foreign_key_eager_reproduces_seed_003s_foreign_key_table_row_by_row(tmp_path, capsys):
    code, out, err = _run(capsys, tmp_path, "foreign_key", FK_SEED, "--emit", "eager")
    assert code == 0, err
    header, rows = _cells(out)
    assert header == ["ts", "left", "right", "inner", "left"]
    assert len(rows) == len(FOREIGN_KEY) + 1
    for row, (ts, side, key, field, inner, left) in zip(rows, FOREIGN_KEY, strict=False):
        shown = f"({key},{_null(field)})"
        assert row[:3] == [str(ts), shown if side == "left" else "",
                           shown if side == "right" else ""], row
        assert row[3:] == [_seed_cell(inner, fk=True), _seed_cell(left, fk=True)], (ts, out)
    # ts 3 inner: Kafka's redundant delete (k moves from one missing product to another).
    assert rows[3][3] == "delete k" and rows[3][4] == "(k,3,null)"


def _oracle_cells(kind, events, hows, **spec):
    """Each micro-batch's cells per ``how``, from the oracle on the same log."""
    columns = ["fk", "key", "ts", "value"]
    log = []
    for e in events:
        r = {c: e.get(c) for c in columns} | {"ts": BASE + dt.timedelta(seconds=e["ts"])}
        log.append(JoinBatch(left=(r,)) if e["side"] == "left" else JoinBatch(right=(r,)))
    if kind == "table":
        oracle, fields = oracle_table_join, {"right_keys": ["key"], "value_columns": ["value"]}
    else:
        oracle, fields = oracle_foreign_key_join, {
            "foreign_key_columns": ["fk"], "right_keys": ["fk"], "left_value_columns": ["fk"],
            "right_value_columns": ["value"]}
    cells = {}
    for how in hows:
        result = oracle(None, log, left_columns=columns, right_columns=columns,
                        left_keys=["key"], how=how, event_time_column="ts", **fields, **spec)
        for b in range(result.num_batches):
            rows = sorted(result.rows_for_batch(b), key=lambda r: (
                bool(r.get("_dead_letter")), _null(r["key"]), r["version"] or 0))
            shown = []
            for r in rows:
                if r.get("_dead_letter"):
                    shown.append("dead letter: " + json.loads(r["_dead_letter"])["side"])
                elif r["op"] == "delete":
                    shown.append(f"delete {r['key']}")
                elif kind == "table":
                    shown.append(f"{_null(r['left_value'])} - {_null(r['right_value'])}")
                else:
                    shown.append(f"({r['key']},{_null(r['left_fk'])},{_null(r['right_value'])})")
            cells.setdefault(b, {})[how] = "  ".join(shown)
    return cells


TABLE_LATE_LOG = [  # as written (--arrival file): c1's update at 5 arrives after 24
    {"side": "left", "ts": 1, "key": "c1", "value": "A"},
    {"side": "right", "ts": 2, "key": "c1", "value": "a"},
    {"side": "left", "ts": 8, "key": "c2", "value": "B"},
    {"side": "left", "ts": 10, "key": "c1", "value": "A1"},
    {"side": "right", "ts": 20, "key": "c2", "value": "b"},
    {"side": "left", "ts": 22, "key": "c2", "value": "B2"},
    {"side": "right", "ts": 24, "key": "c3", "value": "z"},
    {"side": "left", "ts": 5, "key": "c1", "value": "A2"},
    {"side": "right", "ts": 6, "key": "c1", "value": None},
    {"side": "left", "ts": 30, "key": "c1", "value": None},
    {"side": "right", "ts": 31, "key": "c2", "value": "b2"},
    {"side": "left", "ts": 40, "key": "c2", "value": "C"},
    {"side": "right", "ts": 40, "key": "c1", "value": "x"},
]

FK_LATE_LOG = [  # as written: the pen's rename at 5 and order o3 at 4 arrive after 21
    {"side": "right", "ts": 1, "fk": 1, "value": "pen"},
    {"side": "left", "ts": 2, "key": "o1", "fk": 1},
    {"side": "left", "ts": 3, "key": "o2", "fk": 1},
    {"side": "left", "ts": 10, "key": "o3", "fk": 1},
    {"side": "right", "ts": 20, "fk": 2, "value": "ink"},
    {"side": "left", "ts": 21, "key": "o2", "fk": 2},
    {"side": "right", "ts": 5, "fk": 1, "value": "blue pen"},
    {"side": "left", "ts": 4, "key": "o3", "fk": 2},
    {"side": "right", "ts": 30, "fk": 1, "value": None},
    {"side": "left", "ts": 31, "key": "o1", "fk": None},
    {"side": "left", "ts": 40, "key": "o4", "fk": 2},
    {"side": "right", "ts": 40, "fk": 2, "value": "ink 2"},
]

OPTIONS = [
    ({}, {}),
    ({"--emit": "eager"}, {"emit": "eager"}),
    ({"--lateness-ms": 25_000}, {"lateness_ms": 25_000}),
    ({"--lateness-ms": 25_000, "--emit": "eager"}, {"lateness_ms": 25_000, "emit": "eager"}),
    ({"--late-data": "dlq", "--lateness-ms": 2_000, "--dlq-horizon-ms": 60_000},
     {"late_data": "dlq", "lateness_ms": 2_000, "dlq_horizon_ms": 60_000}),
]


@pytest.mark.parametrize(("kind", "log", "hows"), [
    ("table", TABLE_LATE_LOG, ("inner", "left", "full")),
    ("foreign_key", FK_LATE_LOG, ("inner", "left")),
])
@pytest.mark.parametrize(("options", "spec"), OPTIONS)
def test_each_batch_shows_what_the_oracle_emits_in_it(tmp_path, capsys, kind, log, hows,
                                                      options, spec):
    args = [x for k, v in options.items() for x in (k, v)]
    code, out, err = _run(capsys, tmp_path, kind, log, "--arrival", "file", *args)
    assert code == 0, err
    header, rows = _cells(out)
    assert header[3:] == list(hows)
    want = _oracle_cells(kind, log, hows, **spec)
    assert len(rows) == len(want)
    for b, row in enumerate(rows):
        assert dict(zip(hows, row[3:], strict=True)) == want[b], (b, out)
    assert any(any(row[3:]) for row in rows), out  # something is emitted
    if spec.get("late_data") == "dlq":
        assert "dead letter: left" in out


def test_final_puts_an_update_that_arrived_late_back_in_order(tmp_path, capsys):
    code, out, _ = _run(capsys, tmp_path, "table", TABLE_LATE_LOG, "--arrival", "file",
                        "--lateness-ms", 25_000, "--how", "left")
    assert code == 0
    # c1's A2 (5 s, arrived after 24 s) is applied in order: after A (1 s) and a (2 s),
    # before the right tombstone (6 s) and A1 (10 s). Cells list rows by key, then version.
    cells = "  ".join(row[3] for row in _cells(out)[1] if row[3])
    assert cells.split("  ") == ["A - null", "A - a", "A2 - a", "A2 - null", "A1 - null",
                                 "B - null"], out
    code, eager, _ = _run(capsys, tmp_path, "table", TABLE_LATE_LOG, "--arrival", "file",
                          "--lateness-ms", 25_000, "--how", "left", "--emit", "eager")
    # eager applied A1 (10 s) on arrival, so A2 (5 s) is late: dropped.
    emitted = [row[3] for row in _cells(eager)[1]]
    assert "A1 - a" in emitted and not any("A2" in c for c in emitted), eager
    code, fk, _ = _run(capsys, tmp_path, "foreign_key", FK_LATE_LOG, "--arrival", "file",
                       "--lateness-ms", 25_000, "--how", "inner")
    # Under final the rename (5 s) reaches o1 and o2, which still refer to product 1 then.
    assert "(o1,1,blue pen)" in fk and "(o2,1,blue pen)" in fk


@pytest.mark.parametrize(("operator", "args", "needle"), [
    ("table", ["--history-retention-ms", "0"],
     "--history-retention-ms does not apply to --operator table"),
    ("table", ["--allowed-lateness-ms", "5"], "--allowed-lateness-ms does not apply"),
    ("table", ["--fk", "product"], "--fk does not apply to --operator table"),
    ("table", ["--time-window-ms", "5"], "--time-window-ms does not apply"),
    ("table", ["--late-data", "reopen"],
     "`late_data`='reopen' is not supported by the table-table join"),
    ("table", ["--how", "right"], "`how` must be one of 'inner', 'left', 'full'"),
    ("foreign_key", ["--how", "full"], "`how` must be one of 'inner', 'left'"),
    ("foreign_key", ["--kind", "tumbling"], "--kind does not apply"),
    ("foreign_key", ["--late-data", "reopen"],
     "`late_data`='reopen' is not supported by the foreign-key join"),
    ("foreign_key", ["--fk", "key"], "--key, --fk and --value must name three different"),
    ("stream_table", ["--fk", "fk"], "--fk does not apply to --operator stream_table"),
])
def test_options_a_table_join_does_not_take_are_refused(tmp_path, capsys, operator, args,
                                                        needle):
    code, out, err = _run(capsys, tmp_path, operator, TABLE_SEED, *args)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and needle in err, err


def test_a_table_event_needs_a_side(tmp_path, capsys):
    for operator in ("table", "foreign_key"):
        code, _, err = _run(capsys, tmp_path, operator, [{"ts": 1, "key": "k", "value": "a"}])
        assert code == 2 and "event 0: field `side` must be 'left' or 'right'" in err


def _help_example(capsys, title):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" "))
    text = " ".join(line.strip() for line in lines[start + 1:end])
    return text.split("interlace explain ")


@pytest.mark.parametrize(("title", "file", "want"), [
    ("table-table example", "tt.json",
     [["", "A - null", "A - null"], ["A - a", "A - a", "A - a"], ["A - b", "A - b", "A - b"],
      ["delete k", "delete k", "null - b"]]),
    ("foreign-key example", "fk.json",
     [["", ""], ["(o1,1,pen)", "(o1,1,pen)"], ["(o2,1,pen)", "(o2,1,pen)"],
      ["(o1,1,blue pen)  (o2,1,blue pen)", "(o1,1,blue pen)  (o2,1,blue pen)"],
      ["delete o2", "(o2,2,null)"]]),
])
def test_the_help_examples_run(tmp_path, capsys, title, file, want):
    log_text, command = _help_example(capsys, title)
    (tmp_path / file).write_text(log_text)
    argv = ["explain", *command.split()]
    assert main([str(tmp_path / a) if a == file else a for a in argv]) == 0
    _, rows = _cells(capsys.readouterr().out)
    assert [r[3:] for r in rows[:len(want)]] == want


def test_the_tables_in_docs_explain_md_are_what_explain_prints(tmp_path, capsys):
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "explain.md").read_text()
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", doc, re.S | re.M)
    logs = {"tseed.json": TABLE_SEED, "fkseed.json": FK_SEED}
    shown = [json.loads(body)["events"] for lang, body in blocks if lang == "json"]
    assert TABLE_SEED in shown and FK_SEED in shown
    checked = 0
    for (_, command), (_, table) in zip(blocks, blocks[1:], strict=False):
        words = command.split()
        if len(words) < 3 or words[:2] != ["interlace", "explain"] or words[2] not in logs:
            continue
        path = tmp_path / words[2]
        path.write_text(json.dumps({"events": logs[words[2]]}))
        assert main(["explain", str(path), *words[3:]]) == 0
        out = capsys.readouterr().out
        assert [line.rstrip() for line in out.strip().splitlines()] == table.strip().splitlines()
        checked += 1
    assert checked == 4
