"""``interlace explain --operator aggregate``: the table aggregation's table; no Spark.

The log of docs/table-aggregate.md's worked example (a1 joins eu, a2 joins eu, a1 moves to
us, a2's all-null update deletes it and empties eu): under ``--emit eager`` each micro-batch's
rows are the oracle's for that batch; under ``final`` they wait for the watermark; a late
update is a dead letter under ``dlq``; options of other operators are refused.
"""

from __future__ import annotations

import datetime as dt
import json

from interlace import Aggregation, TableAggregate
from interlace.cli import main
from interlace.testing.oracles.table_aggregate import oracle_table_aggregate

BASE = dt.datetime(2026, 1, 1)
EVENTS = [{"ts": 1, "key": "a1", "group": "eu", "value": 100},
          {"ts": 2, "key": "a2", "group": "eu", "value": 50},
          {"ts": 3, "key": "a1", "group": "us", "value": 120},
          {"ts": 4, "key": "a2", "group": None, "value": None}]


def _run(capsys, tmp_path, events, *args):
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"events": events}))
    code = main(["explain", str(path), "--operator", "aggregate", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def _batches(table):
    """Per micro-batch (a row with a ts cell starts one), its output cells after ``wm``."""
    lines = table.splitlines()
    header = [h.strip() for h in lines[0].split(" | ")]
    out: list[list[list[str]]] = []
    for line in lines[2:]:
        cells = [c.strip() for c in line.split(" | ")]
        if cells[0]:
            out.append([])
        if any(cells[3:]):
            out[-1].append(cells[3:])
    return header, out


def _oracle(emit, late_data="drop", events=EVENTS):
    spec = TableAggregate(keys=["key"], group_by=["group"], event_time_column="ts", emit=emit,
                          late_data=late_data, lateness_ms=0,
                          aggregations=[Aggregation(agg="count", as_="count"),
                                        Aggregation(agg="sum", column="value", as_="sum_value")])
    log = [[{**{k: e.get(k) for k in ("key", "group", "value")},
             "ts": BASE + dt.timedelta(seconds=e["ts"])}] for e in events]
    return oracle_table_aggregate(spec, log, columns=["group", "key", "value", "ts"])


def _cell(v):
    return "null" if v is None else str(v)


def test_eager_shows_each_update_taken_out_and_put_in(capsys, tmp_path):
    code, out, _ = _run(capsys, tmp_path, EVENTS, "--emit", "eager", "--agg", "count,sum:value")
    assert code == 0
    header, batches = _batches(out)
    assert header[3:] == ["group", "count", "sum_value", "op", "version"]
    want = _oracle("eager")
    for b, cells in enumerate(batches):
        rows = [r for bb, r in want.rows if bb == b]
        assert cells == [[_cell(r["group"]), _cell(r["count"]), _cell(r["sum_value"]), r["op"],
                          str(r["version"])] for r in rows]
    # The move: eu loses a1 (150 -> 50) and us gains it, in one micro-batch; the delete
    # empties eu.
    assert batches[2] == [["eu", "1", "50", "upsert", "2"], ["us", "1", "120", "upsert", "0"]]
    assert batches[3] == [["eu", "null", "null", "delete", "3"]]


def test_final_waits_for_the_watermark(capsys, tmp_path):
    code, out, _ = _run(capsys, tmp_path, EVENTS, "--agg", "count,sum:value")
    assert code == 0
    _, batches = _batches(out)
    want = _oracle("final")
    assert batches[0] == []  # nothing is due before the watermark passes it
    for b, cells in enumerate(batches):
        rows = [r for bb, r in want.rows if bb == b]
        assert [c[0] for c in cells] == [_cell(r["group"]) for r in rows]


def test_a_late_update_is_a_dead_letter_under_dlq(capsys, tmp_path):
    events = [*EVENTS[:3], {"ts": 0, "key": "a1", "group": "apac", "value": 1}]
    code, out, _ = _run(capsys, tmp_path, events, "--emit", "eager", "--arrival", "file",
                        "--late-data", "dlq", "--agg", "count")
    assert code == 0
    _, batches = _batches(out)
    assert batches[3] == [["dead letter: late", "", "", ""]]


def test_options_of_other_operators_are_refused(capsys, tmp_path):
    code, _, err = _run(capsys, tmp_path, EVENTS, "--kind", "tumbling")
    assert code != 0 and "--kind does not apply to --operator aggregate" in err
