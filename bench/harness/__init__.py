"""One benchmark harness for every interlace operator (``bench/run.py``, one entry point).

* :mod:`harness.main`: the subcommands (``throughput``, ``curves``, ``state ...``,
  ``profile ...``, ``micro ...``, ...), each module's ``parser()`` and ``main(argv)``;
* :mod:`harness.cli`: ``throughput`` (and ``state sweep``); :mod:`harness.curves`: ``curves``;
* :mod:`harness.tools`: the measurements outside the registry, one module each;
* :mod:`harness.registry`: the :class:`~harness.registry.Workload` types and ``register``,
  called by :mod:`harness.joins`, :mod:`harness.windows` and :mod:`harness.tables`;
  :mod:`harness.workloads` imports those three and answers ``load`` / ``select``;
* :mod:`harness.spark`: the session, ``--conf``, state stores, join state formats;
* :mod:`harness.cpu`: CPU seconds from /proc; :mod:`harness.run`: one timed query;
* :mod:`harness.compare`: output comparison; :mod:`harness.report`: ratios, markdown, JSON;
* :mod:`harness.floor` and :mod:`harness.variants`: the no-op floor and join shim variants
  (:mod:`harness.join_variants`).

``bench/`` is on ``sys.path`` when a script there runs, so the package imports as
``harness`` (not ``bench.harness``: the repository root must not shadow an installed
interlace, e.g. in bench/run.py ab's runs of another build).
"""
