"""The filled registry: imports the family modules (which register their workloads at import).

:mod:`harness.registry` holds the types and :func:`~harness.registry.register` and imports no
family module; the family modules import it. This module imports both, so no module imports,
directly or transitively, a module that imports it back.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from harness import joins, tables, windows  # noqa: F401 - registration on import
from harness.registry import FAMILIES, REGISTRY, Workload


def load() -> dict[str, Workload]:
    """Every registered workload, by name, in family order."""
    order = sorted(REGISTRY.values(), key=lambda w: FAMILIES.index(w.family))
    return {w.name: w for w in order}


def select(patterns: Sequence[str]) -> list[Workload]:
    """Workloads matching any of ``patterns`` (names or globs, ``join-*``), in registry order.

    Raises ``ValueError`` naming a pattern that matches nothing.
    """
    reg = load()
    chosen: list[str] = []
    for pat in patterns:
        hits = [n for n in reg if reg[n].family == pat or (
            fnmatch.fnmatchcase(n, pat) and (reg[n].in_full or n == pat))]
        if not hits:
            msg = f"no workload matches {pat!r}; registered: {', '.join(reg)}"
            raise ValueError(msg)
        chosen += [h for h in hits if h not in chosen]
    return [reg[n] for n in reg if n in chosen]
