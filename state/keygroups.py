"""Key groups: how interlace bounds Python's per-group cost.

``applyInPandasWithState`` costs about 0.4 ms per group per micro-batch in the framework
alone, so interlace never groups by the raw key. Each row gets a **key group**
``pmod(xxhash64(key columns), key_groups)`` (the idea behind Flink's key groups) and all keys
of one key group share one ``GroupState`` blob. ``key_groups`` trades Python call overhead
(fewer is cheaper) against blob size per call and parallelism (more spreads better).

**Balanced ids.** Spark places a group on shuffle partition ``pmod(hash(group value), P)``
(Murmur3, seed 42). Used as is, the numbers ``0 .. N-1`` land unevenly: with 8 key groups and 4
partitions, Murmur3 puts 0, 1, 3 and 4 groups on the four partitions, so one task does half the
work and a core idles. So the group value of key group ``g`` is :func:`balanced_key_group_id`
``(g)``, the int whose Spark hash is exactly ``g``: key group ``g`` then lands on partition
``g mod P`` for *every* partition count ``P``, and each partition holds ``floor(N/P)`` or
``ceil(N/P)`` key groups. The ids are looked up in an array literal, which Spark re-optimises
every micro-batch, so above :data:`BALANCED_MAX_KEY_GROUPS` the value is ``g`` itself (with
that many groups the random spread evens out).

Changing ``key_groups`` between restarts moves keys to other groups and so invalidates the
checkpoint; it is part of the spec fingerprint, and so is :data:`KEY_GROUP_ID_SCHEME`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BALANCED_MAX_KEY_GROUPS",
    "DEFAULT_JOIN_KEY_GROUPS",
    "DEFAULT_KEY_GROUPS",
    "KEY_GROUP_ID_SCHEME",
    "MAX_KEY_GROUPS",
    "balanced_id_lookup_sql",
    "balanced_key_group_id",
    "key_group_ids",
    "key_group_sql",
    "spark_hash_int",
    "validate_key_groups",
]

#: Measured default for windows (docs/performance-windows.md): at local[2] with 4 shuffle
#: partitions 8 was fastest for every window kind; with balanced ids, 4 was as fast for tumbling
#: and session and slower for hopping (bench/results/window-2026-11-22-kg4.md).
DEFAULT_KEY_GROUPS = 8
#: Measured default for joins (docs/performance.md "key_groups with balanced ids"): one key group
#: per shuffle partition of ``local_session`` (4). With balanced ids that is one Python call per
#: partition per micro-batch, and it beat 8 in every round (about 10% wall, 13% CPU).
DEFAULT_JOIN_KEY_GROUPS = 4
MAX_KEY_GROUPS = 1 << 20
#: Up to this many key groups, group values are :func:`balanced_key_group_id`. The array literal
#: costs each micro-batch's planning about 50 ms at 4,096 entries (the noise level), 0.2 s at
#: 16,384 and 0.7 s at 65,536 (bench/keygroup_planning.py,
#: bench/results/keygroup-planning-2026-11-22.md).
BALANCED_MAX_KEY_GROUPS = 4096
#: Names the mapping from key group to group value; part of the operators' state fingerprints,
#: so a checkpoint written with another mapping fails loudly instead of losing buffered state.
KEY_GROUP_ID_SCHEME = "murmur3-inverse-4096"

_MASK = 0xFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593
_SPARK_HASH_SEED = 42


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _signed(x: int) -> int:
    return x - (1 << 32) if x & 0x80000000 else x


def spark_hash_int(value: int, seed: int = _SPARK_HASH_SEED) -> int:
    """Spark's ``hash(CAST(value AS INT))``: Murmur3 x86_32 of a 4-byte int, as a signed int.

    This is what Spark's hash partitioning (``pmod(hash(keys), P)``) computes for an int
    grouping column; :func:`balanced_key_group_id` inverts it.
    """
    k1 = (value & _MASK) * _C1 & _MASK
    k1 = _rotl(k1, 15) * _C2 & _MASK
    h1 = (seed & _MASK) ^ k1
    h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return _signed(h1)


def balanced_key_group_id(group: int) -> int:
    """Return the int whose Spark hash (:func:`spark_hash_int`) is ``group``.

    Every step of Murmur3's 4-byte hash is a bijection on 32-bit words, so it is run backwards.

    Args:
        group: A key group number, ``0 <= group < 2**31``.

    Returns:
        A signed 32-bit int ``x`` with ``spark_hash_int(x) == group``.
    """
    h1 = group & _MASK
    h1 ^= h1 >> 16
    h1 = h1 * pow(0xC2B2AE35, -1, 1 << 32) & _MASK
    h1 ^= (h1 >> 13) ^ (h1 >> 26)
    h1 = h1 * pow(0x85EBCA6B, -1, 1 << 32) & _MASK
    h1 ^= h1 >> 16
    h1 ^= 4
    h1 = (h1 - 0xE6546B64) * pow(5, -1, 1 << 32) & _MASK
    h1 = _rotl(h1, 32 - 13)
    k1 = h1 ^ (_SPARK_HASH_SEED & _MASK)
    k1 = k1 * pow(_C2, -1, 1 << 32) & _MASK
    k1 = _rotl(k1, 32 - 15)
    return _signed(k1 * pow(_C1, -1, 1 << 32) & _MASK)


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
    """Return the Spark SQL expression that assigns a key group's group value (an int).

    Args:
        quoted_columns: Column references, already backtick-quoted.
        key_groups: Number of key groups.

    Returns:
        As a string (``state`` never imports pyspark): key group ``g = pmod(xxhash64(c1, c2,
        ...), N)`` mapped to :func:`balanced_key_group_id` ``(g)`` by an array lookup, or ``g``
        itself when ``N`` exceeds :data:`BALANCED_MAX_KEY_GROUPS` (see the module docstring).
    """
    n = int(key_groups)
    group = f"pmod(xxhash64({', '.join(quoted_columns)}), {n})"
    if n > BALANCED_MAX_KEY_GROUPS:
        return f"CAST({group} AS INT)"
    return balanced_id_lookup_sql(group, n)


def key_group_ids(key_groups: int) -> list[int]:
    """Return every group value :func:`key_group_sql` can produce for ``key_groups``, in order.

    Key group ``g``'s value is :func:`balanced_key_group_id` ``(g)`` up to
    :data:`BALANCED_MAX_KEY_GROUPS` key groups, else ``g``. An operator that replicates a row
    into every key group (the foreign-key join's right table) explodes it over these.

    Example:
        >>> key_group_ids(2) == [balanced_key_group_id(0), balanced_key_group_id(1)]
        True
        >>> key_group_ids(BALANCED_MAX_KEY_GROUPS + 2)[-1]
        4097
    """
    n = int(key_groups)
    if n > BALANCED_MAX_KEY_GROUPS:
        return list(range(n))
    return [balanced_key_group_id(g) for g in range(n)]


def balanced_id_lookup_sql(group_sql: str, key_groups: int) -> str:
    """Return SQL mapping ``group_sql`` (a key group in ``[0, key_groups)``) to its balanced id.

    An array literal of :func:`balanced_key_group_id` for every key group, indexed by the group
    (whatever ``key_groups``; :func:`key_group_sql` applies :data:`BALANCED_MAX_KEY_GROUPS`).
    """
    ids = ", ".join(str(balanced_key_group_id(g)) for g in range(int(key_groups)))
    return f"element_at(array({ids}), CAST({group_sql} AS INT) + 1)"
