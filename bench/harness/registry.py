"""The workload registry: every benchmark workload, by name.

A :class:`Workload` says how to make its data (deterministically, from a seed), how to write
it as Parquet inputs, which engines run on it (Spark's native operator(s), interlace, and the
optional extras: the no-op floor, other ``key_groups``, shim variants) and how to verify
their collected outputs (:mod:`harness.compare`). The family modules (:mod:`harness.joins`,
:mod:`harness.windows`, :mod:`harness.tables`) define and register theirs at import; this
module holds only the types and :func:`register` and imports none of them (no import circle):
:mod:`harness.workloads` imports the family modules and answers :func:`~harness.workloads.load`
and :func:`~harness.workloads.select`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from harness.compare import Check

#: Engine roles. ``native``: a Spark operator interlace is compared with; ``interlace``: the
#: operator under test (the first one is the main one, the others are sweeps / variants);
#: ``floor``: a no-op ``applyInPandasWithState`` on interlace's prepared input (emits nothing).
ROLES = ("native", "interlace", "floor")


@dataclasses.dataclass(frozen=True)
class Size:
    """How much data: ``None`` fields take the workload's default (``quick``: its smoke size).

    ``fixed_rate``: the event time a micro-batch covers grows with ``rows`` (the workload's
    span x rows / its default rows), so the events per second, and with them the state held
    and the output per input row, stay the workload's; otherwise more rows per micro-batch
    are denser in event time.
    """

    rows: int | None = None
    batches: int | None = None
    keys: int | None = None
    quick: bool = False
    seed: int = 20260302
    resolution_us: int = 1
    fixed_rate: bool = False

    def span_s(self, default_span_s: float, default_rows: int, rows: int) -> float:
        """Event time per micro-batch for ``rows`` rows (see ``fixed_rate``)."""
        return default_span_s * rows / default_rows if self.fixed_rate else default_span_s


class Data(Protocol):
    """What the harness needs of a workload's generated data."""

    @property
    def input_rows(self) -> int:
        """Rows of every input, sentinels included (throughput counts them)."""

    @property
    def data_batches(self) -> int:
        """Micro-batches holding data (sentinel and no-data batches come after them)."""


@dataclasses.dataclass
class Context:
    """What an engine's builder gets: the session, the inputs' folder, the data, options."""

    spark: Any
    root: Path
    data: Any
    key_groups: int
    options: Mapping[str, Any]
    cleanups: list[Callable[[], None]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Engine:
    """One way to compute a workload's output.

    ``stream_join``: a native stream-stream join, run once per join state format under
    RocksDB. ``conf``: settings for this engine's queries only. ``key_groups``: interlace's
    (``None``: the workload's default). ``exact``: a native that must give interlace's output
    row for row (timed runs compare checksums); table joins' natives answer other questions.
    ``floor_emits``: a floor that emits (constant) rows, so its check is that it did.
    """

    name: str
    role: str
    build: Callable[[Context], Any]
    columns: tuple[str, ...]
    stream_join: bool = False
    conf: Mapping[str, str] = dataclasses.field(default_factory=dict)
    key_groups: int | None = None
    exact: bool = True
    before: Callable[[], None] | None = None
    after: Callable[[Any], None] | None = None
    floor_emits: bool = False

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            msg = f"`role` must be one of {ROLES} (got {self.role!r})"
            raise ValueError(msg)


@dataclasses.dataclass(frozen=True)
class Workload:
    """One benchmark workload (see the module docstring).

    ``generate(size)`` must be deterministic in ``size`` (a unit test checks it).
    ``engines(options)``: natives first, then interlace (the main one), then the extras the
    options ask for (``floor``, ``variants``); the harness adds the ``sweep``'s key_groups.
    ``verify(data, frames, options)`` gets the collected output of each engine that had a
    verification run (natives and the main interlace), by engine name, and returns its checks.
    ``sink_filter``: SQL dropping the sentinel rows from every output. ``checksum``: the SQL
    expressions a timed run hashes (default: the engine's columns); engines that must agree
    give equal checksums.
    ``held(data, batch_id, watermark_ms)``: the state rows the data implies after that
    micro-batch (for bytes per held row), or ``None``. ``in_full`` False: run only when named
    (by name or family), never by ``*`` (the full benchmark).
    """

    name: str
    family: str
    label: str
    description: str
    generate: Callable[[Size], Any]
    write: Callable[[Any, Path], None]
    engines: Callable[[Mapping[str, Any]], list[Engine]]
    verify: Callable[[Any, Mapping[str, Any], Mapping[str, Any]], list[Check]]
    default_key_groups: Callable[[], int]
    sink_filter: str | None = None
    checksum: tuple[str, ...] | None = None
    held: Callable[[Any, int, int], int] | None = None
    held_label: str = "state rows"
    in_full: bool = True


REGISTRY: dict[str, Workload] = {}
FAMILIES = ("join", "window", "table", "state")


def register(w: Workload) -> Workload:
    """Add ``w`` to :data:`REGISTRY` (names are unique)."""
    if w.name in REGISTRY:
        msg = f"workload {w.name!r} is registered twice"
        raise ValueError(msg)
    REGISTRY[w.name] = w
    return w
