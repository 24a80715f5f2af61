"""``foreachBatch`` helpers: normal rows and dead letters to two targets in one query.

Under ``late_data="dlq"`` an operator's output has a ``_dead_letter`` string column (SEMANTICS
§4): null on normal rows; on a dead-letter row every other column is null and ``_dead_letter``
holds the JSON letter. :func:`split_dead_letters` returns a ``foreachBatch`` function that
sends the normal rows (without ``_dead_letter``) to one writer and the letters to another,
in the same micro-batch::

    def to_table(df, batch_id): df.write.mode("append").saveAsTable("clicks_per_minute")
    def to_dlq(df, batch_id): df.write.mode("append").json("/data/dlq/clicks")

    out.writeStream.foreachBatch(split_dead_letters(to_table, to_dlq)).start()

The dead-letter frame has two columns: ``batch_id`` and ``dead_letter`` (the JSON string).
Both writers get the batch id, so idempotent targets can dedupe a replayed batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from interlace.operators.common.names import DEAD_LETTER_COLUMN

__all__ = ["split_dead_letters"]

BatchWriter = Callable[[Any, int], None]


def split_dead_letters(normal: BatchWriter, dead_letters: BatchWriter) -> BatchWriter:
    """Return a ``foreachBatch`` function writing normal rows and dead letters separately.

    Args:
        normal: ``(DataFrame, batch_id) -> None`` for the normal rows (``_dead_letter``
            dropped).
        dead_letters: ``(DataFrame, batch_id) -> None`` for the letters (columns
            ``batch_id``, ``dead_letter``).

    Returns:
        The function to pass to ``writeStream.foreachBatch``.
    """
    from pyspark.sql import functions as F

    def write(df: Any, batch_id: int) -> None:
        if DEAD_LETTER_COLUMN not in df.columns:
            msg = (
                f"the output has no {DEAD_LETTER_COLUMN!r} column; split_dead_letters only "
                "applies to operators built with late_data='dlq'"
            )
            raise ValueError(msg)
        df = df.persist()
        try:
            normal(df.filter(F.col(DEAD_LETTER_COLUMN).isNull()).drop(DEAD_LETTER_COLUMN), batch_id)
            letters = df.filter(F.col(DEAD_LETTER_COLUMN).isNotNull()).select(
                F.lit(batch_id).cast("long").alias("batch_id"),
                F.col(DEAD_LETTER_COLUMN).alias("dead_letter"),
            )
            dead_letters(letters, batch_id)
        finally:
            df.unpersist()

    return write
