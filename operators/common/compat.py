"""Every difference between the Python, PySpark, pyarrow and pandas lines interlace supports.

The one place that knows them (docs/deploy.md, "PySpark lines"): the rest of interlace calls
these functions and never looks at a version. Each difference is found by feature detection
(does the function take this keyword, does the class have this method), cached per process;
the only version comparisons are the ones that decide support itself
(:func:`require_supported_pyspark`), since "too old" has no feature to detect.

Differences handled here:

* ``typing.override``: in the standard library from Python 3.12.
* ``pyspark.sql.pandas.types.to_arrow_type``: takes ``timezone=`` from PySpark 4.3 only
  (:func:`spark_to_arrow_type`). Before it, a ``TimestampType`` maps to UTC microseconds, the
  same type 4.3 gives for ``timezone="UTC"``.
* ``pyarrow.Table.to_pylist(maps_as_pydicts=...)``: missing in pyarrow 17, and pyarrow 21 leaves
  maps nested in a map's values as pairs: :func:`to_pylist` turns every map into a dict itself
  (the last value of a repeated key wins, as pyarrow's ``"lossy"``).
* A query's progress: plain dicts (3.5), ``StreamingQueryProgress`` objects holding each
  source's offsets as Python ``str()`` of a dict (4.0: ``"{'logOffset': 0}"``, ``"None"``) or as
  JSON text (4.3). :func:`progress_json` reads each as Spark's own JSON, :func:`source_offset`
  reads an offset.
* ``spark.conf.getAll``: from PySpark 4.0 (:func:`conf_items`); before, the settings come from
  ``SET``.
* Rows read per micro-batch: PySpark 3.5's progress reports 0 for every file source of a
  plan whose leaves its ``ProgressReporter`` cannot pair with the sources (interlace's joins);
  ``interlace run`` counts each source's rows in the plan too (``observe``, column
  :data:`OBSERVED_ROWS`), and :func:`with_observed_input_rows` puts them in where Spark has none.
* PySpark 3.5, 4.0 and 4.1's Python workers call ``importlib.invalidate_caches()`` at every
  task (``setup_spark_files``; in 3.5 ``worker.main``), which on Python 3.10+ re-reads the
  directory of every zip on ``sys.path`` (``pyspark.zip``, py4j's): from 4.2 they call it only
  when the task added a path.
  :func:`pyspark_invalidates_import_caches_every_task` tells which kind this PySpark is
  (``operators/common/worker.py`` then does what 4.2 does).
* PySpark 3.5's ``applyInPandasWithState`` serializer with pyarrow >= 26 fails inside PySpark's
  own worker, and its Arrow code imports ``distutils`` (gone from Python 3.12 unless setuptools
  provides it): :func:`require_supported_pyspark` refuses both at import with the fix.
"""

from __future__ import annotations

import functools
import sys
import warnings
from typing import TYPE_CHECKING, Any

if sys.version_info >= (3, 12):
    from typing import override
else:  # declared in pyproject.toml for Python < 3.12
    from typing_extensions import override

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "OBSERVED_ROWS",
    "PYSPARK_NEWEST_TESTED",
    "PYSPARK_OLDEST",
    "SUPPORTED_PYSPARK",
    "UnsupportedVersionError",
    "conf_items",
    "observed_fields",
    "override",
    "pyspark_invalidates_import_caches_every_task",
    "pyspark_version",
    "require_supported_pyspark",
    "progress_json",
    "source_offset",
    "spark_to_arrow_type",
    "to_pylist",
    "with_observed_input_rows",
]

#: The observed metric (in each ``src_<source>`` observation) counting the rows read.
OBSERVED_ROWS = "rows"
#: The PySpark range pyproject.toml declares, as users read it.
SUPPORTED_PYSPARK = ">=3.5,<4.4"
#: The oldest (major, minor) line supported, and the newest one tested.
PYSPARK_OLDEST = (3, 5)
PYSPARK_NEWEST_TESTED = (4, 3)
#: PySpark 3.5 drives pyarrow up to this major version (exclusive) in applyInPandasWithState:
#: 17.0.0, 18.1.0, 20.0.0, 22.0.0, 24.0.0 and 25.0.1 ran a stateful query, 26.0.1 failed in
#: PySpark's worker ("'float' object cannot be interpreted as an integer"; 2026-11-28).
PYSPARK35_PYARROW_BELOW = 26


class UnsupportedVersionError(ImportError):
    """The installed PySpark (or its pyarrow) is outside what interlace supports."""


def _major_minor(version: str) -> tuple[int, int]:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    while len(parts) < 2:
        parts.append(0)
    return parts[0], parts[1]


def pyspark_version() -> str:
    """The installed PySpark's version string."""
    import pyspark

    return str(pyspark.__version__)


def require_supported_pyspark(
    pyspark_ver: str | None = None,
    pyarrow_ver: str | None = None,
    has_distutils: bool | None = None,
) -> None:
    """Refuse a PySpark below the supported range, or a pyarrow its line cannot drive.

    Raises :class:`UnsupportedVersionError` (an ``ImportError``) naming the installed version,
    the supported range and the fix; warns once for a PySpark newer than the newest tested line.
    Called when ``interlace`` is imported; the arguments are for tests.
    """
    if pyspark_ver is None:
        pyspark_ver = pyspark_version()
    if pyarrow_ver is None:
        import pyarrow

        pyarrow_ver = str(pyarrow.__version__)
    line = _major_minor(pyspark_ver)
    if line < PYSPARK_OLDEST:
        msg = (
            f"interlace needs PySpark {SUPPORTED_PYSPARK}; this environment has PySpark "
            f"{pyspark_ver}. Its applyInPandasWithState and watermark behaviour differ from "
            "what interlace's operators are built and tested on. Fix: pip install "
            f"'pyspark{SUPPORTED_PYSPARK}' matching your cluster's Spark (docs/deploy.md, "
            "\"PySpark lines\")."
        )
        raise UnsupportedVersionError(msg)
    if line == (3, 5) and _major_minor(pyarrow_ver)[0] >= PYSPARK35_PYARROW_BELOW:
        msg = (
            f"PySpark {pyspark_ver} cannot drive pyarrow {pyarrow_ver} in "
            "applyInPandasWithState (PySpark 3.5's own worker fails on every micro-batch). "
            f"Fix: pip install 'pyarrow>=17,<{PYSPARK35_PYARROW_BELOW}' (the pyarrow of Spark "
            "3.5 cluster images), or a PySpark from 4.0 (docs/deploy.md, \"PySpark lines\")."
        )
        raise UnsupportedVersionError(msg)
    if line == (3, 5):
        if has_distutils is None:
            import importlib.util

            has_distutils = importlib.util.find_spec("distutils") is not None
        if not has_distutils:
            msg = (
                f"PySpark {pyspark_ver}'s Arrow code imports distutils, which Python "
                f"{sys.version_info.major}.{sys.version_info.minor} no longer ships: every "
                "applyInPandasWithState query would fail. Fix: pip install setuptools (it "
                "provides distutils), or use Python <= 3.11, or PySpark from 4.0 "
                "(docs/deploy.md, \"PySpark lines\")."
            )
            raise UnsupportedVersionError(msg)
    if line > PYSPARK_NEWEST_TESTED:
        warnings.warn(
            f"interlace is tested with PySpark {SUPPORTED_PYSPARK}; PySpark {pyspark_ver} is "
            "newer and untested (docs/deploy.md, \"PySpark lines\")",
            RuntimeWarning,
            stacklevel=3,
        )


@functools.cache
def _to_arrow_type_takes_timezone() -> bool:
    import inspect

    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return "timezone" in inspect.signature(to_arrow_type).parameters
    except (TypeError, ValueError):  # no signature to read: assume the newest form
        return True


def spark_to_arrow_type(data_type: Any) -> pa.DataType:
    """PySpark's Arrow type for a Spark ``data_type``, timestamps in UTC on every line.

    Raises what PySpark raises for a type it has no Arrow form for (its error class differs by
    line: ``TypeError``, ``PySparkTypeError``, ``PySparkNotImplementedError``).
    """
    from pyspark.sql.pandas.types import to_arrow_type

    if _to_arrow_type_takes_timezone():
        return to_arrow_type(data_type, timezone="UTC")
    return to_arrow_type(data_type)  # before 4.3: TimestampType is UTC microseconds already


def to_pylist(table: pa.Table) -> list[dict[str, Any]]:
    """``table``'s rows as dicts, map values as dicts (a repeated key: its last value wins).

    Converted here rather than by pyarrow's ``maps_as_pydicts``: pyarrow 17 lacks it, and
    pyarrow 21 leaves a map inside a struct inside a map's values as ``(key, value)`` pairs
    (2026-11-28), so the result would differ by line. Off the hot path (dead letters only).
    """
    rows: list[dict[str, Any]] = table.to_pylist()
    fields = [(f.name, f.type) for f in table.schema if _has_map(f.type)]
    for row in rows:
        for name, typ in fields:
            row[name] = _maps_as_dicts(row[name], typ)
    return rows


def _has_map(t: pa.DataType) -> bool:
    import pyarrow as pa

    if pa.types.is_map(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_map(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _has_map(t.value_type)
    return False


def _maps_as_dicts(value: Any, t: pa.DataType) -> Any:
    """``value`` (pyarrow's Python form of type ``t``) with each map's pairs as a dict."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(t):
        return {_maps_as_dicts(k, t.key_type): _maps_as_dicts(v, t.item_type) for k, v in value}
    if pa.types.is_struct(t):
        return {f.name: _maps_as_dicts(value[f.name], f.type) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [_maps_as_dicts(v, t.value_type) for v in value]
    return value


def progress_json(progress: Any) -> dict[str, Any]:
    """A query progress (``recentProgress``'s items, ``lastProgress``) as Spark's own JSON data.

    Through the progress object's ``json`` text where it has one (4.x), so that nested values
    are JSON on every line; a plain dict (3.5) is returned as it is.
    """
    import json

    text = getattr(progress, "json", None)
    if isinstance(text, str):
        return dict(json.loads(text))
    return dict(progress)


def source_offset(raw: Any) -> Any:
    """A source's ``startOffset`` / ``endOffset`` from a query progress, as JSON data.

    ``None`` where the source has none yet: PySpark 4.0's progress objects hold the text
    ``"None"`` there, other lines ``None``; a JSON text is parsed, parsed data kept.
    """
    import json

    if raw is None or raw in ("None", "null", ""):
        return None
    return json.loads(raw) if isinstance(raw, str) else raw


def conf_items(spark: Any) -> dict[str, str]:
    """The session's runtime settings, as ``spark.conf.getAll`` gives them from PySpark 4.0."""
    get_all = getattr(spark.conf, "getAll", None)
    if get_all is not None:
        return dict(get_all)
    return {str(r[0]): str(r[1]) for r in spark.sql("SET").collect()}


def with_observed_input_rows(
    progress: Any, channels: Any = ()
) -> tuple[Any, int | None]:
    """``progress`` with ``numInputRows`` from the plan's own counts where Spark has none.

    Each of a pipeline's inputs is observed as ``src_<name>`` with a row count
    (:data:`OBSERVED_ROWS`). Where every source of the progress reports 0 rows but the counts
    do not (PySpark 3.5, see the module's notes), returns the progress with ``numInputRows``
    their sum, and the rows read from inputs not named in ``channels``; otherwise returns
    ``progress`` unchanged and ``None``.
    """
    sources = progress.get("sources") or []
    if any(int(s.get("numInputRows") or 0) for s in sources):
        return progress, None
    counts = {
        str(name).removeprefix("src_"): int(observed_fields(row).get(OBSERVED_ROWS) or 0)
        for name, row in (progress.get("observedMetrics") or {}).items()
        if str(name).startswith("src_")
    }
    total = sum(counts.values())
    if not total:
        return progress, None
    skip = set(channels)
    from_sources = sum(n for name, n in counts.items() if name not in skip)
    return {**progress, "numInputRows": total}, from_sources


def observed_fields(row: Any) -> dict[str, Any]:
    """The values of one ``observedMetrics`` entry of a progress, by name.

    The entry is a ``Row`` (classic PySpark), a dict (a progress read back from JSON), ``None``
    (a metric not reported yet), or, over Spark Connect, ``Row(values=[...], schema={...})``.
    """
    if row is None:
        return {}
    fields = row.asDict() if hasattr(row, "asDict") else dict(row)
    if set(fields) == {"values", "schema"}:
        names = [f["name"] for f in fields["schema"]["fields"]]
        fields = dict(zip(names, fields["values"], strict=True))
    return fields


def pyspark_invalidates_import_caches_every_task() -> bool:
    """Whether this PySpark's workers invalidate the import caches at every task.

    Read off the function that sets a task's paths up (``pyspark.worker_util.
    setup_spark_files`` from 4.0, ``pyspark.worker.main`` in 3.5), without running or importing
    it: it calls ``importlib.invalidate_caches`` and keeps no ``path_changed`` flag (3.5, 4.0,
    4.1). False where it keeps one (4.2+) or where neither function is found.
    """
    code = _function_code("pyspark.worker_util", "setup_spark_files") or _function_code(
        "pyspark.worker", "main"
    )
    if code is None:
        return False
    return "invalidate_caches" in code.co_names and "path_changed" not in code.co_varnames


def _function_code(module: str, name: str) -> Any:
    """The code object of ``module.name``: from the loaded module, or compiled from its source.

    Compiled, not imported: importing ``pyspark.worker`` outside a worker would make this
    process look like one (:func:`interlace.operators.common.worker.prepare_worker`).
    """
    import importlib.util
    import types

    loaded = sys.modules.get(module)
    if loaded is not None:
        return getattr(getattr(loaded, name, None), "__code__", None)
    try:
        spec = importlib.util.find_spec(module)
        # Through the loader: Spark's workers import PySpark from pyspark.zip (zipimport).
        source = spec.loader.get_source(module) if spec and spec.loader else None  # type: ignore[attr-defined]
        if not source:
            return None
        code = compile(source, spec.origin or module, "exec")  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 (no source, or one this Python cannot compile)
        return None
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == name:
            return const
    return None


def read_state_store(spark: Any, checkpoint: str, batch_id: int) -> list[Any]:
    """The state rows of a query's stateful operator after micro-batch ``batch_id``.

    Through Spark's state data source (``format("statestore")``, Spark 4.0 and later), which
    opens the checkpoint read-only. PySpark 3.5 has no such reader: there, an
    :class:`~interlace.operators.errors.ConfigError` says what works instead (a 4.x Spark reads
    a 3.5 checkpoint's state; docs/inspect.md).
    """
    from interlace.operators.errors import ConfigError

    try:
        reader = spark.read.format("statestore").option("batchId", int(batch_id))
        return list(reader.load(checkpoint).collect())
    except Exception as exc:  # py4j and Spark Connect raise their own types
        text = str(exc)
        if "statestore" in text.lower() and ("DATA_SOURCE_NOT_FOUND" in text
                                             or "Failed to find data source" in text):
            msg = (f"reading interlace state needs Spark's state data source, which PySpark "
                   f"{pyspark_version()} does not have (it came with Spark 4.0): run "
                   "`interlace inspect` from a PySpark 4.x venv; it reads this checkpoint "
                   "read-only, and the running query may stay on its Spark")
            raise ConfigError(msg) from exc
        raise
