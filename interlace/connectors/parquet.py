"""Parquet: a folder of files, one sub-folder per micro-batch (idempotent on replay)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ParquetTarget", "target"]


@dataclass
class ParquetTarget:
    """A folder of Parquet files, one sub-folder per micro-batch (idempotent on replay).

    Every file has the output's schema, also when the batch is empty, with timestamps as
    Spark writes ``TimestampType`` (microseconds, adjusted to UTC), so the folder reads back
    whole with ``spark.read.parquet(path)``, ``pandas.read_parquet(path)`` and DuckDB's
    ``read_parquet('path/*/*.parquet')`` (each adds the ``batch_id`` partition column).
    """

    path: Path
    written: dict[int, int] = field(default_factory=dict)
    arrow_schema: Any = None

    def prepare(self, schema: Any) -> None:
        """Create the folder and fix the files' Arrow schema from the output's Spark schema."""
        from interlace.operators.common.arrow import arrow_schema_for

        self.path.mkdir(parents=True, exist_ok=True)
        self.arrow_schema = arrow_schema_for(schema, timestamp_unit="us", timestamp_tz="UTC")

    def write(self, pdf: Any, batch_id: int) -> int:
        """Write one micro-batch to ``batch_id=N/part.parquet`` (replaces a previous attempt)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        folder = self.path / f"batch_id={batch_id}"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / "part.parquet.tmp"
        table = pa.Table.from_pandas(pdf, schema=self.arrow_schema, preserve_index=False)
        pq.write_table(table, tmp)
        tmp.replace(folder / "part.parquet")
        self.written[batch_id] = len(pdf)
        return len(pdf)



def target(spec: Any, ctx: Any) -> ParquetTarget:
    """The ``[target] kind = "parquet"`` of a pipeline."""
    path = Path(spec.path)
    return ParquetTarget(path if path.is_absolute() else ctx.base / path)
