"""``interlace explain`` for windows, malformed logs and help text (issue 11); no Spark.

Every test calls :func:`interlace.cli.main` in-process. The window tables are checked against
:func:`interlace.testing.window_oracle.oracle_window` on the same log, batch by batch: the rows
a table shows under a micro-batch must be the rows the oracle says that batch emits.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json

import pytest
from interlace.operators.window import Aggregation, Window

from interlace.cli import _parser, main
from interlace.testing.window_oracle import WindowBatch, oracle_window

BASE = dt.datetime(2026, 1, 1)

#: Three keys, with events out of ts order (with --arrival file the event at ts 3 arrives after
#: ts 12, the one at 18 after 26, and the one at 39 after 48, bridging two emitted sessions of
#: key c) and a trailing no-data batch.
EVENTS = [
    {"ts": 1, "key": "a", "value": 5},
    {"ts": 4, "key": "b", "value": 2},
    {"ts": 7, "key": "a", "value": 1},
    {"ts": 12, "key": "a", "value": 3},
    {"ts": 3, "key": "a", "value": 4},
    {"ts": 26, "key": "b", "value": 6},
    {"ts": 18, "key": "b", "value": 1},
    {"ts": 31, "key": "a", "value": 2},
    {"ts": 36, "key": "c", "value": 1},
    {"ts": 41, "key": "c", "value": 2},
    {"ts": 47, "key": "b", "value": 1},
    {"ts": 48, "key": "b", "value": 1},
    {"ts": 39, "key": "c", "value": 4},
]
AGGS = "count,sum:value,max:value,avg:value=mean"

WINDOWS = {
    "tumbling": {"kind": "tumbling", "duration_ms": 10_000},
    "hopping": {"kind": "hopping", "duration_ms": 10_000, "hop_ms": 5_000},
    "session": {"kind": "session", "gap_ms": 4_000},
}
LATE = {
    "drop": {"late_data": "drop"},
    "drop-lateness": {"late_data": "drop", "lateness_ms": 3_000},
    "reopen": {"late_data": "reopen", "allowed_lateness_ms": 10_000},
    "dlq": {"late_data": "dlq"},
}


def _flags(options):
    return [x for k, v in options.items() for x in (f"--{k.replace('_', '-')}", str(v))]


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _write(tmp_path, events, name="log.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"events": events}))
    return path


def _value(text):
    """A table cell as a comparable value: numbers as floats, the rest as text."""
    try:
        return float(text)
    except ValueError:
        return text


def _batches(table):
    """Parse a window table into ``[(first cells, [output row dict, ...]), ...]`` per batch."""
    lines = table.splitlines()
    header = [h.strip() for h in lines[0].split(" | ")]
    batches = []
    for line in lines[2:]:
        cells = dict(zip(header, (c.strip() for c in line.split(" | ")), strict=True))
        if cells["ts"]:
            batches.append((cells, []))
        if cells["window"]:
            row = {k: v for k, v in cells.items() if k not in ("ts", "event", "wm")}
            batches[-1][1].append(row)
    return header, batches


def _expected(row, columns):
    """The oracle's row as the table shows it: window bounds in seconds after BASE."""
    if row.get("_dead_letter"):
        return {"window": "dead letter: late"}
    secs = [int((row[c] - BASE).total_seconds()) for c in ("window_start", "window_end")]
    out = {"window": f"[{secs[0]}, {secs[1]})"}
    for c in columns:
        v = row[c]
        if isinstance(v, bool) or v is None:
            out[c] = "null" if v is None else str(v).lower()
        else:  # the table rounds floats to 6 decimals
            out[c] = round(float(v), 6) if isinstance(v, int | float) else v
    return out


@pytest.mark.parametrize("arrival", ["ts", "file"])
@pytest.mark.parametrize("late", list(LATE))
@pytest.mark.parametrize("kind", list(WINDOWS))
def test_window_table_matches_the_oracle_batch_by_batch(tmp_path, capsys, kind, late, arrival):
    options = {**WINDOWS[kind], **LATE[late]}
    path = _write(tmp_path, EVENTS)
    code, out, err = _run(capsys, "explain", path, "--operator", "window", "--agg", AGGS,
                          "--arrival", arrival, *_flags(options))
    assert code == 0, err
    header, batches = _batches(out)

    events = EVENTS if arrival == "file" else sorted(EVENTS, key=lambda e: e["ts"])
    spec = Window(group_by=["key"], event_time_column="ts", max_groups_per_window=100,
                  aggregations=[Aggregation(agg="count", as_="count"),
                                Aggregation(agg="sum", column="value", as_="sum_value"),
                                Aggregation(agg="max", column="value", as_="max_value"),
                                Aggregation(agg="avg", column="value", as_="mean")],
                  **options)
    log = [WindowBatch(rows=({**e, "ts": BASE + dt.timedelta(seconds=e["ts"])},))
           for e in events]
    oracle = oracle_window(spec, log, columns=["key", "value", "ts"])

    columns = [c for c in oracle.output_columns
               if c not in ("window_start", "window_end", "_dead_letter")]
    assert header[4:] == columns
    assert len(batches) == oracle.num_batches
    assert [cells["ts"] for cells, _ in batches[: len(events)]] == [str(e["ts"]) for e in events]
    assert all(cells["ts"] == "(no-data batch)" for cells, _ in batches[len(events):])
    shown_any = False
    for b, (_, rows) in enumerate(batches):
        shown = sorted(json.dumps({k: _value(v) for k, v in r.items() if v}, sort_keys=True)
                        for r in rows)
        want = sorted(json.dumps({k: v for k, v in _expected(r, columns).items()
                                  if v not in ("", None)}, sort_keys=True)
                      for r in oracle.rows_for_batch(b))
        assert shown == want, (b, out)
        shown_any = shown_any or bool(rows)
    assert shown_any, out
    if (kind, late, arrival) == ("session", "reopen", "file"):
        assert any(r["retracted"] == "true" for _, rows in batches for r in rows), out


def test_reopen_shows_revision_1_for_a_late_event(tmp_path, capsys):
    events = [{"ts": 3, "key": "k1", "value": 5}, {"ts": 12, "key": "k1", "value": 2},
              {"ts": 15, "key": "k1", "value": 1}, {"ts": 4, "key": "k1", "value": 1}]
    path = _write(tmp_path, events)
    code, out, err = _run(capsys, "explain", path, "--operator", "window", "--kind", "tumbling",
                          "--duration-ms", "10000", "--agg", "count,sum:value", "--arrival",
                          "file", "--late-data", "reopen", "--allowed-lateness-ms", "10000")
    assert code == 0, err
    header, batches = _batches(out)
    assert header[-2:] == ["revision", "retracted"]
    in_first = [e for e in events if e["ts"] < 10]
    # The window [0, 10) closes when the event at ts 15 arrives (revision 0, without the late
    # event), and the late event at ts 4 reopens it: revision 1 with every event in it.
    (first, rows_at_15), (late, rows_at_4) = batches[2], batches[3]
    assert first["ts"] == "15" and late["ts"] == "4"
    assert rows_at_15 == [{"window": "[0, 10)", "key": "k1", "count": str(len(in_first) - 1),
                           "sum_value": str(sum(e["value"] for e in in_first[:-1])),
                           "revision": "0", "retracted": "false"}]
    assert rows_at_4 == [{"window": "[0, 10)", "key": "k1", "count": str(len(in_first)),
                          "sum_value": str(sum(e["value"] for e in in_first)),
                          "revision": "1", "retracted": "false"}]


def test_iso_timestamps_show_iso_window_bounds(tmp_path, capsys):
    events = [{"ts": "2026-03-01T10:00:03Z", "key": "a", "value": 1},
              {"ts": "2026-03-01T10:00:14+00:00", "key": "a", "value": 2}]
    path = _write(tmp_path, events)
    code, out, err = _run(capsys, "explain", path, "--operator", "window", "--kind", "tumbling",
                          "--duration-ms", "10000")
    assert code == 0, err
    _, batches = _batches(out)
    assert batches[-1][0]["ts"] == "(no-data batch)"
    assert batches[-1][1] == [{"window": "[2026-03-01T10:00:00, 2026-03-01T10:00:10)",
                               "key": "a", "count": "1"}]


def test_join_explain_is_unchanged_by_the_operator_switch(tmp_path, capsys):
    events = [{"side": "left", "ts": 3, "key": "k", "value": "A"},
              {"side": "right", "ts": 4, "key": "k", "value": "a"}]
    path = _write(tmp_path, events)
    _, default, _ = _run(capsys, "explain", path, "--time-window-ms", "15000")
    code, explicit, err = _run(capsys, "explain", path, "--operator", "join",
                               "--time-window-ms", "15000")
    assert code == 0, err
    assert default == explicit and "A - a" in default


MALFORMED = [
    # (file text, operator, what the message must name)
    ("{not json", "join", ["log.json", "not JSON"]),
    (json.dumps({"evts": []}), "join", ["`events`"]),
    (json.dumps({"events": {"ts": 1}}), "join", ["`events`", "list"]),
    (json.dumps({"events": "x"}), "window", ["`events`", "list"]),
    (json.dumps({"events": [{"ts": 1, "side": "left"}, {"side": "right"}]}), "join",
     ["event 1", "`ts`"]),
    (json.dumps({"events": [{"ts": 1}, {"ts": 2}, {"side": "left", "key": 1}]}), "window",
     ["event 2", "`ts`"]),
    (json.dumps({"events": [{"ts": 1, "side": "left"}, {"ts": 2, "side": "right"}, {"ts": 3}]}),
     "join", ["event 2", "`side`"]),
    (json.dumps({"events": [{"ts": 1, "side": "up"}]}), "join", ["event 0", "`side`"]),
    (json.dumps({"events": [{"ts": 1, "key": "a"}, {"ts": 2, "side": "left"}]}), "window",
     ["event 1", "`side`"]),
    (json.dumps({"events": [{"ts": "noon", "side": "left"}]}), "join", ["event 0", "`ts`"]),
    (json.dumps({"events": [{"ts": 1}, 7]}), "window", ["event 1"]),
]


@pytest.mark.parametrize(("text", "operator", "names"), MALFORMED)
def test_a_malformed_log_gives_a_one_line_error(tmp_path, capsys, text, operator, names):
    (tmp_path / "log.json").write_text(text)
    args = ["--time-window-ms", "1000"] if operator == "join" else [
        "--kind", "tumbling", "--duration-ms", "1000"]
    code, out, err = _run(capsys, "explain", tmp_path / "log.json", "--operator", operator, *args)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("interlace: "), err
    assert "Traceback" not in err
    for name in names:
        assert name in err, err


def test_options_of_the_other_operator_are_refused(tmp_path, capsys):
    path = _write(tmp_path, EVENTS)
    code, _, err = _run(capsys, "explain", path, "--operator", "window", "--kind", "tumbling",
                        "--duration-ms", "10000", "--how", "inner")
    assert code == 2 and "--how" in err and "window" in err
    code, _, err = _run(capsys, "explain", path, "--operator", "window", "--duration-ms", "10")
    assert code == 2 and "--kind" in err
    code, _, err = _run(capsys, "explain", path, "--operator", "window", "--kind", "tumbling",
                        "--duration-ms", "10000", "--group-by", "user")
    assert code == 2 and "`user`" in err


def _subcommands():
    parser = _parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


@pytest.mark.parametrize("command", list(_subcommands()))
def test_help_describes_every_argument(capsys, command):
    parser = _subcommands()[command]
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    squeezed = "".join(out.split())
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = action.option_strings[0] if action.option_strings else action.dest
        assert action.help and action.help != argparse.SUPPRESS, (command, name)
        at = squeezed.index(name, squeezed.index("arguments:") if not action.option_strings
                            else 0)
        assert "".join(action.help.split()) in squeezed[at:], (command, name)


def test_explain_help_documents_the_log_format_with_examples_that_run(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = capsys.readouterr().out
    assert "log format" in out and '"ts"' in out and '"side"' in out
    # The epilog's example logs are valid: run the window one with its command line.
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("window example"))
    text = " ".join(line.strip() for line in lines[start + 1:] if line.strip())
    log_text, command = text.split("interlace explain ")
    (tmp_path / "win.json").write_text(log_text)
    argv = ["explain", *command.replace("\\", " ").split()]
    code = main([str(tmp_path / a) if a == "win.json" else a for a in argv])
    out = capsys.readouterr().out
    assert code == 0
    assert any(line.split(" | ")[-2].strip() == "1" for line in out.splitlines()[2:])
