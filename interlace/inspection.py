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
  row it would emit now: the aggregates so far.

``wm`` is the one the inspected micro-batch ran with: ``W + H`` (``W``: Spark's watermark from
the batch's offset log; ``H``: the operator's horizon). ``wait_ms`` is ``releases_at - wm``:
how far the event time must still advance. The reader opens the checkpoint read-only; a running
query is not disturbed (docs/inspect.md).

Which operators it decodes: the stream-stream join and the window aggregation. The others are
refused by name (their state is read the same way; their decoders are not written yet,
docs/inspect.md).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlace.operators.errors import ConfigError

__all__ = [
    "ITEM_COLUMNS",
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
class Inspection:
    """What one query's state held after micro-batch ``batch_id``.

    Attributes:
        stage: The pipeline's (or chain stage's) name.
        operator: ``join``, ...
        checkpoint: The query's checkpoint folder.
        batch_id: The last committed micro-batch (or the one asked for).
        spark_watermark_ms: Spark's ``W`` that batch ran with (0: none yet).
        wm_us: The operator's ``wm = W + H`` in µs (None while ``W <= 0``).
        items: One dict per held item, :data:`ITEM_COLUMNS` (times as µs ints).
        groups: One :class:`KeyGroupState` per key group with state.
        took_s: Seconds the read and decode took.
        held_total: Items held in all (``items`` may be filtered: :meth:`filtered`).
    """

    stage: str
    operator: str
    checkpoint: str
    batch_id: int
    spark_watermark_ms: int
    wm_us: int | None
    items: list[dict[str, Any]] = field(default_factory=list)
    groups: list[KeyGroupState] = field(default_factory=list)
    took_s: float = 0.0
    held_total: int = 0

    def filtered(self, *, key: str | None = None, operator: str | None = None,
                 held_longer_than_ms: int | None = None) -> Inspection:
        """The same inspection with only the items that pass every filter given.

        ``key``: ``VALUE`` (any key column equal to it, as text) or ``COLUMN=VALUE``;
        ``operator``: the stage's name or operator kind; ``held_longer_than_ms``: items whose
        event time is more than that behind ``wm`` (none before a watermark).
        """
        items = self.items
        if operator is not None and operator not in (self.stage, self.operator):
            items = []
        if key is not None:
            items = [i for i in items if _key_matches(i["key"], key)]
        if held_longer_than_ms is not None:
            wm = self.wm_us
            items = [] if wm is None else [
                i for i in items if wm - i["event_time"] > held_longer_than_ms * 1000]
        return dataclasses.replace(self, items=items)

    def summary(self) -> dict[str, Any]:
        """Items and bytes in all, per key group; the oldest item; skew across key groups."""
        per_group = sorted(self.groups, key=lambda g: -g.items)
        counts = [g.items for g in self.groups]
        mean = sum(counts) / len(counts) if counts else 0.0
        oldest = min(self.items, key=lambda i: i["event_time"], default=None)
        return {
            "stage": self.stage, "operator": self.operator, "batch_id": self.batch_id,
            "spark_watermark_ms": self.spark_watermark_ms,
            "wm": _iso(self.wm_us), "items": len(self.items), "held_total": self.held_total,
            "bytes": sum(g.bytes for g in self.groups), "key_groups": len(self.groups),
            "largest_key_group": dataclasses.asdict(per_group[0]) if per_group else None,
            "skew": round(max(counts) / mean, 2) if mean else None,
            "oldest": None if oldest is None else {
                "key": oldest["key"], "item": oldest["item"],
                "event_time": _iso(oldest["event_time"]),
                "releases_at": _iso(oldest["releases_at"]), "rule": oldest["rule"]},
            "took_s": round(self.took_s, 3),
        }

    def to_pandas(self) -> Any:
        """The items as a pandas DataFrame (:data:`ITEM_COLUMNS`; times as UTC timestamps)."""
        import pandas as pd

        frame = pd.DataFrame(self.items, columns=list(ITEM_COLUMNS))
        for c in ("event_time", "releases_at", "wm"):
            frame[c] = pd.to_datetime(frame[c], unit="us", utc=True)
        return frame


def _key_matches(key: str, wanted: str) -> bool:
    parts = key.split(", ")
    if "=" in wanted:
        return wanted in parts or key == wanted
    return any(p.split("=", 1)[-1] == wanted for p in parts)


def _iso(us: int | None) -> str | None:
    import datetime as dt

    if us is None:
        return None
    return (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
            + dt.timedelta(microseconds=us)).isoformat().replace("+00:00", "Z")


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
    horizon_ms = int(getattr(operator.plan, "horizon_ms", 0))
    wm_us = (w_ms + horizon_ms) * 1000 if w_ms > 0 else None
    name = stage or getattr(operator.spec, "name", None) or folder.name
    out = Inspection(stage=name, operator=decoder.kind, checkpoint=str(folder),
                     batch_id=batch_id, spark_watermark_ms=w_ms, wm_us=wm_us)
    index = _group_index(operator.spec)
    for row in rows:
        value, blob, timeout, partition = _blob_of(row, folder)
        group = index.get(value, value)
        try:
            items = decoder.items(operator.plan, blob)
        except InterlaceError as exc:
            msg = f"{folder}: key group {group} (batch {batch_id}): {exc}"
            raise InspectError(msg) from exc
        for item in items:
            item.update(stage=name, operator=decoder.kind, key_group=group, wm=wm_us,
                        wait_ms=None if wm_us is None else (item["releases_at"] - wm_us) // 1000)
        out.items.extend(items)
        out.groups.append(KeyGroupState(group, partition, len(items), len(blob), timeout))
    out.groups.sort(key=lambda g: g.key_group)
    out.items.sort(key=lambda i: (i["releases_at"], i["key_group"], i["key"], i["item"]))
    out.held_total = len(out.items)
    out.took_s = time.perf_counter() - started
    return out


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
    items: Any  # (plan, blob) -> list[dict]


def _decoder(operator: Any) -> _Decoder:
    from interlace.inspection_items import join_items, window_items

    plan_type = type(operator.plan).__name__
    if plan_type == "JoinPlan":
        return _Decoder("join", join_items)
    if plan_type == "WindowPlan":
        return _Decoder("window", window_items)
    kind = type(operator.spec).__name__
    msg = (f"inspect decodes the state of stream-stream joins and window aggregations; a "
           f"{kind}'s is not decoded yet "
           "(docs/inspect.md says what it holds and how Spark's state reader shows it)")
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
        if p.aggregate is not None and wanted(run):
            msg = (f"{p.name}: a table aggregation runs two queries; inspect does not decode "
                   "its state yet (docs/inspect.md)")
            raise InspectError(msg)
        frames = {}
        for s in p.sources:
            if s.name in run.upstream:
                path = Path(s.path) if Path(s.path).is_absolute() else base / s.path
                frames[s.name] = read_channel(spark, path, schemas[run.upstream[s.name]])
        with bound_operators() as ops:
            out = build_query_input(spark, p, base=base, frames=frames, read_only=True)
        if run.stage is not None:
            if run.stage.output_sql is not None:
                out.createOrReplaceTempView("output")
                out = spark.sql(run.stage.output_sql)
            schemas[run.stage.name] = out.schema
        if wanted(run):
            found.append(inspect_operator(spark, p.checkpoint_folder(base), ops[-1],
                                          batch_id=batch_id, stage=p.name))
    return found


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
        lines.append(f"{one.stage} ({one.operator}): batch {one.batch_id}, Spark W "
                     f"{_iso(one.spark_watermark_ms * 1000) if one.spark_watermark_ms > 0 else 'none'}"
                     f", wm {s['wm'] or 'none yet'}; {_held(one)}, {s['bytes']:,} "
                     f"bytes in {s['key_groups']} key groups (skew {s['skew']}); read in "
                     f"{one.took_s:.2f} s")
        for side, n, newest in _per_item_kind(one.items):
            lines.append(f"  {side}: {n} held, newest event time {_iso(newest)}")
        if s["oldest"]:
            o = s["oldest"]
            rule = o["rule"].replace("releases_at", o["releases_at"])
            lines.append(f"  oldest: {o['item']} {o['key']} at {o['event_time']}, released "
                         f"in the first micro-batch with {rule}")
        if not one.items:
            lines.append("  (no held items)")
            continue
        header = ("key_group", "key", "item", "event_time", "matched", "releases_at",
                  "wait_ms", "release")
        table = [header] + [
            (str(i["key_group"]), i["key"], i["item"], _iso(i["event_time"]) or "",
             "" if i["matched"] is None else str(i["matched"]).lower(),
             f"{'> ' if '>=' not in i['rule'] else '>= '}{_iso(i['releases_at'])}",
             "" if i["wait_ms"] is None else f"{i['wait_ms']:,}", i["release"])
            for i in one.items[:limit]
        ]
        widths = [max(len(r[c]) for r in table) for c in range(len(header))]
        for r in table:
            lines.append("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True))
                         .rstrip())
        if len(one.items) > limit:
            lines.append(f"  ... {len(one.items) - limit} more (--limit, --json)")
    return "\n".join(lines)


def _held(one: Inspection) -> str:
    if len(one.items) == one.held_total:
        return f"{one.held_total} held items"
    return f"{len(one.items)} of {one.held_total} held items shown (filters)"


def _per_item_kind(items: Iterable[dict[str, Any]]) -> list[tuple[str, int, int]]:
    seen: dict[str, list[int]] = {}
    for i in items:
        acc = seen.setdefault(i["item"], [0, i["event_time"]])
        acc[0] += 1
        acc[1] = max(acc[1], i["event_time"])
    return [(k, v[0], v[1]) for k, v in sorted(seen.items())]


def to_json(found: Sequence[Inspection]) -> str:
    """Every stage's summary and items, times as ISO-8601 UTC text."""
    out = []
    for one in found:
        items = [{**i, **{c: _iso(i[c]) for c in ("event_time", "releases_at", "wm")},
                  "row": json.loads(i["row"])} for i in one.items]
        out.append({"summary": one.summary(), "checkpoint": one.checkpoint,
                    "key_groups": [dataclasses.asdict(g) for g in one.groups], "items": items})
    return json.dumps(out, indent=1, default=str)
