"""Files and Spark's built-in sources: Parquet, JSON and CSV folders, and ``rate``.

A file source reads a folder with Spark's ``readStream`` (its ``format``, ``options`` and
``schema``; one file per micro-batch unless ``maxFilesPerTrigger`` says otherwise: Spark orders
new files by modification time). JSON and CSV sources in Spark's default PERMISSIVE mode read
with a :data:`CORRUPT_RECORD` column: a record with a field Spark cannot parse keeps its raw
text there (its bad fields are NULL), counted as ``malformed`` and carried into dead letters.
``rate`` is Spark's load generator (``timestamp``, ``value``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["CORRUPT_RECORD", "read", "tracks_malformed"]

#: The column that holds a record Spark could not parse in full (PERMISSIVE mode).
CORRUPT_RECORD = "_corrupt_record"


def tracks_malformed(src: Any) -> bool:
    """Whether a JSON / CSV source gets :data:`CORRUPT_RECORD` (PERMISSIVE mode)."""
    opts = {k.lower(): str(v) for k, v in dict(src.options or {}).items()}
    return (
        src.format in ("json", "csv")
        and bool(src.schema)
        and opts.get("mode", "PERMISSIVE").upper() == "PERMISSIVE"
        and "columnnameofcorruptrecord" not in opts
    )


def read(spark: Any, src: Any, base: Path) -> Any:
    """The streaming DataFrame of a file or ``rate`` source (before its ``sql`` pre-stage)."""
    reader = spark.readStream.format(src.format)
    opts = dict(src.options or {})
    if src.format in ("parquet", "json", "csv") and "maxFilesPerTrigger" not in opts:
        opts["maxFilesPerTrigger"] = "1"
    if opts:
        reader = reader.options(**{k: str(v) for k, v in opts.items()})
    if src.schema:
        schema = src.schema
        if tracks_malformed(src):
            # Spark's PERMISSIVE mode turns a field it cannot parse into NULL; with this column
            # it also keeps the raw record, which dead letters then carry (issue 11).
            schema = f"{schema}, {CORRUPT_RECORD} STRING"
            reader = reader.option("columnNameOfCorruptRecord", CORRUPT_RECORD)
        reader = reader.schema(schema)
    if src.path:
        path = Path(src.path)
        return reader.load(str(path if path.is_absolute() else base / path))
    return reader.load()
