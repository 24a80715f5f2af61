"""What every operator shares, written once: each module holds one theme.

* :mod:`.names`: the reserved prefix and the internal and output column names.
* :mod:`.spec`: the ``LateData`` / ``TimeMode`` vocabulary and the late-data fields of a spec.
* :mod:`.checks`: spec-field and input-DataFrame validation (``ConfigError`` messages).
* :mod:`.watermark`: the operator watermark ``wm`` and the event-time timeouts in Spark's domain.
* :mod:`.keys`: key tuples as shared integer codes (one input, or two inputs' keys at once).
* :mod:`.keytypes`: the type two inputs' key columns are compared in (Arrow and Spark).
* :mod:`.tables`: the table joins' vocabulary (``emit``, ``late_data`` without ``reopen``,
  value and tombstone columns).
* :mod:`.deadletters`: the JSON dead-letter rows (SEMANTICS §4).
* :mod:`.arrow`: Spark schemas as Arrow schemas, pandas frames to Arrow tables and back.
* :mod:`.counters`: the per-call counters the workers send to a Spark accumulator.
* :mod:`.worker`: what a PySpark Python worker needs once (GC freeze, warnings) and the
  source-checkout guard.
* :mod:`.connect`: Spark Connect detection.
* :mod:`.shim`: the pieces of every ``applyInPandasWithState`` shim and prepared input.
* :mod:`.docs`: docstring text several public objects share (:func:`~.docs.fill_doc`).

The operators themselves live beside this package (``operators/join/``,
``operators/window/``, ``operators/stream_table/``); each imports what it needs from these
modules directly.
"""

__all__: list[str] = []
