"""Key tuples as integer codes: equal tuples get equal codes (neighbours: :mod:`.arrow`).

The join matches key tuples across its two sides (``join/step.py``: NULL never equals NULL);
the window finds the slot of each group tuple (``window/slots.py``: NULL is a group of its own,
as in SQL ``GROUP BY``). Both encode with :func:`key_codes`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

__all__ = [
    "has_null_key",
    "key_codes",
    "key_codes_across",
    "may_match",
    "without_negative_zero",
]


def without_negative_zero(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """``col`` with ``-0.0`` as ``0.0`` if it is floating point: equal keys, one group, as in SQL.

    Dictionary encoding tells the two zeros apart by their bits; ``-0.0 + 0.0 == 0.0``.
    """
    if pa.types.is_floating(col.type):
        return pc.add(col, pa.scalar(0.0, col.type))
    return col


def key_codes(
    columns: Sequence[pa.ChunkedArray], n_rows: int, *, null_is_value: bool
) -> NDArray[np.int64]:
    """Encode the tuples of ``columns`` (each ``n_rows`` long) as int64 codes.

    Equal tuples get equal codes, different tuples different ones, as SQL compares them: a
    float column's ``-0.0`` is ``0.0`` (:func:`without_negative_zero`). Each column is
    dictionary-encoded; a further column's codes are combined with the codes so far and
    renumbered densely (``np.unique``), so that the next product cannot overflow. The first
    column's dictionary indices are dense codes already: one column needs no pass.

    Args:
        columns: The key columns, one chunked array each, all of one length.
        n_rows: Their length (with no columns every row gets code 0).
        null_is_value: ``True``: NULL is a value like any other (SQL ``GROUP BY``), every
            code is >= 0. ``False``: a tuple holding a NULL gets code -1 (SQL equality: NULL
            never equals NULL).

    Returns:
        One code per row.
    """
    codes = np.zeros(n_rows, dtype=np.int64)
    if n_rows == 0:
        # Nothing to encode; and Arrow cannot combine the chunks of an empty dictionary of
        # some types (decimal: "DictionaryArray converter ... not implemented").
        return codes
    for i, col in enumerate(columns):
        col = without_negative_zero(col)
        if null_is_value:
            enc = pc.dictionary_encode(col, null_encoding="encode").combine_chunks()
            c = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        else:
            enc = pc.dictionary_encode(col).combine_chunks()
            c = np.asarray(enc.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        if i == 0:
            codes = c
            continue
        combined = codes * max(len(enc.dictionary), 1) + c
        if null_is_value:
            _, dense = np.unique(combined, return_inverse=True)
            codes = dense.astype(np.int64)
        else:
            null = (codes < 0) | (c < 0)
            _, dense = np.unique(np.where(null, -1, combined), return_inverse=True)
            codes = np.where(null, -1, dense.astype(np.int64))
    return codes


def key_codes_across(
    probe: pa.Table,
    probe_keys: Sequence[str],
    build: pa.Table,
    build_keys: Sequence[str],
    key_types: Sequence[pa.DataType],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Encode the key tuples of two inputs as shared codes; -1 where a key is NULL.

    Both inputs' key columns are cast to the common ``key_types`` first (Spark's widening,
    :mod:`.keytypes`).
    """
    n_p = probe.num_rows
    columns = []
    for pk, bk, typ in zip(probe_keys, build_keys, key_types, strict=True):
        columns.append(pa.chunked_array(
            probe.column(pk).cast(typ).chunks + build.column(bk).cast(typ).chunks, type=typ
        ))
    codes = key_codes(columns, n_p + build.num_rows, null_is_value=False)
    return codes[:n_p], codes[n_p:]


def may_match(
    build: pa.Table,
    build_keys: Sequence[str],
    probes: Sequence[tuple[pa.Table, Sequence[str]]],
    key_types: Sequence[pa.DataType],
    *,
    null_is_value: bool = False,
) -> NDArray[np.bool_] | None:
    """Per row of ``build``: may its key tuple equal one of ``probes``'?

    NULL never matches (joins), or with ``null_is_value`` matches NULL (a window's SQL
    ``GROUP BY`` groups, as :func:`key_codes`' flag).

    Each key column of a row must hold a value that column has in some probe row; Arrow looks
    up no tuples, so this is a superset of the rows whose whole key equals a probe's, never
    fewer. It hashes the probes' few values once and looks every build row up in them, far
    cheaper than encoding every build key (:func:`key_codes_across`) when the build side is
    the large one: 0.14 s vs 1.5 s for 2.5M rows against 27,500 on a loaded 2-core machine.

    Args:
        build: The large table.
        build_keys: Its key columns.
        probes: ``(table, key columns)`` pairs, key columns in ``build_keys``' order.
        key_types: The common type each key column is compared in.
        null_is_value: A NULL in a build row's column matches a NULL in a probe's.

    Returns:
        The mask, or ``None`` when Arrow cannot look up a key type (then use every row).
    """
    mask = np.ones(build.num_rows, dtype=bool)
    for i, (key, typ) in enumerate(zip(build_keys, key_types, strict=True)):
        wanted = pa.chunked_array(
            [c for table, keys in probes
             for c in without_negative_zero(table.column(keys[i]).cast(typ)).chunks], type=typ)
        col = without_negative_zero(build.column(key).cast(typ))
        try:
            found = pc.is_in(col, value_set=pc.unique(wanted.drop_null()))
        except pa.ArrowNotImplementedError:
            return None
        hit = np.asarray(found.to_numpy(zero_copy_only=False), dtype=bool)
        if null_is_value and wanted.null_count:
            hit |= np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        mask &= hit
    return mask


def has_null_key(table: pa.Table, keys: Sequence[str]) -> NDArray[np.bool_]:
    """Return, per row of ``table``, whether any of its ``keys`` columns is NULL."""
    mask = np.zeros(table.num_rows, dtype=bool)
    for k in keys:
        mask |= np.asarray(table.column(k).is_null().to_numpy(zero_copy_only=False), dtype=bool)
    return mask
