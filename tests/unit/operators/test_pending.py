"""``schedule_pending_no_data_batch`` on checkpoint folders written by hand (no Spark).

Spark's offset log entry of batch ``n``: ``v1``, the metadata JSON (``batchWatermarkMs``,
``batchTimestampMs``, ``conf``), one offset per source; its commit: ``v1`` and
``{"nextBatchWatermarkMs": ...}``. ``tests/replay/test_pending_no_data.py`` runs Spark on it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlace import schedule_pending_no_data_batch

CONF = {"spark.sql.streaming.multipleWatermarkPolicy": "min"}


def checkpoint(root: Path, batches: list[tuple[int, int | None]], sources=('{"logOffset":3}', "-")):
    """Batches ``(watermark, next watermark or None: not committed)``, numbered from 0."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for n, (wm, nxt) in enumerate(batches):
        meta = {"batchWatermarkMs": wm, "batchTimestampMs": 1_000 + n, "conf": CONF}
        (root / "offsets" / str(n)).write_text("\n".join(["v1", json.dumps(meta), *sources]))
        (root / "offsets" / f".{n}.crc").write_text("crc")
        if nxt is not None:
            (root / "commits" / str(n)).write_text(f'v1\n{{"nextBatchWatermarkMs":{nxt}}}')
    return root


def test_a_committed_batch_whose_watermark_moved_gets_its_no_data_batch(tmp_path: Path) -> None:
    root = checkpoint(tmp_path / "c", [(0, 5_000), (5_000, 30_000)])
    assert schedule_pending_no_data_batch(root) == 2
    lines = (root / "offsets" / "2").read_text().split("\n")
    assert lines[0] == "v1" and lines[2:] == ['{"logOffset":3}', "-"]  # the same offsets
    meta = json.loads(lines[1])
    assert meta["batchWatermarkMs"] == 30_000 and meta["conf"] == CONF
    assert meta["batchTimestampMs"] > 1_001  # now, never before the last batch's
    assert sorted(p.name for p in (root / "offsets").iterdir()) == [".0.crc", ".1.crc",
                                                                    "0", "1", "2"]
    assert schedule_pending_no_data_batch(root) is None  # planned, not committed: Spark's now
    assert schedule_pending_no_data_batch(f"file:{root}") is None


@pytest.mark.parametrize(("batches", "why"), [
    ([], "a fresh checkpoint"),
    ([(0, 0)], "the watermark did not move"),
    ([(5_000, 5_000)], "its no-data batch ran (or none was due)"),
    ([(0, 5_000), (5_000, None)], "a planned batch Spark reruns itself"),
])
def test_nothing_is_written_when_nothing_is_owed(tmp_path: Path, batches, why) -> None:
    root = checkpoint(tmp_path / "c", batches)
    before = sorted(p.name for p in (root / "offsets").iterdir())
    assert schedule_pending_no_data_batch(root) is None, why
    assert sorted(p.name for p in (root / "offsets").iterdir()) == before


def test_unknown_logs_and_other_file_systems_are_left_alone(tmp_path: Path) -> None:
    assert schedule_pending_no_data_batch(tmp_path / "nothing-here") is None
    assert schedule_pending_no_data_batch("s3a://bucket/checkpoint") is None
    root = checkpoint(tmp_path / "v2", [(0, 5_000)])
    (root / "commits" / "0").write_text('v2\n{"nextBatchWatermarkMs":5000}')
    assert schedule_pending_no_data_batch(root) is None
    root = checkpoint(tmp_path / "garbled", [(0, 5_000)])
    (root / "offsets" / "0").write_text("v1\n{not json")
    assert schedule_pending_no_data_batch(root) is None
    assert not (root / "offsets" / "1").exists()


def test_no_data_batches_turned_off_in_the_session_are_respected(tmp_path: Path) -> None:
    class Conf:
        def __init__(self, value: str) -> None:
            self.value = value

        def get(self, key: str, default: str) -> str:
            assert key == "spark.sql.streaming.noDataMicroBatches.enabled"
            return self.value

    class Session:
        def __init__(self, value: str) -> None:
            self.conf = Conf(value)

    root = checkpoint(tmp_path / "c", [(0, 5_000)])
    assert schedule_pending_no_data_batch(root, Session("false")) is None
    assert schedule_pending_no_data_batch(root, Session("true")) == 1
