"""``interlace inspect``: what a query's state holds, and the rule that will release each item.

interlace keeps a key group's state as one versioned blob in Spark's state store
(:mod:`interlace.state.blob`), which no tool but the operator can read. :func:`inspect_operator`
reads a checkpoint through Spark's own state data source (``format("statestore")`` and
``format("state-metadata")``, Spark 4.0 and later; no checkpoint file is parsed by hand for the
state), decodes each blob with the operator's plan, and returns one row per held item with its
release rule as data (SEMANTICS.md):

* a stream-stream join's buffered row is evicted in the first micro-batch whose operator
  watermark ``wm`` passes its close time (``wm > releases_at``, §2): left ``t + upper + AL``,
  right ``t - lower + AL``; a row of a preserved side (left / right / full / left_anti) that
  never matched is emitted then, null-padded, and never earlier;
* a window aggregation's open window (or session), one per group, is emitted in the first
  micro-batch with ``wm >= end`` if it changed since its last emit (§3); under ``reopen`` it
  is kept to ``wm >= end + AL`` for late rows, and evicted there. Its ``row`` is the output
  row it would emit now: the aggregates so far;
* a pending update of a stream-table, table-table or foreign-key join or of a table
  aggregation (``emit="final"``) is applied at ``wm > t`` (§8-§10); the versions and rows
  they keep per key (and an aggregation's groups) are released by no watermark
  (``releases_at`` None), only replaced: :mod:`interlace.inspection_items` says per operator.

``wm`` is the one the inspected micro-batch ran with: ``W + H`` (``W``: Spark's watermark from
the batch's offset log; ``H``: the operator's horizon). ``wait_ms`` is ``releases_at - wm``:
how far the event time must still advance. The reader opens the checkpoint read-only; a running
query is not disturbed (docs/inspect.md).

Every operator is decoded; a table aggregation runs two queries (by key, then by group), each
inspected on its own checkpoint (:func:`inspect_pipeline` reads both).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlace.operators.errors import ConfigError

__all__ = [
    "ITEM_COLUMNS",
    "InputState",
    "InspectError",
    "Inspection",
    "inspect",
    "inspect_operator",
    "inspect_pipeline",
]

#: The columns of a held item (:meth:`Inspection.to_pandas`, :func:`inspect`), in order.
ITEM_COLUMNS = ("stage", "operator", "key_group", "key", "item", "event_time", "matched",
                "releases_at", "rule", "release", "wm", "wait_ms", "row")

_SPARK_TYPES = ("stage string, operator string, key_group int, key string, item string, "
                "event_time timestamp, matched boolean, releases_at timestamp, rule string, "
                "release string, "
                "wm timestamp, wait_ms long, row string")


class InspectError(ConfigError):
    """The checkpoint cannot be inspected: what was found, and what to do."""


@dataclass
class KeyGroupState:
    """One key group's state row: its items, blob size and Spark's timer (ms, Spark's ``W``)."""

    key_group: int
    partition: int
    items: int
    bytes: int
    timeout_ms: int | None


@dataclass
class InputState:
    """One input of a join, as its run's idle tracker last saved it (``heartbeats/_idle.json``).

    Attributes:
        name: The source's name.
        side: ``left`` / ``right``.
        greatest_event_time_us: The greatest event time (or chain clock) it delivered.
        last_active_ms: Processing time of the last micro-batch in which it delivered a row.
        idle_timeout_ms: Its idle timeout, if any.
        idle_since_ms: When it became idle (``last_active + timeout``, once passed), or None.
    """

    name: str
    side: str
    greatest_event_time_us: int | None
    last_active_ms: int
    idle_timeout_ms: int | None
    idle_since_ms: int | None


@dataclass
class Inspection:
    """What one query's state held after micro-batch ``batch_id``.

    Attributes:
        stage: The pipeline's (or chain stage's) name.
        operator: ``join``, ...
        checkpoint: The query's checkpoint folder.
        batch_id: The last committed micro-batch (or the one asked for).
        spark_watermark_ms: Spark's ``W`` that batch ran with (0: none yet).
        wm_us: The operator's ``wm = W + H`` in µs (None while ``W <= 0``).
        frame: One row per held item, :data:`ITEM_COLUMNS`, times as µs ints, in release
            order (``releases_at``, key group, key, item).
        groups: One :class:`KeyGroupState` per key group with state.
        took_s: Seconds the read and decode took.
        held_total: Items held in all (``frame`` may be filtered: :meth:`filtered`).
        inputs: A join's inputs as of the last committed micro-batch (:class:`InputState`;
            read from a pipeline's checkpoint by :func:`inspect_pipeline`, else empty).
    """

    stage: str
    operator: str
    checkpoint: str
    batch_id: int
    spark_watermark_ms: int
    wm_us: int | None
    frame: Any = None
    groups: list[KeyGroupState] = field(default_factory=list)
    took_s: float = 0.0
    held_total: int = 0
    inputs: list[InputState] = field(default_factory=list)

    @property
    def items(self) -> list[dict[str, Any]]:
        """The held items as dicts (:data:`ITEM_COLUMNS`; times as µs ints, None if none)."""
        return _records(self.frame)

    def filtered(self, *, key: str | None = None,
                 held_longer_than_ms: int | None = None) -> Inspection:
        """The same inspection with only the items that pass every filter given.

        ``key``: ``VALUE`` (any key column equal to it, as text) or ``COLUMN=VALUE``;
        ``held_longer_than_ms``: items whose event time is more than that behind ``wm`` (none
        before a watermark). Which stages are read is :func:`inspect_pipeline`'s ``only``.
        """
        frame = self.frame
        if key is not None:
            frame = frame[[_key_matches(k, key) for k in frame["key"]]]
        if held_longer_than_ms is not None:
            frame = frame.iloc[:0] if self.wm_us is None else frame[
                (self.wm_us - frame["event_time"] > held_longer_than_ms * 1000).fillna(False)]
        return dataclasses.replace(self, frame=frame)

    def summary(self) -> dict[str, Any]:
        """Items and bytes in all, per key group; the oldest item; skew across key groups."""
        import pandas as pd

        per_group = sorted(self.groups, key=lambda g: -g.items)
        counts = [g.items for g in self.groups]
        mean = sum(counts) / len(counts) if counts else 0.0
        frame = self.frame
        timed = frame["event_time"].notna()
        oldest = frame.loc[frame.loc[timed, "event_time"].idxmin()] if timed.any() else None
        return {
            "stage": self.stage, "operator": self.operator, "batch_id": self.batch_id,
            "spark_watermark_ms": self.spark_watermark_ms,
            "wm": _iso(self.wm_us), "items": len(frame), "held_total": self.held_total,
            "bytes": sum(g.bytes for g in self.groups), "key_groups": len(self.groups),
            "largest_key_group": dataclasses.asdict(per_group[0]) if per_group else None,
            "skew": round(max(counts) / mean, 2) if mean else None,
            "oldest": None if oldest is None else {
                "key": oldest["key"], "item": oldest["item"],
                "event_time": _iso(int(oldest["event_time"])),
                "releases_at": (None if pd.isna(oldest["releases_at"])
                                else _iso(int(oldest["releases_at"]))),
                "rule": oldest["rule"]},
            "took_s": round(self.took_s, 3),
        }

    def to_pandas(self) -> Any:
        """The items as a pandas DataFrame (:data:`ITEM_COLUMNS`; times as UTC timestamps)."""
        import pandas as pd

        frame = self.frame.copy()
        for c in ("event_time", "releases_at", "wm"):
            frame[c] = pd.to_datetime(frame[c], unit="us", utc=True)
        return frame.reset_index(drop=True)


def _records(frame: Any) -> list[dict[str, Any]]:
    ints = ("key_group", "event_time", "releases_at", "wm", "wait_ms")
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [{**r, **{c: None if r[c] is None else int(r[c]) for c in ints}} for r in records]


def _key_matches(key: str, wanted: str) -> bool:
    parts = key.split(", ")
    if "=" in wanted:
        return wanted in parts or key == wanted
    return any(p.split("=", 1)[-1] == wanted for p in parts)


def _iso(us: int | None) -> str | None:
    """A time in µs as ISO-8601 UTC text (:func:`~interlace.operators.window.slots.iso_utc`)."""
    from interlace.operators.window.slots import iso_utc

    return None if us is None else iso_utc(int(us))


# ------------------------------------------------------------------------------------------
# Reading the state through Spark's state data source
# ------------------------------------------------------------------------------------------


def _committed_batches(checkpoint: Path) -> list[int]:
    commits = checkpoint / "commits"
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) if (
        commits.is_dir()) else []


def _state_rows(spark: Any, checkpoint: Path, batch_id: int | None) -> tuple[int, list[Any]]:
    """The state rows of the query's one stateful operator at ``batch_id`` (default: last)."""
    from interlace.operators.common.compat import read_state_store

    if not (checkpoint / "offsets").is_dir():
        msg = (f"{checkpoint} is not a Spark streaming checkpoint (no offsets/ folder): give "
               "the checkpoint folder of a query that has run, or the pipeline's TOML file")
        raise InspectError(msg)
    committed = _committed_batches(checkpoint)
    if not committed:
        msg = (f"{checkpoint}: no micro-batch of this query has committed yet (commits/ is "
               "empty), so its state holds nothing to read; inspect it after the first batch")
        raise InspectError(msg)
    if batch_id is None:
        batch_id = committed[-1]
    elif batch_id not in committed:
        ran = sorted(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
        half = " (it started but did not commit: a half-written batch)" if batch_id in ran else ""
        msg = (f"{checkpoint}: micro-batch {batch_id} has no commit{half}; committed batches "
               f"are {committed[0]}..{committed[-1]}: pass --batch with one of them")
        raise InspectError(msg)
    if not (checkpoint / "state").is_dir():
        msg = (f"{checkpoint} has no state/ folder: the query has no stateful operator, so it "
               "is not an interlace operator's checkpoint")
        raise InspectError(msg)
    return batch_id, read_state_store(spark, str(checkpoint), batch_id)


def _blob_of(row: Any, checkpoint: Path) -> tuple[int, bytes, int | None, int]:
    """(group value, blob, timeout ms, partition) of one state row, or a clear error."""
    from interlace.operators.common.names import KEY_GROUP_COLUMN
    from interlace.state.blob import from_state_value

    data = row.asDict(recursive=True)
    key, value = data.get("key") or {}, data.get("value") or {}
    state = value.get("groupState") or {}
    if KEY_GROUP_COLUMN not in key or "blob" not in state:
        msg = (f"{checkpoint}: its state rows are not interlace's: key columns {sorted(key)}, "
               f"state columns {sorted(state) or sorted(value)}; interlace's have key "
               f"{KEY_GROUP_COLUMN!r} and one `blob` (is this another query's checkpoint?)")
        raise InspectError(msg)
    timeout = value.get("timeoutTimestamp")
    return (int(key[KEY_GROUP_COLUMN]), from_state_value(state["blob"]),
            None if timeout is None or timeout < 0 else int(timeout),
            int(data.get("partition_id") or 0))


def inspect_operator(spark: Any, checkpoint: str | Path, operator: Any, *,
                     batch_id: int | None = None, stage: str | None = None) -> Inspection:
    """Read ``checkpoint``'s state and return every held item with its release rule.

    Args:
        spark: A SparkSession of PySpark 4.0 or later (the state data source).
        checkpoint: The query's checkpoint folder.
        operator: The operator the query ran, as bound by ``prepare_join(...)`` with the same
            inputs and spec (its plan decodes the blobs; a different spec is refused).
        batch_id: The micro-batch to read (default: the last committed one).
        stage: The name to report (default: the spec's ``name``).

    Raises:
        InspectError: Not a checkpoint, nothing committed, a batch without a commit, state
            that is not interlace's, or blobs of another spec or format version.
    """
    from interlace.chain import batch_watermark_ms
    from interlace.state.errors import InterlaceError

    started = time.perf_counter()
    folder = Path(checkpoint)
    decoder = _decoder(operator)
    batch_id, rows = _state_rows(spark, folder, batch_id)
    w_ms = batch_watermark_ms(folder, batch_id)
    horizon_ms = int(getattr(operator.plan, "horizon_ms", 0)) if decoder.horizon else 0
    wm_us = (w_ms + horizon_ms) * 1000 if w_ms > 0 else None
    name = stage or getattr(operator.spec, "name", None) or folder.name
    out = Inspection(stage=name, operator=decoder.kind, checkpoint=str(folder),
                     batch_id=batch_id, spark_watermark_ms=w_ms, wm_us=wm_us)
    index = _group_index(operator.spec)
    columns: dict[str, list[Any]] = {c: [] for c in ITEM_COLUMNS}
    for row in rows:
        value, blob, timeout, partition = _blob_of(row, folder)
        group = index.get(value, value)
        try:
            found = decoder.items(operator.plan, blob)
        except InterlaceError as exc:
            msg = f"{folder}: key group {group} (batch {batch_id}): {exc}"
            raise InspectError(msg) from exc
        n = len(found["key"])
        for c, values in found.items():
            columns[c].extend(values)
        columns["key_group"].extend([group] * n)
        out.groups.append(KeyGroupState(group, partition, n, len(blob), timeout))
    out.groups.sort(key=lambda g: g.key_group)
    out.frame = _frame(columns, name, decoder.kind, wm_us)
    out.held_total = len(out.frame)
    out.took_s = time.perf_counter() - started
    return out


def _frame(columns: dict[str, list[Any]], stage: str, kind: str, wm_us: int | None) -> Any:
    """The items' frame: the decoders' columns, stage, operator, wm and wait_ms, sorted."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    n = len(columns["key"])
    columns.update(stage=[stage] * n, operator=[kind] * n)
    # Through Arrow: pandas builds a frame from Python lists about ten times slower.
    ints = ("key_group", "event_time", "releases_at")
    table = pa.table({c: pa.array(columns[c], pa.int64() if c in ints else None)
                      for c in ITEM_COLUMNS if c not in ("wm", "wait_ms")})
    frame = table.to_pandas()
    frame["key_group"] = np.asarray(frame["key_group"], dtype=np.int64)
    # None: released by no watermark (a table's newest version waits for a newer one); an
    # aggregation's group has no event time.
    for c in ("event_time", "releases_at"):
        frame[c] = pd.array(table.column(c).to_pylist(), dtype="Int64")
    frame["matched"] = frame["matched"].astype(object).where(frame["matched"].notna(), None)
    frame["wm"] = pd.array([wm_us] * n, dtype="Int64")
    frame["wait_ms"] = (pd.array((frame["releases_at"] - wm_us) // 1000, dtype="Int64")
                        if wm_us is not None else pd.array([None] * n, dtype="Int64"))
    frame = frame[list(ITEM_COLUMNS)]
    return frame.sort_values(["releases_at", "key_group", "key", "item"], kind="stable",
                             ignore_index=True, na_position="last")


def inspect(spark: Any, checkpoint: str | Path, operator: Any, *,
            batch_id: int | None = None) -> Any:
    """:func:`inspect_operator` as a Spark DataFrame of the held items (:data:`ITEM_COLUMNS`).

    Example::

        op = interlace.prepare_join(orders, payments, spec)   # the query's inputs and spec
        held = interlace.inspect(spark, "/chk/orders-payments", op)
        held.where("release = 'emit unmatched'").orderBy("releases_at").show()
    """
    found = inspect_operator(spark, checkpoint, operator, batch_id=batch_id)
    return spark.createDataFrame(found.to_pandas(), _SPARK_TYPES)


def _group_index(spec: Any) -> dict[int, int]:
    """Spark's group value of each key group -> its number 0..N-1 (key_group_sql's mapping)."""
    from interlace.state.keygroups import key_group_ids

    n = getattr(spec, "key_groups", None)
    return {v: i for i, v in enumerate(key_group_ids(int(n)))} if n else {}


# ------------------------------------------------------------------------------------------
# Decoders: a blob -> its held items (pure; no Spark)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Decoder:
    kind: str
    items: Any  # (plan, blob) -> {column: values}
    #: Whether ``wm = W + H``: not for a table aggregation's second query, whose ``W`` is the
    #: first query's ``wm`` (the channel's clock, SEMANTICS §11).
    horizon: bool = True


def _decoder(operator: Any) -> _Decoder:
    from interlace.inspection_items import (
        aggregate_group_items,
        aggregate_key_items,
        foreign_key_items,
        join_items,
        stream_table_items,
        table_join_items,
        window_items,
    )

    plan_type = type(getattr(operator, "plan", None)).__name__
    if plan_type == "JoinPlan":
        return _Decoder("join", join_items)
    if plan_type == "WindowPlan":
        return _Decoder("window", window_items)
    if plan_type == "StreamTablePlan":
        return _Decoder("stream_table", stream_table_items)
    if plan_type == "TableJoinPlan":
        return _Decoder("table", table_join_items)
    if plan_type == "ForeignKeyJoinPlan":
        return _Decoder("foreign_key", foreign_key_items)
    if plan_type == "TableAggregatePlan":
        if hasattr(operator, "keys"):  # the TableAggregateOperator: the by-group query
            return _Decoder("aggregate_groups", aggregate_group_items, horizon=False)
        return _Decoder("aggregate_keys", aggregate_key_items)  # its `keys`: the by-key query
    kind = type(operator).__name__
    msg = (f"inspect decodes the state of interlace's operators, bound by prepare_join, "
           f"prepare_window, prepare_table_aggregate ...; it got a {kind}")
    raise InspectError(msg)


# ------------------------------------------------------------------------------------------
# A pipeline file: each stage's query, built as `interlace run` builds it (nothing started)
# ------------------------------------------------------------------------------------------


def inspect_pipeline(spark: Any, pipeline: Any, base: Path, *,
                     batch_id: int | None = None, only: str | None = None) -> list[Inspection]:
    """Inspect every stage of ``pipeline`` (one for a pipeline of one operator), in order.

    ``only``: just the stage of that name (``CHAIN.STAGE`` or ``STAGE``) or operator kind
    (``join``); the stages before it are built (not read) for their output schemas.

    Each stage's inputs are built as ``interlace run`` builds them, without heartbeats (whose
    folder lives in the checkpoint: inspect writes nothing there) and without starting a query.
    """
    from interlace.chain import read_channel
    from interlace.operators.common.shim import bound_operators
    from interlace.run_inputs import build_query_input

    schemas: dict[str, Any] = {}
    found: list[Inspection] = []
    runs = pipeline.stage_runs()

    def wanted(run: Any) -> bool:
        names = {run.pipeline.name, run.stage.name if run.stage is not None else None,
                 _kind_of(run.pipeline)}
        return only is None or only in names

    if not any(wanted(r) for r in runs):
        listed = ", ".join(f"{r.pipeline.name} ({_kind_of(r.pipeline)})" for r in runs)
        msg = f"--operator {only!r} names no stage of {pipeline.name!r}; its stages: {listed}"
        raise InspectError(msg)
    last = max(i for i, r in enumerate(runs) if wanted(r))
    for run in runs[: last + 1]:
        p = run.pipeline
        frames = {}
        for s in p.sources:
            if s.name in run.upstream:
                path = Path(s.path) if Path(s.path).is_absolute() else base / s.path
                frames[s.name] = read_channel(spark, path, schemas[run.upstream[s.name]])
        checkpoint = p.checkpoint_folder(base)
        aggregates: list[Any] = []
        with bound_operators() as ops:
            out = build_query_input(spark, p, base=base, frames=frames, read_only=True,
                                    start_aggregate=_unstarted_aggregate(checkpoint, aggregates))
        if run.stage is not None:
            if run.stage.output_sql is not None:
                out.createOrReplaceTempView("output")
                out = spark.sql(run.stage.output_sql)
            schemas[run.stage.name] = out.schema
        if not wanted(run):
            continue
        if aggregates:  # two queries: by key (the runner's `aggregate/keys`), then by group
            found.append(inspect_operator(spark, checkpoint / "aggregate" / "keys",
                                          aggregates[0].keys, batch_id=batch_id, stage=p.name))
            found.append(inspect_operator(spark, checkpoint, aggregates[0], batch_id=batch_id,
                                          stage=p.name))
        else:
            found.append(inspect_operator(spark, checkpoint, ops[-1], batch_id=batch_id,
                                          stage=p.name))
            found[-1].inputs = _inputs(p, base)
    return found


def _inputs(p: Any, base: Path) -> list[InputState]:
    """A join's inputs, from its heartbeats' idle tracker (else an empty list).

    ``interlace run`` gives every join of a new checkpoint one (docs/idle-inputs.md).
    """
    from interlace.idle_run import heartbeat_folder, with_idle_sources
    from interlace.operators.common.idle import IdleTracker, saved_clocks

    saved = saved_clocks(heartbeat_folder(p, base)) if p.join is not None else None
    if saved is None:
        return []
    spec = with_idle_sources(p)
    sides = [(side, name) for side, name in (("left", p.left_source), ("right", p.right_source))
             if side in saved]
    timeouts = {side: getattr(spec, f"{side}_idle_timeout_ms", None) for side, _ in sides}
    idle = IdleTracker(timeouts, {side: saved[side] for side, _ in sides}).idle_since_ms(
        int(time.time() * 1000))
    return [InputState(name, side, saved[side].max_clock_us, saved[side].last_active_ms,
                       timeouts[side], idle[side]) for side, name in sides]


def _unstarted_aggregate(checkpoint: Path, bound: list[Any]) -> Any:
    """``build_query_input``'s ``start_aggregate`` for inspect: the runner's layout, no query.

    ``interlace run`` starts a table aggregation's first query into the channel
    ``CHECKPOINT/aggregate/channel``; here the second query's input is only defined on it
    (never started), and the bound operator is kept in ``bound`` for its plan.
    """
    def build(df: Any, spec: Any) -> Any:
        from interlace.chain import read_channel
        from interlace.operators.table_aggregate import prepare_table_aggregate

        op = prepare_table_aggregate(df, spec)
        bound.append(op)
        channel = checkpoint / "aggregate" / "channel"
        if not channel.is_dir():
            msg = (f"{checkpoint}: the table aggregation's first query has not run (no "
                   f"{channel}); run the pipeline first")
            raise InspectError(msg)
        return op.groups(read_channel(df.sparkSession, channel, op.delta_struct))

    return build



def _kind_of(p: Any) -> str:
    if p.join is not None:
        from interlace.pipeline.kinds import join_kind

        kind = join_kind(p.join).kind
        return "join" if kind == "stream_stream_join" else kind
    return "window" if p.window is not None else "aggregate"


# ------------------------------------------------------------------------------------------
# Text and JSON
# ------------------------------------------------------------------------------------------


def render(found: Sequence[Inspection], *, limit: int = 50) -> str:
    """A readable report: per stage its watermarks and summary, then its items."""
    lines: list[str] = []
    for one in found:
        s = one.summary()
        w = _iso(one.spark_watermark_ms * 1000) if one.spark_watermark_ms > 0 else "none"
        lines.append(f"{one.stage} ({one.operator}): batch {one.batch_id}, Spark W {w}"
                     f", wm {s['wm'] or 'none yet'}; {_held(one)}, {s['bytes']:,} "
                     f"bytes in {s['key_groups']} key groups (skew {s['skew']}); read in "
                     f"{one.took_s:.2f} s")
        for i in one.inputs:
            lines.append(f"  input {i.name} ({i.side}): greatest event time "
                         f"{_iso(i.greatest_event_time_us) or 'none yet'}, " + (
                             f"idle since {_iso(i.idle_since_ms * 1000)}"
                             if i.idle_since_ms is not None else
                             f"last row {_iso(i.last_active_ms * 1000)} (processing time)"))
        for side, n, newest in _per_item_kind(one.frame):
            lines.append(f"  {side}: {n} held" + (
                "" if newest is None else f", newest event time {_iso(newest)}"))
        if s["oldest"]:
            o = s["oldest"]
            if o["releases_at"] is None:
                lines.append(f"  oldest: {o['item']} {o['key']} at {o['event_time']}, released "
                             "by no watermark (kept until a newer update of its key)")
            else:
                rule = o["rule"].replace("releases_at", o["releases_at"])
                lines.append(f"  oldest: {o['item']} {o['key']} at {o['event_time']}, released "
                             f"in the first micro-batch with {rule}")
        if not len(one.frame):
            lines.append("  (no held items)")
            continue
        header = ("key_group", "key", "item", "event_time", "matched", "releases_at",
                  "wait_ms", "release")
        table = [header] + [
            (str(i["key_group"]), i["key"], i["item"], _iso(i["event_time"]) or "",
             "" if i["matched"] is None else str(i["matched"]).lower(),
             "(no watermark)" if i["releases_at"] is None else
             f"{'> ' if '>=' not in i['rule'] else '>= '}{_iso(i['releases_at'])}",
             "" if i["wait_ms"] is None else f"{i['wait_ms']:,}", i["release"])
            for i in _records(one.frame.head(limit))
        ]
        widths = [max(len(r[c]) for r in table) for c in range(len(header))]
        for r in table:
            lines.append("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True))
                         .rstrip())
        if len(one.frame) > limit:
            lines.append(f"  ... {len(one.frame) - limit} more (--limit, --json)")
    return "\n".join(lines)


def _held(one: Inspection) -> str:
    if len(one.frame) == one.held_total:
        return f"{one.held_total} held items"
    return f"{len(one.frame)} of {one.held_total} held items shown (filters)"


def _per_item_kind(frame: Any) -> list[tuple[str, int, int | None]]:
    import pandas as pd

    grouped = frame.groupby("item")["event_time"].agg(["size", "max"])
    return [(str(k), int(r["size"]), None if pd.isna(r["max"]) else int(r["max"]))
            for k, r in grouped.iterrows()]


def to_json(found: Sequence[Inspection]) -> str:
    """Every stage's summary and items, times as ISO-8601 UTC text."""
    out = []
    for one in found:
        items = [{**i, **{c: _iso(i[c]) for c in ("event_time", "releases_at", "wm")},
                  "row": json.loads(i["row"])} for i in one.items]
        out.append({"summary": one.summary(), "checkpoint": one.checkpoint,
                    "inputs": [dataclasses.asdict(i) for i in one.inputs],
                    "key_groups": [dataclasses.asdict(g) for g in one.groups], "items": items})
    return json.dumps(out, indent=1, default=str)
