"""Key groups: how interlace bounds Python's per-group cost.

``applyInPandasWithState`` costs about 0.4 ms per group per micro-batch in the framework
alone, so interlace never groups by the raw key. Each row gets a **key group**
``pmod(xxhash64(key columns), key_groups)`` (the idea behind Flink's key groups) and all keys
of one key group share one ``GroupState`` blob. ``key_groups`` trades Python call overhead
(fewer is cheaper) against blob size per call and parallelism (more spreads better).

Changing ``key_groups`` between restarts moves keys to other groups and so invalidates the
checkpoint; it is part of the spec fingerprint.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DEFAULT_KEY_GROUPS", "MAX_KEY_GROUPS", "key_group_sql", "validate_key_groups"]

#: Measured default (docs/performance.md, bench/results/join-2026-11-22-sweep.md): at local[2]
#: with 4 shuffle partitions, 8, 16 and 32 key groups are equal within noise for joins (64 costs
#: ~20% more CPU), and 8 was fastest for every window kind (docs/performance-windows.md).
DEFAULT_KEY_GROUPS = 8
MAX_KEY_GROUPS = 1 << 20


def validate_key_groups(key_groups: object) -> int:
    """Return ``key_groups`` if it is an int in ``[1, MAX_KEY_GROUPS]``.

    Raises:
        ValueError: With the field, the value and the fix.
    """
    if isinstance(key_groups, bool) or not isinstance(key_groups, int):
        msg = f"`key_groups` must be an int (got {key_groups!r}); use e.g. key_groups=32"
        raise ValueError(msg)
    if not 1 <= key_groups <= MAX_KEY_GROUPS:
        msg = (
            f"`key_groups` must be in [1, {MAX_KEY_GROUPS}] (got key_groups={key_groups}); "
            "a few times spark.sql.shuffle.partitions is a good start"
        )
        raise ValueError(msg)
    return key_groups


def key_group_sql(quoted_columns: Sequence[str], key_groups: int) -> str:
    """Return the Spark SQL expression that assigns a key group.

    Args:
        quoted_columns: Column references, already backtick-quoted.
        key_groups: Number of key groups.

    Returns:
        ``pmod(xxhash64(c1, c2, ...), N)`` as a string (``state`` never imports pyspark).
    """
    return f"pmod(xxhash64({', '.join(quoted_columns)}), {int(key_groups)})"
