"""What a PySpark Python worker needs once, and the guard that keeps workers on the right code.

:func:`prepare_worker` is the first call of every operator shim (``join/shim.py``,
``window/shim.py``, through :func:`interlace.operators.common.shim.start_call`);
:func:`guard_source_checkout` runs on the driver when an operator prepares its input.
"""

from __future__ import annotations

import gc
import itertools
import operator
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from interlace.operators.errors import ConfigError

__all__ = [
    "IMPORT_CACHE_FAST_PATH_ENV",
    "PADDING_FAST_PATH_ENV",
    "PYSPARK_PADDING_WARNING",
    "WORKER_GC_FREEZE_ENV",
    "install_import_cache_fast_path",
    "install_padding_fast_path",
    "guard_source_checkout",
    "prepare_worker",
]

#: Environment variable of the Python workers: ``0`` keeps their garbage collector untouched
#: (:func:`prepare_worker`). On a cluster: ``spark.executorEnv.INTERLACE_WORKER_GC_FREEZE=0``.
WORKER_GC_FREEZE_ENV = "INTERLACE_WORKER_GC_FREEZE"
#: Environment variable of the Python workers: ``0`` leaves pandas' concatenation as it is
#: (:func:`install_padding_fast_path`). On a cluster:
#: ``spark.executorEnv.INTERLACE_WORKER_PADDING_FAST_PATH=0``.
PADDING_FAST_PATH_ENV = "INTERLACE_WORKER_PADDING_FAST_PATH"
#: Environment variable of the Python workers: ``0`` leaves ``importlib.invalidate_caches`` as
#: it is (:func:`install_import_cache_fast_path`). On a cluster:
#: ``spark.executorEnv.INTERLACE_WORKER_IMPORT_CACHE_FAST_PATH=0``.
IMPORT_CACHE_FAST_PATH_ENV = "INTERLACE_WORKER_IMPORT_CACHE_FAST_PATH"
#: The pandas 2.x deprecation PySpark's own ``applyInPandasWithState`` worker code triggers.
PYSPARK_PADDING_WARNING = "The behavior of DataFrame concatenation with empty or all-NA entries"
_worker_prepared = False


def prepare_worker() -> bool:
    """Once per PySpark Python worker: freeze its garbage collector, speed up PySpark's padding.

    **The GC freeze.** Collect, then freeze what is alive (``gc.freeze()``). A reused PySpark
    worker runs a full ``gc.collect()`` after every task (``pyspark/daemon.py``)
    and Python runs more full collections as the operators allocate; each walks every object
    the worker's imports left behind (pandas, pyarrow, pyspark, interlace). On the join
    benchmark: 40 full collections, 1.8 CPU-s per run (about 45 ms each), 40 % of the Python
    workers' CPU (docs/performance.md, "Worker garbage collection"). Frozen objects stay
    where they are and are still freed by reference counting; the cycle collector merely stops
    re-examining them, so only a reference cycle that was already alive at the first call and
    dies later is never reclaimed (bounded: once per worker process). Skipped when the
    environment variable ``INTERLACE_WORKER_GC_FREEZE`` is ``0``.

    **The padding.** :func:`install_padding_fast_path`, unless the environment variable
    ``INTERLACE_WORKER_PADDING_FAST_PATH`` is ``0``.

    **The import caches.** :func:`install_import_cache_fast_path` on PySpark 3.5, 4.0 and 4.1,
    unless the environment variable ``INTERLACE_WORKER_IMPORT_CACHE_FAST_PATH`` is ``0``.

    **The warning.** Also ignore the FutureWarning PySpark's padding triggers.
    PySpark 4.3's ``applyInPandasWithState`` worker (``construct_record_batch`` in
    ``pyspark/worker.py``) pads every Arrow batch it sends back with an object-typed frame
    (``dict.fromkeys(columns)``) and concatenates it with the function's output; pandas 2.x
    then warns ``The behavior of DataFrame concatenation with empty or all-NA entries is
    deprecated`` once per worker process, whatever the function yields, because excluding the
    padding keeps the float and timestamp columns' dtypes. The filter matches only that
    message (interlace's own concatenations never raise it: they pass no empty or all-NA
    frames).

    Does nothing outside a PySpark worker (``pyspark.worker`` not imported: the driver, the
    local runner, tests). Returns whether it froze the garbage collector now.
    """
    global _worker_prepared
    if _worker_prepared:
        return False
    _worker_prepared = True
    if "pyspark.worker" not in sys.modules:
        return False
    frozen = os.environ.get(WORKER_GC_FREEZE_ENV) != "0"
    if frozen:
        gc.collect()
        gc.freeze()
    if os.environ.get(PADDING_FAST_PATH_ENV) != "0":
        install_padding_fast_path()
    if os.environ.get(IMPORT_CACHE_FAST_PATH_ENV) != "0":
        install_import_cache_fast_path()
    warnings.filterwarnings("ignore", message=PYSPARK_PADDING_WARNING, category=FutureWarning)
    return frozen


def install_padding_fast_path() -> bool:
    """Make pandas' check of an all-NA ``object`` block O(1) Python calls when its values are one.

    PySpark 4.3's ``applyInPandasWithState`` worker (``construct_record_batch`` in
    ``pyspark/worker.py``) pads the few state rows of each Arrow batch it sends back with an
    empty frame of four ``object`` columns, all the same NaN, as many rows as the batch's
    output rows, and ``pd.concat``-s them. pandas 2.x then asks, of that block, whether every
    value is a valid NA for the result's dtype (``JoinUnit._is_valid_na_for`` in
    ``pandas/core/internals/concat.py``): a Python call per value, 2-3.6 CPU-µs per output
    row (bench/pyspark_output_path.py), a fifth of the Python workers' CPU on the hopping
    window benchmark (docs/joins.md, "PySpark's output padding").

    The replacement answers the same question exactly: when every value of the block is one
    and the same object (``is``, checked at C speed), ``all(is_valid_na_for_dtype(x, dtype)
    for x in values)`` is ``is_valid_na_for_dtype(values[0], dtype)``, asked once (the block
    must still be all-NA, ``is_na``, as in the original); any other block goes to pandas' own
    method. Installed once per process, only where pandas 2.x has that method (pandas 3 does
    not need it: the same padding costs it a tenth). Returns whether it installed it now.
    """
    try:
        from pandas.core.internals import concat as pandas_concat
    except ImportError:
        return False
    unit = getattr(pandas_concat, "JoinUnit", None)
    original = getattr(unit, "_is_valid_na_for", None)
    is_valid = getattr(pandas_concat, "is_valid_na_for_dtype", None)
    if original is None or is_valid is None or getattr(original, "_interlace", False):
        return False

    def _is_valid_na_for(self: Any, dtype: Any) -> bool:
        values = self.block.values
        if self.block.dtype == object and values.size > 1:
            flat = values.ravel(order="K")
            first = flat[0]
            if all(map(operator.is_, flat, itertools.repeat(first))):
                return bool(self.is_na) and bool(is_valid(first, dtype))
        return bool(original(self, dtype))

    _is_valid_na_for._interlace = True  # type: ignore[attr-defined]
    _is_valid_na_for.__wrapped__ = original  # type: ignore[attr-defined]
    _is_valid_na_for.__doc__ = original.__doc__
    unit._is_valid_na_for = _is_valid_na_for  # type: ignore[union-attr]
    return True


def install_import_cache_fast_path(force: bool = False) -> bool:
    """Invalidate the import caches only when ``sys.path`` changed, as PySpark 4.2+ does.

    PySpark 3.5, 4.0 and 4.1's workers call ``importlib.invalidate_caches()`` at the start of
    every task (``setup_spark_files`` in ``pyspark/worker_util.py``; ``main`` in 3.5's
    ``pyspark/worker.py``). On Python 3.10+ that makes every ``zipimporter`` on ``sys.path``
    re-read its zip's directory (``pyspark.zip``, py4j's): on the hopping window benchmark
    under 4.0, 81 % of the Python workers' samples (py-spy), and interlace at 0.87-1.46x native
    on 3.5 / 4.0 / 4.1 instead of 2.1x on 4.2 (docs/performance.md, "Per PySpark line"). PySpark 4.2
    calls it only when the task added a path (``path_changed``); the replacement does the
    same: it calls the original when ``sys.path`` differs from what it was at the last call,
    and otherwise returns at once. A file added to a folder already on the path is still
    found: the path finders notice a folder's new modification time themselves.

    Installed once per process, only where this PySpark invalidates at every task
    (:func:`interlace.operators.common.compat.pyspark_invalidates_import_caches_every_task`;
    ``force`` for tests). Returns whether it installed it now.
    """
    import importlib

    from interlace.operators.common.compat import pyspark_invalidates_import_caches_every_task

    original = importlib.invalidate_caches
    if getattr(original, "_interlace", False):
        return False
    if not (force or pyspark_invalidates_import_caches_every_task()):
        return False
    seen = [tuple(sys.path)]

    def invalidate_caches() -> None:
        path = tuple(sys.path)
        if path != seen[0]:
            seen[0] = path
            original()

    invalidate_caches._interlace = True  # type: ignore[attr-defined]
    invalidate_caches.__wrapped__ = original  # type: ignore[attr-defined]
    invalidate_caches.__doc__ = original.__doc__
    importlib.invalidate_caches = invalidate_caches
    return True


def guard_source_checkout(spark: Any) -> None:
    """Make sure Spark's local Python workers import the installed interlace, not a checkout.

    PySpark starts its workers with ``python -m pyspark.daemon`` in the driver's working
    directory, so Python puts that directory first on their ``sys.path``. Run from the root of
    an interlace source checkout with a regular (non-editable) install, the checkout's
    ``interlace/`` folder (which has no ``operators`` subpackage: that lives in ``operators/``)
    would shadow the installed package and every task would fail with ``No module named
    'interlace.operators'``. When the working directory holds an ``interlace`` package that is
    not the one this driver imported, the workers get ``PYTHONSAFEPATH=1`` (Python 3.11+: the
    working directory is not put on ``sys.path``); on Python 3.10 this raises
    :class:`ConfigError` saying what to do. Does nothing over Spark Connect (no SparkContext).
    """
    shadow = Path.cwd() / "interlace" / "__init__.py"
    if not shadow.is_file():
        return
    # The package this module belongs to is imported already (sys.modules, not an import:
    # interlace's __init__ imports the operators, which import this module).
    imported = Path(sys.modules["interlace"].__file__ or "").resolve().parent
    if shadow.resolve().parent == imported:
        return  # the checkout *is* the imported package (editable install): workers agree
    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect: the workers run beside the server, not here
        return
    if sys.version_info >= (3, 11):
        sc.environment["PYTHONSAFEPATH"] = "1"
        return
    msg = (
        f"the current directory {Path.cwd()} holds interlace's source folder `interlace/`, "
        "which would shadow the installed interlace in Spark's Python workers (No module "
        "named 'interlace.operators'); run from another directory, or install the checkout "
        "in editable mode: pip install -e ."
    )
    raise ConfigError(msg)
