"""DuckDB: an embedded table written exactly once per micro-batch (the demo's target).

Each micro-batch is one DuckDB transaction that also records ``(pipeline, table, batch_id)``
in ``_interlace_commits``; a batch id already recorded is skipped, so a batch Spark replays
after a crash is written exactly once. With a ``key``, rows are upserted by that natural key;
when the rows carry ``revision`` (windows under ``late_data="reopen"``) an existing row is only
replaced by a higher or equal revision, and ``retracted`` rows delete their key (a session
absorbed by a merge). A **changelog** (``changelog=True``: rows with ``op`` = ``"upsert"`` /
``"delete"`` and a per-key ``version``, SEMANTICS §9) is applied by ``key``, the highest
``version`` winning (:class:`DuckDBTarget`). Written from the driver.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlace.faults import crash_point

__all__ = [
    "CHANGELOG_OPS",
    "DELETED_TABLE_PREFIX",
    "DuckDBTarget",
    "check_changelog_columns",
    "duckdb_type",
    "target",
]

_COMMITS = "_interlace_commits"
#: The changelog columns (SEMANTICS §9): the operation and the key's version.
OP_COLUMN, VERSION_COLUMN = "op", "version"
#: The values of ``op``.
CHANGELOG_OPS = ("upsert", "delete")
#: A changelog table ``T`` remembers its deleted keys in ``_interlace_deleted_T``.
DELETED_TABLE_PREFIX = "_interlace_deleted_"


def duckdb_type(spark_type: Any) -> str:
    """Map a Spark SQL type to a DuckDB column type (complex types become JSON text)."""
    from pyspark.sql import types as T

    simple = {
        T.LongType: "BIGINT",
        T.IntegerType: "INTEGER",
        T.ShortType: "SMALLINT",
        T.ByteType: "TINYINT",
        T.DoubleType: "DOUBLE",
        T.FloatType: "REAL",
        T.StringType: "VARCHAR",
        T.BooleanType: "BOOLEAN",
        T.TimestampType: "TIMESTAMP",
        T.TimestampNTZType: "TIMESTAMP",
        T.DateType: "DATE",
        T.BinaryType: "BLOB",
    }
    for cls, name in simple.items():
        if isinstance(spark_type, cls):
            return name
    if isinstance(spark_type, T.DecimalType):
        return f"DECIMAL({spark_type.precision},{spark_type.scale})"
    return "VARCHAR"


def check_changelog_columns(key: Sequence[str], by_group: bool, names: Sequence[str]) -> None:
    """Reject a changelog target without a key or without ``op`` / ``version`` columns.

    ``by_group``: a table aggregation's changelog, whose key may be empty (one global group).
    """
    if not key and not by_group:
        msg = (
            f"a changelog target needs `key`: the columns each change applies to (got "
            f"key={list(key)}); set key = [...] to the join's key columns"
        )
        raise ValueError(msg)
    absent = [c for c in (OP_COLUMN, VERSION_COLUMN) if c not in names]
    if absent:
        msg = (
            f"a changelog has columns {OP_COLUMN!r} and {VERSION_COLUMN!r} (SEMANTICS §9); "
            f"the output lacks {absent} (its columns: {list(names)})"
        )
        raise ValueError(msg)
    clash = [k for k in key if k in (OP_COLUMN, VERSION_COLUMN)]
    if clash:
        msg = f"`key` must not include the changelog column(s) {clash}; key the rows by data"
        raise ValueError(msg)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table_name(name: str) -> str:
    return re.sub(r"\W", "_", name)


@dataclass
class DuckDBTarget:
    """An embedded DuckDB table written exactly once per micro-batch.

    Window output under ``late_data="reopen"`` converges whatever ``key`` is (docs/windows.md,
    "Writing reopen output to an upserting target"): in the batch's transaction, every row of
    the same group (NULL is one group) whose ``[window_start, window_end)`` lies inside a batch
    row's bounds is deleted first: the window's earlier revision, a session's rows from before
    it grew, and a session absorbed by a merge (its ``retracted`` row). Then the live rows are
    inserted. The table then holds exactly the final windows and sessions. Window output needs
    no upsert: each (group, window) is one row, so its table gets no PRIMARY KEY (``key``
    names the natural key only), and NULL group values, one group as in SQL ``GROUP BY``, are
    stored like any other.

    A changelog (``changelog=True``; the table-table joins' output, SEMANTICS §9) has the
    columns ``op`` (``"upsert"`` or ``"delete"``) and ``version`` (per key, growing with each
    change) besides ``key`` and the values. The table holds the current rows: every column
    but ``op``, one row per live key (``key`` is its PRIMARY KEY). In the batch's transaction,
    per key, the batch row with the highest ``version`` (ties: the later row) is applied if
    its version is higher than the key's stored one, and ignored otherwise: an ``upsert``
    inserts or replaces the row, a ``delete`` removes it (a delete of an absent key removes
    nothing). So the table converges to the newest version of every key whatever order the
    rows arrive in, and a replayed batch is skipped as above. A delete is remembered:
    ``_interlace_deleted_TABLE`` keeps ``(key, version)`` of every deleted key, so an older
    upsert that arrives after the delete does not bring the key back; an upsert with a higher
    version removes the key from it. That table keeps one row per key deleted and not
    upserted again, for as long as the table lives (delete its rows by hand once no older
    upsert can arrive, e.g. after a full rebuild).

    Attributes:
        path: The DuckDB database file.
        table: The table name.
        pipeline: The pipeline name (recorded with each committed batch id).
        key: Natural key columns for upserts, or empty for appends.
        window_groups: The window's ``group_by`` columns (window output only).
        changelog: Whether the rows are a changelog keyed by ``key`` (see above).
    """

    path: Path
    table: str
    pipeline: str
    key: tuple[str, ...] = ()
    written: dict[int, int] = field(default_factory=dict)
    #: The ``group_by`` columns when the rows are a window aggregation's output: a batch with
    #: ``retracted`` (late_data="reopen") then first deletes every row it supersedes.
    window_groups: tuple[str, ...] | None = None
    #: Whether the rows are a changelog (``op``, ``version``) applied by ``key``.
    changelog: bool = False
    #: A changelog keyed by group values (a table aggregation, SEMANTICS §10): ``key`` may
    #: be empty (one global group) and its values NULL (a NULL group), so the table has no
    #: PRIMARY KEY and keys compare with ``IS NOT DISTINCT FROM``.
    by_group: bool = False

    def prepare(self, schema: Any) -> None:
        """Create the table (with the key as primary key) and the commit log if missing."""
        import duckdb

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fields = list(schema.fields)
        missing = [k for k in self.key if k not in schema.names]
        if missing:
            msg = f"target `key` column(s) {missing} are not output columns {schema.names}"
            raise ValueError(msg)
        if self.changelog:
            self._check_changelog_schema(schema.names)
            fields = [f for f in fields if f.name != OP_COLUMN]
        cols = [f"{_ident(f.name)} {duckdb_type(f.dataType)}" for f in fields]
        if self.key and self.window_groups is None and not self.by_group:
            cols.append(f"PRIMARY KEY ({', '.join(_ident(k) for k in self.key)})")
        con = duckdb.connect(str(self.path))
        try:
            con.execute(f"CREATE TABLE IF NOT EXISTS {_ident(self.table)} ({', '.join(cols)})")
            if self.changelog:
                types = {f.name: duckdb_type(f.dataType) for f in fields}
                key_cols = [f"{_ident(k)} {types[k]}" for k in self.key]
                primary = ("" if self.by_group else
                           f", PRIMARY KEY ({', '.join(map(_ident, self.key))})")
                con.execute(
                    f"CREATE TABLE IF NOT EXISTS {self._deleted_table} "
                    f"({', '.join([*key_cols, f'{VERSION_COLUMN} BIGINT'])}{primary})"
                )
            con.execute(
                f"CREATE TABLE IF NOT EXISTS {_COMMITS} (pipeline VARCHAR, tbl VARCHAR, "
                "batch_id BIGINT, rows BIGINT, PRIMARY KEY (pipeline, tbl, batch_id))"
            )
        finally:
            con.close()

    def write(self, pdf: Any, batch_id: int) -> int:
        """Write one micro-batch (a pandas frame) exactly once; return the rows written."""
        import duckdb

        con = duckdb.connect(str(self.path))
        try:
            con.execute("BEGIN TRANSACTION")
            done = con.execute(
                f"SELECT rows FROM {_COMMITS} WHERE pipeline = ? AND tbl = ? AND batch_id = ?",
                [self.pipeline, self.table, batch_id],
            ).fetchone()
            if done is not None:
                con.execute("ROLLBACK")
                return 0
            n = self._write_rows(con, pdf)
            con.execute(
                f"INSERT INTO {_COMMITS} VALUES (?, ?, ?, ?)",
                [self.pipeline, self.table, batch_id, n],
            )
            crash_point("target-uncommitted")
            con.execute("COMMIT")
            crash_point("target-committed")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            con.close()
        self.written[batch_id] = n
        return n

    def _write_rows(self, con: Any, pdf: Any) -> int:
        if len(pdf) == 0:
            return 0
        if self.changelog:
            return self._apply_changelog(con, pdf)
        t = _ident(self.table)
        n_rows = len(pdf)  # the operator's output rows this batch, retractions included
        if self.window_groups is not None and "retracted" in pdf.columns:
            self._delete_superseded(con, pdf)
            pdf = pdf[~pdf["retracted"].fillna(False).astype(bool)]
            if len(pdf) == 0:
                return n_rows
        cols = ", ".join(_ident(c) for c in pdf.columns)
        if not self.key or self.window_groups is not None:
            con.register("_il_batch", pdf)
            con.execute(f"INSERT INTO {t} ({cols}) SELECT {cols} FROM _il_batch")
            con.unregister("_il_batch")
            return n_rows
        key = list(self.key)
        n_deleted = 0
        if "retracted" in pdf.columns:
            gone = pdf[pdf["retracted"].fillna(False).astype(bool)]
            pdf = pdf[~pdf["retracted"].fillna(False).astype(bool)]
            if len(gone):
                con.register("_il_gone", gone[key])
                cond = " AND ".join(
                    f"{t}.{_ident(k)} IS NOT DISTINCT FROM g.{_ident(k)}" for k in key
                )
                con.execute(f"DELETE FROM {t} WHERE EXISTS (SELECT 1 FROM _il_gone g WHERE {cond})")
                con.unregister("_il_gone")
                n_deleted = len(gone)
        if "revision" in pdf.columns:
            pdf = pdf.sort_values("revision").drop_duplicates(key, keep="last")
        else:
            pdf = pdf.drop_duplicates(key, keep="last")
        if len(pdf) == 0:
            return n_deleted
        con.register("_il_batch", pdf)
        updates = ", ".join(
            f"{_ident(c)} = excluded.{_ident(c)}" for c in pdf.columns if c not in key
        )
        where = f" WHERE excluded.revision >= {t}.revision" if "revision" in pdf.columns else ""
        action = f"DO UPDATE SET {updates}{where}" if updates else "DO NOTHING"
        con.execute(
            f"INSERT INTO {t} ({cols}) SELECT {cols} FROM _il_batch "
            f"ON CONFLICT ({', '.join(_ident(k) for k in key)}) {action}"
        )
        con.unregister("_il_batch")
        return len(pdf) + n_deleted

    # Changelogs ------------------------------------------------------------------------------

    @property
    def _deleted_table(self) -> str:
        return _ident(DELETED_TABLE_PREFIX + self.table)

    def _check_changelog_schema(self, names: Sequence[str]) -> None:
        check_changelog_columns(self.key, self.by_group, names)

    def _apply_changelog(self, con: Any, pdf: Any) -> int:
        """Apply one batch of changes by key, the highest version winning (class docstring)."""
        if self.by_group:
            return self._apply_group_changelog(con, pdf)
        key = list(self.key)
        bad_ops = sorted({str(v) for v in pdf[OP_COLUMN].unique()} - set(CHANGELOG_OPS))
        if bad_ops:
            msg = f"changelog `{OP_COLUMN}` values {bad_ops} are not one of {list(CHANGELOG_OPS)}"
            raise ValueError(msg)
        for what, names in (("`version`", [VERSION_COLUMN]), (f"key {key}", key)):
            if pdf[names].isna().to_numpy().any():
                msg = f"a changelog row has a NULL {what}; every change needs its key and version"
                raise ValueError(msg)
        t, d = _ident(self.table), self._deleted_table
        self._stage_newer(con, pdf, lambda a, b: " AND ".join(
            f"{a}.{_ident(k)} = {b}.{_ident(k)}" for k in key))
        keys = ", ".join(_ident(k) for k in key)
        cols = ", ".join(_ident(c) for c in pdf.columns if c != OP_COLUMN)
        updates = ", ".join(
            f"{_ident(c)} = excluded.{_ident(c)}"
            for c in pdf.columns
            if c != OP_COLUMN and c not in key
        )
        for table, op in ((t, "delete"), (d, "upsert")):  # each key: one op per batch
            on_key = " AND ".join(f"{table}.{_ident(k)} = a.{_ident(k)}" for k in key)
            con.execute(
                f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM _il_apply a WHERE "
                f"a.{OP_COLUMN} = '{op}' AND {on_key})"
            )
        con.execute(
            f"INSERT INTO {t} ({cols}) SELECT {cols} FROM _il_apply WHERE {OP_COLUMN} = "
            f"'upsert' ON CONFLICT ({keys}) DO UPDATE SET {updates}"
        )
        con.execute(
            f"INSERT INTO {d} ({keys}, {VERSION_COLUMN}) SELECT {keys}, {VERSION_COLUMN} "
            f"FROM _il_apply WHERE {OP_COLUMN} = 'delete' ON CONFLICT ({keys}) DO UPDATE SET "
            f"{VERSION_COLUMN} = excluded.{VERSION_COLUMN}"
        )
        con.execute("DROP TABLE _il_apply")
        return len(pdf)

    def _stage_newer(self, con: Any, pdf: Any, same: Callable[[str, str], str]) -> None:
        """Put in the temp table ``_il_apply`` each key's change to apply from ``pdf``.

        Per key (``same(a, b)``: the SQL that says rows ``a`` and ``b`` have one key; every
        row one key when there is none), the batch's newest change (ties: the later row), if
        it is newer than the key's stored version, live or deleted.
        """
        key = list(self.key)
        order = pdf.assign(_il_row=range(len(pdf))).sort_values([VERSION_COLUMN, "_il_row"])
        newest = (order.drop_duplicates(key, keep="last") if key else order.tail(1)).drop(
            columns="_il_row")
        t, d = _ident(self.table), self._deleted_table
        con.register("_il_changes", newest)
        con.execute(
            "CREATE TEMP TABLE _il_apply AS SELECT * FROM _il_changes c WHERE "
            f"NOT EXISTS (SELECT 1 FROM {t} s WHERE {same('s', 'c')} AND s.{VERSION_COLUMN} >= "
            f"c.{VERSION_COLUMN}) AND NOT EXISTS (SELECT 1 FROM {d} s WHERE {same('s', 'c')} "
            f"AND s.{VERSION_COLUMN} >= c.{VERSION_COLUMN})"
        )
        con.unregister("_il_changes")

    def _apply_group_changelog(self, con: Any, pdf: Any) -> int:
        """Apply one batch of a group changelog: as by key, groups compared NULL-safely.

        The group columns may hold NULL (a NULL group) or be none at all (one global group),
        so no PRIMARY KEY: per group, the stored row (or deletion record) is replaced when a
        change's ``version`` is higher.
        """
        key = list(self.key)
        if pdf[VERSION_COLUMN].isna().to_numpy().any():
            msg = "a changelog row has a NULL `version`; every change needs its version"
            raise ValueError(msg)
        t, d = _ident(self.table), self._deleted_table

        def same(a: str, b: str) -> str:
            return " AND ".join(
                f"{a}.{_ident(k)} IS NOT DISTINCT FROM {b}.{_ident(k)}" for k in key) or "TRUE"

        self._stage_newer(con, pdf, same)
        for table in (t, d):
            con.execute(f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM _il_apply a WHERE "
                        f"{same(table, 'a')})")
        cols = ", ".join(_ident(c) for c in pdf.columns if c != OP_COLUMN)
        con.execute(f"INSERT INTO {t} ({cols}) SELECT {cols} FROM _il_apply WHERE "
                    f"{OP_COLUMN} = 'upsert'")
        keys = ", ".join([*(_ident(k) for k in key), VERSION_COLUMN])
        con.execute(f"INSERT INTO {d} ({keys}) SELECT {keys} FROM _il_apply WHERE "
                    f"{OP_COLUMN} = 'delete'")
        con.execute("DROP TABLE _il_apply")
        return len(pdf)

    def _delete_superseded(self, con: Any, pdf: Any) -> None:
        """Delete the rows of the table that a batch row's bounds contain (same group)."""
        assert self.window_groups is not None
        t = _ident(self.table)
        bounds = pdf[[*self.window_groups, "window_start", "window_end"]]
        con.register("_il_bounds", bounds)
        same = [f"{t}.{_ident(g)} IS NOT DISTINCT FROM b.{_ident(g)}" for g in self.window_groups]
        inside = [f"{t}.window_start >= b.window_start", f"{t}.window_end <= b.window_end"]
        con.execute(
            f"DELETE FROM {t} WHERE EXISTS (SELECT 1 FROM _il_bounds b "
            f"WHERE {' AND '.join(same + inside)})"
        )
        con.unregister("_il_bounds")




def target(spec: Any, ctx: Any) -> DuckDBTarget:
    """The ``[target] kind = "duckdb"`` of a pipeline (``ctx``: its ``TargetContext``)."""
    path = Path(spec.path or "interlace.duckdb")
    return DuckDBTarget(
        path if path.is_absolute() else ctx.base / path,
        spec.table or _table_name(ctx.default_table),
        ctx.pipeline,
        tuple(spec.key) if spec.key else tuple(ctx.default_key),
        window_groups=None if ctx.window_groups is None else tuple(ctx.window_groups),
        changelog=ctx.changelog,
        by_group=ctx.by_group,
    )
