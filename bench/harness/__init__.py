"""One benchmark harness for every interlace operator (``bench/run.py``).

* :mod:`harness.registry`: the :class:`~harness.registry.Workload` types and ``register``,
  called by :mod:`harness.joins`, :mod:`harness.windows` and :mod:`harness.tables`;
  :mod:`harness.workloads` imports those three and answers ``load`` / ``select``;
* :mod:`harness.spark`: the session, ``--conf``, state stores, join state formats;
* :mod:`harness.cpu`: CPU seconds from /proc; :mod:`harness.run`: one timed query;
* :mod:`harness.compare`: output comparison; :mod:`harness.report`: ratios, markdown, JSON;
* :mod:`harness.floor` and :mod:`harness.variants`: the no-op floor and join shim variants.

``bench/`` is on ``sys.path`` when a script there runs, so the package imports as
``harness`` (not ``bench.harness``: the repository root must not shadow an installed
interlace, e.g. in bench/run.py ab's runs of another build).
"""
