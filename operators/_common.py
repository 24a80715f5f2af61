"""Helpers shared by every operator family: reserved names, literals, input checks."""

from __future__ import annotations

import gc
import os
import sys
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import pyarrow as pa
from interlace.operators.errors import ConfigError
from pyspark.sql import DataFrame
from pyspark.sql import types as T

#: Every internal working column starts with this prefix; user columns may not.
RESERVED_PREFIX = "__il_"
#: The dead-letter column added under ``late_data="dlq"`` (SEMANTICS §4).
DEAD_LETTER_COLUMN = "_dead_letter"
#: Default horizon under ``late_data="dlq"``: how far behind the watermark a late row may be
#: and still reach the operator to be dead-lettered (one day).
DEFAULT_DLQ_HORIZON_MS = 86_400_000

LateData = Literal["drop", "reopen", "dlq"]
"""What happens to a late row.

* ``"drop"``: discarded and counted.
* ``"reopen"``: accepted while within ``allowed_lateness_ms``; past that, dropped and counted.
* ``"dlq"``: sent to the dead-letter column ``_dead_letter`` (SEMANTICS §4).
"""

TimeMode = Literal["event", "processing"]
"""Where event time comes from.

* ``"event"``: a ``TimestampType`` column of the input.
* ``"processing"``: the micro-batch's ``current_timestamp()``.
"""


#: Environment variable of the Python workers: ``0`` keeps their garbage collector untouched
#: (:func:`freeze_worker_gc`). On a cluster: ``spark.executorEnv.INTERLACE_WORKER_GC_FREEZE=0``.
WORKER_GC_FREEZE_ENV = "INTERLACE_WORKER_GC_FREEZE"
_worker_gc_done = False


def freeze_worker_gc() -> bool:
    """Once per PySpark Python worker: collect, then freeze what is alive (``gc.freeze()``).

    A reused PySpark worker runs a full ``gc.collect()`` after every task (``pyspark/daemon.py``)
    and Python runs more full collections as the operators allocate; each walks every object
    the worker's imports left behind (pandas, pyarrow, pyspark, interlace). On the join
    benchmark: 40 full collections, 1.8 CPU-s per run (about 45 ms each), 40 % of the Python
    workers' CPU (docs/performance.md, "Worker garbage collection"). Frozen objects stay
    where they are and are still freed by reference counting; the cycle collector merely stops
    re-examining them, so only a reference cycle that was already alive at the first call and
    dies later is never reclaimed (bounded: once per worker process).

    Does nothing outside a PySpark worker (``pyspark.worker`` not imported: the driver, the
    local runner, tests) or when the environment variable ``INTERLACE_WORKER_GC_FREEZE`` is
    ``0``. Returns whether it froze now.
    """
    global _worker_gc_done
    if _worker_gc_done:
        return False
    _worker_gc_done = True
    if "pyspark.worker" not in sys.modules or os.environ.get(WORKER_GC_FREEZE_ENV) == "0":
        return False
    gc.collect()
    gc.freeze()
    return True


#: The pandas 2.x deprecation PySpark's own ``applyInPandasWithState`` worker code triggers.
PYSPARK_PADDING_WARNING = "The behavior of DataFrame concatenation with empty or all-NA entries"
_worker_warnings_done = False


def quiet_worker_warnings() -> bool:
    """Once per PySpark Python worker: ignore the FutureWarning PySpark's padding triggers.

    PySpark 4.3's ``applyInPandasWithState`` worker (``construct_record_batch`` in
    ``pyspark/worker.py``) pads every Arrow batch it sends back with an object-typed frame
    (``dict.fromkeys(columns)``) and concatenates it with the function's output; pandas 2.x
    then warns ``The behavior of DataFrame concatenation with empty or all-NA entries is
    deprecated`` once per worker process, whatever the function yields, because excluding the
    padding keeps the float and timestamp columns' dtypes. The filter matches only that
    message (interlace's own concatenations never raise it: they pass no empty or all-NA
    frames). Does nothing outside a PySpark worker.
    Returns whether it installed the filter now.
    """
    global _worker_warnings_done
    if _worker_warnings_done:
        return False
    _worker_warnings_done = True
    if "pyspark.worker" not in sys.modules:
        return False
    warnings.filterwarnings("ignore", message=PYSPARK_PADDING_WARNING, category=FutureWarning)
    return True


def guard_source_checkout(spark: Any) -> None:
    """Make sure Spark's local Python workers import the installed interlace, not a checkout.

    PySpark starts its workers with ``python -m pyspark.daemon`` in the driver's working
    directory, so Python puts that directory first on their ``sys.path``. Run from the root of
    an interlace source checkout with a regular (non-editable) install, the checkout's
    ``interlace/`` folder (which has no ``operators`` subpackage: that lives in ``operators/``)
    would shadow the installed package and every task would fail with ``No module named
    'interlace.operators'``. When the working directory holds an ``interlace`` package that is
    not the one this driver imported, the workers get ``PYTHONSAFEPATH=1`` (Python 3.11+: the
    working directory is not put on ``sys.path``); on Python 3.10 this raises
    :class:`ConfigError` saying what to do. Does nothing over Spark Connect (no SparkContext).
    """
    shadow = Path.cwd() / "interlace" / "__init__.py"
    if not shadow.is_file():
        return
    import interlace

    if shadow.resolve().parent == Path(interlace.__file__).resolve().parent:
        return  # the checkout *is* the imported package (editable install): workers agree
    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect: the workers run beside the server, not here
        return
    if sys.version_info >= (3, 11):
        sc.environment["PYTHONSAFEPATH"] = "1"
        return
    msg = (
        f"the current directory {Path.cwd()} holds interlace's source folder `interlace/`, "
        "which would shadow the installed interlace in Spark's Python workers (No module "
        "named 'interlace.operators'); run from another directory, or install the checkout "
        "in editable mode: pip install -e ."
    )
    raise ConfigError(msg)


def is_connect(obj: object) -> bool:
    """Whether ``obj`` (a SparkSession or DataFrame) is a Spark Connect client object.

    By type, not by :func:`pyspark.sql.utils.is_remote` (a process-wide flag), and without
    importing ``pyspark.sql.connect`` (which needs the ``connect`` extra).
    """
    return type(obj).__module__.startswith("pyspark.sql.connect.")


def require_classic(obj: object, feature: str, instead: str) -> None:
    """Raise :class:`ConfigError` naming ``feature`` if ``obj`` belongs to Spark Connect."""
    if is_connect(obj):
        msg = (
            f"{feature} needs a classic SparkSession: Spark Connect clients have no "
            f"SparkContext, hence no accumulators. {instead} (docs/deploy.md, \"Spark Connect\")"
        )
        raise ConfigError(msg)


def check_counters(df: object, counters: object) -> None:
    """Raise :class:`ConfigError` if ``counters`` is given with a Spark Connect ``df``."""
    if counters is not None:
        require_classic(
            df,
            "`counters` (a SparkContext accumulator)",
            "Leave `counters` unset over Spark Connect; the query progress still counts the rows "
            "Spark dropped (interlace.metrics.spark_dropped_rows)",
        )


def check_literal(field: str, value: object, alias: Any) -> None:
    """Raise :class:`ConfigError` unless ``value`` is one of the ``Literal`` ``alias`` values."""
    allowed = get_args(alias)
    if value not in allowed:
        msg = f"`{field}` must be one of {', '.join(map(repr, allowed))} (got {field}={value!r})"
        raise ConfigError(msg)


def check_int(
    field: str, value: object, *, minimum: int | None = None, allow_none: bool = False
) -> None:
    """Raise :class:`ConfigError` unless ``value`` is an int (>= ``minimum``)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"`{field}` must be an int number of milliseconds (got {field}={value!r})"
        raise ConfigError(msg)
    if minimum is not None and value < minimum:
        msg = f"`{field}` must be >= {minimum} (got {field}={value})"
        raise ConfigError(msg)


def as_name_tuple(field: str, value: object, *, allow_none: bool = False) -> tuple[str, ...] | None:
    """Normalise a column-name list to a tuple of str, rejecting a bare string."""
    if value is None and allow_none:
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        msg = f'`{field}` must be a list of column names (got {field}={value!r}); e.g. ["id"]'
        raise ConfigError(msg)
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            msg = f"`{field}` must hold non-empty column names (got {name!r} in {list(names)})"
            raise ConfigError(msg)
    return names


def require_streaming(df: DataFrame, what: str) -> None:
    """Raise unless ``df`` is a streaming DataFrame."""
    if not df.isStreaming:
        msg = (
            f"{what} must be a streaming DataFrame (spark.readStream...), got a batch DataFrame; "
            "use Spark's batch operators for batch data"
        )
        raise ConfigError(msg)


def require_columns(df: DataFrame, names: Sequence[str], field: str, what: str) -> None:
    """Raise naming ``field`` if any of ``names`` is not a column of ``df``."""
    have = set(df.columns)
    missing = [n for n in names if n not in have]
    if missing:
        msg = (
            f"`{field}` names column(s) {missing} absent from {what} (its columns: {df.columns}); "
            "fix the name or select the column first"
        )
        raise ConfigError(msg)


def reject_reserved(df: DataFrame, what: str) -> None:
    """Raise if ``df`` has a column using interlace's reserved prefix."""
    bad = [c for c in df.columns if c.startswith(RESERVED_PREFIX)]
    if bad:
        msg = (
            f"{what} has column(s) {bad} starting with the reserved prefix {RESERVED_PREFIX!r}; "
            "rename them before passing the DataFrame to interlace"
        )
        raise ConfigError(msg)


def check_event_time(df: DataFrame, column: str, field: str, what: str) -> None:
    """Check that ``column`` is a timestamp without a watermark already set on it."""
    require_columns(df, [column], field, what)
    f = df.schema[column]
    if not isinstance(f.dataType, T.TimestampType):
        hint = (
            f"F.col({column!r}).cast('timestamp')"
            if isinstance(f.dataType, T.TimestampNTZType)
            else "F.to_timestamp(...) or F.timestamp_micros(...)"
        )
        msg = (
            f"`{field}` column {column!r} of {what} must be a TimestampType column (Spark's "
            f"withWatermark needs one), got {f.dataType.simpleString()}; convert it, e.g. {hint}"
        )
        raise ConfigError(msg)
    for g in df.schema.fields:
        if "spark.watermarkDelayMs" in (g.metadata or {}):
            msg = (
                f"{what} already carries a watermark on column {g.name!r}; interlace owns "
                "withWatermark (it sets the delay from `lateness_ms` and `late_data`); "
                "remove your withWatermark call and set `lateness_ms` instead"
            )
            raise ConfigError(msg)


def arrow_schema_for(
    schema: T.StructType, *, timestamp_unit: str = "ns", timestamp_tz: str | None = None
) -> pa.Schema:
    """Return the Arrow schema matching what Spark hands pandas for ``schema``.

    Timestamps arrive in pandas as naive ``datetime64[ns]`` in the session time zone, so by
    default they are kept naive here and round-trip unchanged. For files other tools read,
    ``timestamp_unit="us", timestamp_tz="UTC"`` gives what Spark itself writes for
    ``TimestampType`` (``TimestampNTZType`` stays naive).
    """
    from pyspark.sql.pandas.types import to_arrow_type

    fields = []
    for f in schema.fields:
        if isinstance(f.dataType, T.TimestampType):
            at: pa.DataType = pa.timestamp(timestamp_unit, tz=timestamp_tz)
        elif isinstance(f.dataType, T.TimestampNTZType):
            at = pa.timestamp(timestamp_unit)
        else:
            at = to_arrow_type(f.dataType)
        fields.append(pa.field(f.name, at, nullable=True))
    return pa.schema(fields)


def check_late_data_fields(
    late_data: str,
    lateness_ms: object,
    allowed_lateness_ms: object,
    dlq_horizon_ms: object,
    allowance_ms: int,
) -> None:
    """Validate the late-data fields shared by every operator spec (SEMANTICS §1, §6).

    Args:
        late_data: The (already checked) policy.
        lateness_ms: ``lateness_ms`` as given.
        allowed_lateness_ms: ``allowed_lateness_ms`` as given.
        dlq_horizon_ms: ``dlq_horizon_ms`` as given.
        allowance_ms: The resolved allowance ``AL`` (reopen: the allowed lateness, else 0).
    """
    check_int("lateness_ms", lateness_ms, minimum=0)
    check_int("allowed_lateness_ms", allowed_lateness_ms, allow_none=True)
    check_int("dlq_horizon_ms", dlq_horizon_ms, minimum=1)
    if late_data == "reopen" and allowance_ms <= 0:
        msg = (
            "`allowed_lateness_ms` must be > 0 under late_data='reopen' (got "
            f"allowed_lateness_ms={allowed_lateness_ms}, lateness_ms={lateness_ms}); "
            "set allowed_lateness_ms, or use late_data='drop'"
        )
        raise ConfigError(msg)
    if late_data != "reopen" and allowed_lateness_ms is not None:
        msg = (
            f"`allowed_lateness_ms` only applies to late_data='reopen' (got "
            f"late_data={late_data!r}); remove it or set late_data='reopen'"
        )
        raise ConfigError(msg)
