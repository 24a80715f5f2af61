"""Delta Lake: a table written exactly once per micro-batch, with delta-rs (``deltalake``).

The target of ``[target] kind = "delta"`` (docs/delta.md) and of :func:`delta_writer`. Each
micro-batch is **one Delta commit** that also records the application transaction
``(app_id, batch_id)`` (Delta's ``txn`` action: ``app_id`` is ``interlace.<pipeline>``); a
batch whose id the table already records is skipped, so a batch Spark replays after a crash
changes nothing. What a batch becomes follows the DuckDB target (:mod:`.duckdb`), so the two
tables converge to the same rows:

* **appends** (joins, final windows, dead letters): the rows are appended;
* **window revisions** (``late_data = "reopen"``): one MERGE by the window's identity
  (``group_by`` values, NULL-safe, and its bounds) that deletes every row of the same group
  whose bounds a batch row's contain (the earlier revision, a session before it grew, a
  session absorbed by a merge: its ``retracted`` row) and inserts the live rows;
* **upserts by ``key``** (another append output given a ``key``): a MERGE by the key, the
  higher ``revision`` winning, ``retracted`` rows deleting theirs;
* **changelogs** (table-table and foreign-key joins, table aggregation; SEMANTICS §9, §10):
  per key first reduced to the batch's newest ``version`` (ties: the later row), then one
  MERGE by the key: an ``upsert`` newer than the stored row replaces or inserts it, a
  ``delete`` newer than the stored row removes it, an older change is ignored. The table
  holds every column but ``op``. Unlike the DuckDB target, a deleted key is not remembered
  (a Delta table has no side table to commit with it): an upsert *older* than a delete that
  arrives in a *later* batch inserts the key again. interlace's operators never send one
  (each key's changes leave in version order and batches apply in order), so for a pipeline's
  own output the tables are the same; docs/delta.md says so.

Written from the driver (in ``foreachBatch``), on every PySpark line; the table can be read by
Spark's Delta reader, delta-rs, polars and DuckDB. Timestamps are written UTC-aware
(``timestamp``, not ``timestamp_ntz``): the table keeps reader version 1 / writer version 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlace.connectors.duckdb import OP_COLUMN, VERSION_COLUMN, check_changelog_columns
from interlace.faults import crash_point

__all__ = ["DeltaTarget", "delta_writer", "target"]

_INSTALL = "the Delta target needs the `deltalake` package: pip install 'interlace[delta]'"
#: The MERGE source's column that says what a window row does (``put`` or ``drop``).
_ACTION = "_il_action"


def _deltalake() -> Any:
    try:
        import deltalake
    except ImportError as exc:  # pragma: no cover - the extra is part of test-core
        raise ImportError(_INSTALL) from exc
    return deltalake


def _q(name: str) -> str:
    """A column in a delta-rs SQL expression (backticks; double quotes make a string)."""
    return "`" + name.replace("`", "``") + "`"


def _all(*terms: str) -> str:
    """``AND`` of ``terms``, each in parentheses (delta-rs binds ``AND`` before ``=``)."""
    return " AND ".join(f"({t})" for t in terms) or "true"


@dataclass
class DeltaTarget:
    """A Delta table written exactly once per micro-batch (module docstring).

    Attributes:
        path: The table's folder or URI (``s3://...``, ``abfss://...``: ``storage_options``).
        pipeline: The pipeline (or stage) name: the application transaction is
            ``interlace.<pipeline>`` unless ``app_id`` is given.
        key: Natural key columns (upserts, changelogs), or empty for appends.
        window_groups: The window's ``group_by`` columns (window output only).
        changelog: Whether the rows are a changelog (``op``, ``version``) applied by ``key``.
        by_group: A table aggregation's changelog: keys compare NULL-safely, may be none.
        storage_options: delta-rs storage settings (credentials, region, ...).
        app_id: The application transaction's id (default ``interlace.<pipeline>``).
        attempts: How often a batch is tried when another writer's commit conflicts.
    """

    path: str
    pipeline: str
    key: tuple[str, ...] = ()
    window_groups: tuple[str, ...] | None = None
    changelog: bool = False
    by_group: bool = False
    storage_options: dict[str, str] = field(default_factory=dict)
    app_id: str = ""
    attempts: int = 5
    #: The query's checkpoint is new (its batch ids start at 0 again): refuse a table that
    #: already records batches of ``app_id``, whose ids the new batches would be skipped as.
    fresh_checkpoint: bool = False
    #: The time zone of the batch's naive timestamps (``toPandas`` hands over the Spark
    #: session's wall-clock times; ``interlace run`` and ``local_session`` use UTC).
    time_zone: str = "UTC"
    written: dict[int, int] = field(default_factory=dict)
    schema: Any = None  # the table's Arrow schema, once prepared
    _table: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.app_id = self.app_id or f"interlace.{self.pipeline}"

    # Preparing ---------------------------------------------------------------------------

    def prepare(self, spark_schema: Any) -> None:
        """Create the table if missing; refuse a path holding another table or other files.

        The table's columns are the output's (a changelog's without ``op``); an existing
        Delta table must have the same names and types (in any order), else nothing is
        written and the error names the columns that differ.
        """
        from interlace.operators.common.arrow import arrow_schema_for

        names = list(spark_schema.names)
        missing = [k for k in self.key if k not in names]
        if missing:
            msg = f"target `key` column(s) {missing} are not output columns {names}"
            raise ValueError(msg)
        if self.changelog:
            check_changelog_columns(self.key, self.by_group, names)
        arrow = arrow_schema_for(spark_schema, timestamp_unit="us", timestamp_tz="UTC")
        if self.changelog:
            arrow = arrow.remove(arrow.get_field_index(OP_COLUMN))
        self.schema = self._open_or_create(arrow)

    def _open_or_create(self, arrow: Any) -> Any:
        dl = _deltalake()
        opts = self.storage_options or None
        if dl.DeltaTable.is_deltatable(self.path, storage_options=opts):
            table = dl.DeltaTable(self.path, storage_options=opts)
            self._check_schema(table, arrow)
            done = table.transaction_version(self.app_id)
            if self.fresh_checkpoint and done is not None:
                msg = (
                    f"delta target {self.path} already holds batches 0 to {done} of "
                    f"{self.app_id}, but the query's checkpoint is new: its batches 0 to {done} "
                    "would be skipped as written. Restore the checkpoint, or write to a new "
                    "path (or under another pipeline name)"
                )
                raise ValueError(msg)
            return arrow
        local = Path(self.path) if "://" not in self.path else None
        if local is not None and local.exists() and (not local.is_dir() or any(local.iterdir())):
            msg = (
                f"delta target path {self.path} holds files but no Delta table (no _delta_log "
                "with a commit): give the target an empty or new folder, or convert the "
                "files to Delta first"
            )
            raise ValueError(msg)
        dl.DeltaTable.create(self.path, schema=arrow, mode="error", name=self.app_id,
                             storage_options=opts)
        return arrow

    def _check_schema(self, table: Any, arrow: Any) -> None:
        dl = _deltalake()
        have = {f.name: f.type for f in table.schema().fields}
        want = {f.name: f.type for f in dl.Schema.from_arrow(arrow).fields}
        if have == want:
            return
        diff = sorted(set(have) ^ set(want)) + sorted(
            n for n in set(have) & set(want) if have[n] != want[n])
        detail = ", ".join(
            f"{n}: table {_type(have.get(n))}, output {_type(want.get(n))}" for n in diff)
        msg = (
            f"delta target {self.path} holds a table of another schema ({detail}); nothing "
            "was written. Write to a new path, or drop the table if its rows can go"
        )
        raise ValueError(msg)

    # Writing -----------------------------------------------------------------------------

    def write(self, pdf: Any, batch_id: int) -> int:
        """Write one micro-batch (a pandas frame) exactly once; return the rows written.

        An empty batch makes no commit. Another writer's conflicting commit is retried
        ``attempts`` times (each time the table is read anew, the batch's id checked again),
        then reported.
        """
        dl = _deltalake()
        if self.schema is None:
            msg = "DeltaTarget.write before prepare(schema)"
            raise RuntimeError(msg)
        for attempt in range(1, self.attempts + 1):
            table = self._open()
            done = table.transaction_version(self.app_id)
            if done is not None and done >= batch_id:
                return 0
            if len(pdf) == 0:
                return 0
            try:
                n = self._write_batch(table, pdf, batch_id)
            except dl.exceptions.CommitFailedError as exc:
                if attempt == self.attempts:
                    msg = (
                        f"delta target {self.path}: batch {batch_id} conflicted with another "
                        f"writer's commit {self.attempts} times ({exc}); nothing of it was "
                        "written. Stop the other writer (or give it another table) and rerun: "
                        "the batch is written on restart"
                    )
                    raise RuntimeError(msg) from exc
                continue
            crash_point("target-committed")
            self.written[batch_id] = n
            return n
        raise AssertionError("unreachable")  # pragma: no cover

    def _open(self) -> Any:
        """The table at its newest version (kept between batches: only new commits are read)."""
        if self._table is None:
            self._table = _deltalake().DeltaTable(self.path,
                                                  storage_options=self.storage_options or None)
        else:
            self._table.update_incremental()
        return self._table

    def _commit(self, batch_id: int) -> Any:
        dl = _deltalake()
        crash_point("target-uncommitted")
        return dl.CommitProperties(app_transactions=[dl.Transaction(self.app_id, batch_id)])

    def _write_batch(self, table: Any, pdf: Any, batch_id: int) -> int:
        if self.changelog:
            return self._merge_changelog(table, pdf, batch_id)
        if self.window_groups is not None and "retracted" in pdf.columns:
            return self._merge_windows(table, pdf, batch_id)
        if self.key and self.window_groups is None:
            return self._merge_upserts(table, pdf, batch_id)
        _deltalake().write_deltalake(table, self._arrow(pdf), mode="append",
                                     commit_properties=self._commit(batch_id))
        return len(pdf)

    def _arrow(self, pdf: Any, extra: Sequence[str] = ()) -> Any:
        """The batch as Arrow in the table's schema (plus ``extra`` string columns)."""
        import pyarrow as pa

        schema = self.schema
        for name in extra:
            schema = schema.append(pa.field(name, pa.string()))
        pdf = pdf[schema.names]
        if self.time_zone.upper() not in ("UTC", "Z", "+00:00", "ETC/UTC"):
            naive = [c for c in pdf.columns if pa.types.is_timestamp(schema.field(c).type)
                     and getattr(pdf[c].dtype, "kind", "") == "M"]  # numpy: naive
            pdf = pdf.assign(**{c: pdf[c].dt.tz_localize(self.time_zone, ambiguous="NaT",
                                                         nonexistent="NaT").dt.tz_convert("UTC")
                                for c in naive})
        return pa.Table.from_pandas(pdf, schema=schema, preserve_index=False)

    def _merge(self, table: Any, source: Any, on: Sequence[str], null_safe: bool,
               batch_id: int) -> Any:
        eq = "IS NOT DISTINCT FROM" if null_safe else "="
        return table.merge(source, predicate=_all(*(f"t.{_q(k)} {eq} s.{_q(k)}" for k in on)),
                           source_alias="s", target_alias="t",
                           commit_properties=self._commit(batch_id))

    def _columns(self) -> dict[str, str]:
        return {_q(n): f"s.{_q(n)}" for n in self.schema.names}

    def _merge_changelog(self, table: Any, pdf: Any, batch_id: int) -> int:
        """Per key the batch's newest change, applied if newer than the stored row."""
        key = list(self.key)
        if pdf[VERSION_COLUMN].isna().to_numpy().any():
            msg = "a changelog row has a NULL `version`; every change needs its version"
            raise ValueError(msg)
        if not self.by_group and pdf[key].isna().to_numpy().any():
            msg = f"a changelog row has a NULL key {key}; every change needs its key"
            raise ValueError(msg)
        bad = sorted({str(v) for v in pdf[OP_COLUMN].unique()} - {"upsert", "delete"})
        if bad:
            msg = f"changelog `{OP_COLUMN}` values {bad} are not one of ['upsert', 'delete']"
            raise ValueError(msg)
        order = pdf.assign(_il_row=range(len(pdf))).sort_values([VERSION_COLUMN, "_il_row"])
        newest = order.drop_duplicates(key, keep="last") if key else order.tail(1)
        newer = f"s.{_q(VERSION_COLUMN)} > t.{_q(VERSION_COLUMN)}"
        op = f"s.{_q(OP_COLUMN)}"
        (self._merge(table, self._arrow(newest, [OP_COLUMN]), key, self.by_group, batch_id)
            .when_matched_delete(predicate=_all(f"{op} = 'delete'", newer))
            .when_matched_update(updates=self._columns(), predicate=_all(f"{op} = 'upsert'", newer))
            .when_not_matched_insert(updates=self._columns(), predicate=f"{op} = 'upsert'")
            .execute())
        return len(pdf)

    def _merge_upserts(self, table: Any, pdf: Any, batch_id: int) -> int:
        """Upsert by ``key``: the higher ``revision`` wins; ``retracted`` rows delete theirs."""
        import pandas as pd

        key = list(self.key)
        gone = (pdf["retracted"].fillna(False).astype(bool) if "retracted" in pdf.columns
                else pd.Series(False, index=pdf.index))
        rows = pdf.assign(_il_live=~gone, _il_row=range(len(pdf)))
        order = [c for c in ("_il_live", "revision", "_il_row") if c in rows.columns]
        newest = rows.sort_values(order).drop_duplicates(key, keep="last")
        source = self._arrow(newest.assign(**{_ACTION: newest["_il_live"].map(
            {True: "put", False: "drop"})}), [_ACTION])
        put = f"s.{_ACTION} = 'put'"
        guard = ([f"s.{_q('revision')} >= t.{_q('revision')}"] if "revision" in pdf.columns
                 else [])
        (self._merge(table, source, key, False, batch_id)
            .when_matched_delete(predicate=f"s.{_ACTION} = 'drop'")
            .when_matched_update(updates=self._columns(), predicate=_all(put, *guard))
            .when_not_matched_insert(updates=self._columns(), predicate=put)
            .execute())
        # As the DuckDB target counts: each key's upsert once, every retraction.
        return int(newest["_il_live"].sum()) + int(gone.sum())

    def _merge_windows(self, table: Any, pdf: Any, batch_id: int) -> int:
        """Delete the rows a batch row's bounds contain (same group); insert the live rows."""
        import duckdb

        assert self.window_groups is not None
        ident = [*self.window_groups, "window_start", "window_end"]
        live = pdf[~pdf["retracted"].fillna(False).astype(bool)]
        con = duckdb.connect()
        try:
            con.register("stored", table.to_pyarrow_dataset())
            con.register("batch", self._arrow(pdf))
            con.register("live", self._arrow(live.drop_duplicates(ident, keep="last")))
            cols = ", ".join(f"t.{_ident(c)}" for c in ident)
            same = [f"t.{_ident(g)} IS NOT DISTINCT FROM b.{_ident(g)}"
                    for g in self.window_groups]
            inside = ["t.window_start >= b.window_start", "t.window_end <= b.window_end"]
            is_live = " AND ".join(
                f"l.{_ident(c)} IS NOT DISTINCT FROM t.{_ident(c)}" for c in ident)
            result = con.sql(
                f"SELECT *, 'put' AS {_ACTION} FROM live UNION ALL BY NAME "
                f"SELECT DISTINCT {cols}, 'drop' AS {_ACTION} FROM stored t JOIN batch b ON "
                f"{' AND '.join(same + inside)} WHERE NOT EXISTS "
                f"(SELECT 1 FROM live l WHERE {is_live})"
            )
            # DuckDB 1.4 named it to_arrow_table; older ones arrow.
            source = getattr(result, "to_arrow_table", None) or result.arrow
            source = source()
        finally:
            con.close()
        source = source.select([*self.schema.names, _ACTION]).cast(
            self.schema.append(_pa_string(_ACTION)))
        put = f"s.{_ACTION} = 'put'"
        (self._merge(table, source, ident, True, batch_id)
            .when_matched_delete(predicate=f"s.{_ACTION} = 'drop'")
            .when_matched_update(updates=self._columns(), predicate=put)
            .when_not_matched_insert(updates=self._columns(), predicate=put)
            .execute())
        return len(pdf)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _pa_string(name: str) -> Any:
    import pyarrow as pa

    return pa.field(name, pa.string())


def _type(t: Any) -> str:
    if t is None:
        return "absent"
    text = str(t)
    return text.removeprefix('PrimitiveType("').removesuffix('")')


def target(spec: Any, ctx: Any) -> DeltaTarget:
    """The ``[target] kind = "delta"`` of a pipeline (``ctx``: its ``TargetContext``)."""
    path = spec.path
    if "://" not in path and not Path(path).is_absolute():
        path = str(ctx.base / path)
    return DeltaTarget(
        path, ctx.pipeline,
        tuple(spec.key) if spec.key else tuple(ctx.default_key),
        window_groups=None if ctx.window_groups is None else tuple(ctx.window_groups),
        changelog=ctx.changelog, by_group=ctx.by_group,
        storage_options=dict(spec.options), time_zone=_session_time_zone(),
        fresh_checkpoint=ctx.fresh_checkpoint,
    )


def _session_time_zone() -> str:
    """The active Spark session's time zone (``toPandas`` hands over its wall-clock times)."""
    try:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    except Exception:  # pragma: no cover - no pyspark, no session: the runner's UTC
        return "UTC"
    return (spark.conf.get("spark.sql.session.timeZone") if spark is not None else None) or "UTC"


def delta_writer(path: str, name: str, *, key: Sequence[str] = (), changelog: bool = False,
                 window_groups: Sequence[str] | None = None, by_group: bool = False,
                 storage_options: dict[str, str] | None = None) -> Any:
    """A ``foreachBatch`` function that writes each micro-batch into a Delta table once.

    The :class:`DeltaTarget` of a pipeline, for a query of your own:
    ``df.writeStream.foreachBatch(delta_writer(...))``. ``name`` identifies the writer (the
    table records ``interlace.<name>`` with each batch id): keep it across restarts of the
    query (and its checkpoint), and give two queries writing one table two names. The batch is
    collected to the driver (``toPandas``); the table is created (or checked) on the first
    call, with that batch's schema, and its timestamps are read in the session's
    ``spark.sql.session.timeZone`` (stored as UTC).

    Args:
        path: The table's folder or URI.
        name: The writer's name (see above).
        key: The key columns (upserts, changelogs); none: rows are appended.
        changelog: The rows are a changelog (``op``, ``version``) applied by ``key``.
        window_groups: The rows are a window's output with these ``group_by`` columns (under
            ``late_data = "reopen"`` revisions replace their window's earlier row).
        by_group: The changelog is a table aggregation's (NULL-safe keys, maybe none).
        storage_options: delta-rs storage settings (credentials, region, ...).

    Example (tests/delta/test_delta_python.py runs it)::

        out = table_join(customers, accounts, spec)
        (out.writeStream.option("checkpointLocation", "/chk/joined")
            .foreachBatch(delta_writer("/lake/joined", "customers-accounts",
                                       key=("customer",), changelog=True))
            .start())
    """
    writer = DeltaTarget(path, name, tuple(key),
                         window_groups=None if window_groups is None else tuple(window_groups),
                         changelog=changelog, by_group=by_group,
                         storage_options=dict(storage_options or {}))

    def write(df: Any, batch_id: int) -> None:
        if writer.schema is None:
            writer.time_zone = df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
            writer.prepare(df.schema)
        writer.write(df.toPandas(), batch_id)

    write.target = writer  # type: ignore[attr-defined]
    return write
