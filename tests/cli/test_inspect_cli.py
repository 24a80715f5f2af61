"""``interlace inspect PIPELINE.toml``: a pipeline's held rows after ``interlace run``, as the
oracle holds them, with the filters, JSON, the text table and the refusals; one subprocess for
the command line itself, the rest in-process on the test session."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pytest
from cli_support import cli, run_here
from test_cli import JOIN_TOML, ORDERS, PAYS, join_log, write_join_inputs

from interlace.cli import main
from interlace.testing.oracle import oracle_join

pytestmark = pytest.mark.spark

EPOCH = dt.datetime(1970, 1, 1)


def us(value: dt.datetime) -> int:
    return (value.replace(tzinfo=None) - EPOCH) // dt.timedelta(microseconds=1)


def iso(micros: int) -> str:
    return (EPOCH + dt.timedelta(microseconds=micros)).isoformat() + "Z"


@pytest.fixture(scope="module")
def held_join(tmp_path_factory, spark):
    """The README-style left join, run without the sentinel that flushes it: rows stay held."""
    from interlace.pipeline import Pipeline

    root = tmp_path_factory.mktemp("inspect")
    log = join_log()[:-1]
    write_join_inputs(root, log)
    (root / "p.toml").write_text(JOIN_TOML)
    run_here(spark, root, "p.toml")
    want = oracle_join(Pipeline.from_toml(JOIN_TOML).join, log, left_columns=ORDERS.names,
                       right_columns=PAYS.names)
    return root, want


def run_inspect(capsys, root: Path, *args: str) -> tuple[int, str, str]:
    import contextlib
    import os

    with contextlib.chdir(root):  # Spark's output goes to .interlace/logs/ of the cwd
        code = main(["inspect", str(root / "p.toml"), *args])
    assert os.path.isfile(root / ".interlace" / "logs" / "p-inspect.log")
    out = capsys.readouterr()
    return code, out.out, out.err


def test_inspect_json_is_what_the_oracle_holds_after_the_last_batch(held_join, capsys):
    root, want = held_join
    code, out, _ = run_inspect(capsys, root, "--json")
    assert code == 0
    (stage,) = json.loads(out)
    summary = stage["summary"]
    assert summary["stage"] == "orders-payments" and summary["operator"] == "join"
    assert summary["batch_id"] == want.num_batches - 1
    assert summary["spark_watermark_ms"] == want.spark_watermarks_ms[-1]
    got = Counter((i["item"], i["key"], i["row"].get("amount", i["row"].get("paid")),
                   i["event_time"], i["releases_at"], i["matched"]) for i in stage["items"])
    held = Counter((f"{h.side} row", f"order_id={h.row['order_id']}",
                    h.row.get("amount", h.row.get("paid")), iso(h.event_time_us),
                    iso(h.close_us), h.matched) for h in want.held[-1])
    assert got == held and sum(held.values()) > 5
    # Unmatched orders of a left join are emitted when released; payments just leave.
    releases = {(i["item"], i["matched"]): i["release"] for i in stage["items"]}
    assert releases.get(("left row", False)) == "emit unmatched"
    assert releases.get(("right row", True)) == "evict (matched)"
    assert summary["items"] == len(stage["items"])
    assert summary["bytes"] == sum(g["bytes"] for g in stage["key_groups"]) > 0
    assert summary["oldest"]["event_time"] == min(i["event_time"] for i in stage["items"])
    # Each input's greatest event time, from the run's idle tracker; no timeout: never idle.
    log = join_log()[:-1]
    assert [(i["name"], i["side"], i["greatest_event_time_us"], i["idle_since_ms"])
            for i in stage["inputs"]] == [
        ("orders", "left", max(us(r["order_ts"]) for b in log for r in b.left), None),
        ("payments", "right", max(us(r["pay_ts"]) for b in log for r in b.right), None)]


def test_filters_narrow_the_items(held_join, capsys):
    root, want = held_join
    some = want.held[-1][0]
    key = f"order_id={some.row['order_id']}"
    _, out, _ = run_inspect(capsys, root, "--json", "--key", str(some.row["order_id"]))
    items = json.loads(out)[0]["items"]
    assert items and {i["key"] for i in items} == {key}
    _, out, _ = run_inspect(capsys, root, "--json", "--key", key)
    assert {i["key"] for i in json.loads(out)[0]["items"]} == {key}
    # --held-longer-than: event time more than that behind wm.
    wm_us = (want.spark_watermarks_ms[-1] + 0) * 1000
    behind = sorted(wm_us - h.event_time_us for h in want.held[-1])
    cut_ms = behind[len(behind) // 2] // 1000
    _, out, _ = run_inspect(capsys, root, "--json", "--held-longer-than", f"{cut_ms}")
    items = json.loads(out)[0]["items"]
    assert len(items) == sum(1 for b in behind if b > cut_ms * 1000)
    _, out, _ = run_inspect(capsys, root, "--json", "--held-longer-than", "1d")
    assert json.loads(out)[0]["items"] == []
    # The text table: the summary line, then one line per item.
    code, out, _ = run_inspect(capsys, root, "--limit", "3")
    assert code == 0
    assert out.startswith("orders-payments (join): batch ")
    assert "\n  input orders (left): greatest event time " in out
    assert "releases_at" in out and f"... {len(want.held[-1]) - 3} more" in out


def test_a_checkpoint_folder_is_inspected_with_the_pipeline_file_its_run_recorded(
        held_join, capsys, tmp_path):
    import contextlib
    import shutil

    from interlace import Pipeline
    from interlace.pipeline.checkpoint import record_pipeline_file

    root, _ = held_join
    _, by_file, _ = run_inspect(capsys, root, "--json")
    copy = tmp_path / "job"  # the record, not the file: edited or moved since, it still reads
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".interlace"))
    record_pipeline_file(Pipeline.load(copy / "p.toml"), copy, copy / "p.toml")  # as run does
    (copy / "p.toml").write_text("not toml any more")
    with contextlib.chdir(copy):
        assert main(["inspect", "out/checkpoint", "--json"]) == 0
    by_folder = capsys.readouterr().out
    strip = lambda out: [{**s, "checkpoint": None, "summary": {**s["summary"], "took_s": 0}}
                         for s in json.loads(out)]
    assert strip(by_folder) == strip(by_file)
    # A folder no run recorded a pipeline file in.
    with contextlib.chdir(copy):
        assert main(["inspect", "in"]) == 2
    err = capsys.readouterr().err
    assert "in is a folder without interlace-pipeline.json" in err
    assert "interlace inspect PIPELINE.toml" in err


def test_refusals_name_the_problem(held_join, capsys):
    root, _ = held_join
    code, _, err = run_inspect(capsys, root, "--operator", "nosuch")
    assert code == 2 and "--operator 'nosuch' names no stage" in err and "orders-payments" in err
    code, _, err = run_inspect(capsys, root, "--held-longer-than", "soon")
    assert code == 2 and "is not a duration" in err
    code, _, err = run_inspect(capsys, root, "--batch", "77")
    assert code == 2 and "micro-batch 77 has no commit" in err


def test_the_command_line_prints_the_table(held_join):
    root, want = held_join
    proc = cli("inspect", "p.toml", "--key", str(want.held[-1][0].row["order_id"]), cwd=root)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("orders-payments (join): batch ")
    assert any("emit unmatched" in line or "evict" in line for line in lines[1:])
    assert proc.stderr.count("\n") <= 3, proc.stderr
