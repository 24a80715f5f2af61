"""Console: each micro-batch's rows printed (debugging)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConsoleTarget", "target"]


@dataclass
class ConsoleTarget:
    """Prints each micro-batch's rows: SQL NULL as ``NULL``, integer columns as integers."""

    label: str = "output"
    max_rows: int = 20
    written: dict[int, int] = field(default_factory=dict)
    integral: tuple[str, ...] = ()

    def prepare(self, schema: Any) -> None:
        """Remember the integer columns (``toPandas`` turns them to float when NULLs occur)."""
        from pyspark.sql import types as T

        ints = (T.LongType, T.IntegerType, T.ShortType, T.ByteType)
        self.integral = tuple(f.name for f in schema.fields if isinstance(f.dataType, ints))

    def write(self, pdf: Any, batch_id: int) -> int:
        """Print up to ``max_rows`` rows of the batch."""
        if len(pdf):
            print(f"-- {self.label}, batch {batch_id}: {len(pdf)} rows")
            print(self.render(pdf.head(self.max_rows)))
        self.written[batch_id] = len(pdf)
        return len(pdf)

    def render(self, pdf: Any) -> str:
        """Return ``pdf`` as text the way SQL shows it: ``NULL`` for every missing value."""
        shown = pdf.copy()
        for c in self.integral:
            if c in shown.columns:
                shown[c] = shown[c].astype("Int64")
        shown = shown.astype(object).where(shown.notna(), "NULL")
        return str(shown.to_string(index=False))



def target(spec: Any, ctx: Any) -> ConsoleTarget:
    """The ``[target] kind = "console"`` of a pipeline."""
    return ConsoleTarget(label=ctx.default_table)
