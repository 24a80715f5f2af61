"""Helpers shared by the CLI tests: run the CLI, read a DuckDB table back as rows.

``tests/cli`` is on pytest's ``pythonpath`` (pyproject.toml), so test modules import this as
``cli_support``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd

#: The command line, as a user runs it, in this interpreter.
INTERLACE = [sys.executable, "-m", "interlace.cli"]


def cli(*args, cwd, timeout=600, check=True):
    """Run ``interlace *args`` in ``cwd``; raise with its output when ``check`` and it fails."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run([*INTERLACE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def run_here(spark, folder: Path, pipeline: str) -> str:
    """Run ``folder/pipeline`` as ``interlace run`` does, but in this process on the test
    session (no JVM to start, ~20 s less per run); return its progress output.

    For tests of what a pipeline computes. What only the command line does (exit codes,
    messages, the log file, the live progress line, Ctrl-C) is tested with :func:`cli`.
    """
    import io

    from interlace.operators.common.compat import conf_items
    from interlace.preflight import preflight
    from interlace.runner import run_pipeline

    out = io.StringIO()
    before = conf_items(spark)
    try:
        run_pipeline(preflight(folder / pipeline, base=folder), base=folder, spark=spark,
                     progress=out)
    finally:
        # The pipeline's [spark] settings (its state store, ...) leave the shared session.
        after = conf_items(spark)
        for key in after.keys() - before.keys():
            spark.conf.unset(key)
        for key, value in before.items():
            if after.get(key) != value:
                spark.conf.set(key, value)
    return out.getvalue()


def read_table(db: Path, table: str) -> pd.DataFrame:
    """Return every row of ``table`` in the DuckDB file ``db`` (opened read-only)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(f"SELECT * FROM {table}").fetchdf()
    finally:
        con.close()


def rows_of(df: pd.DataFrame) -> list[dict]:
    """Return the frame's rows as dicts of plain values: NaN / NaT -> None, datetimes."""
    out = []
    for rec in df.to_dict("records"):
        out.append({k: (None if (isinstance(v, float) and pd.isna(v)) or v is pd.NaT else
                        (v.to_pydatetime() if isinstance(v, pd.Timestamp) else v))
                    for k, v in rec.items()})
    return out
