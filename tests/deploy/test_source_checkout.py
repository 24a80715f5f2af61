"""Spark's local Python workers start in the driver's working directory, which Python puts first
on their ``sys.path``: a folder there named ``interlace`` (a source checkout's root, with a
regular install) would shadow the installed package. interlace starts them with
``PYTHONSAFEPATH=1`` in that case (issue 10); this runs a real join from such a folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

SMOKE = Path(__file__).resolve().parents[2] / ".ci" / "checkout_smoke.py"


def test_a_join_runs_from_a_folder_whose_interlace_would_shadow_the_package(tmp_path):
    fake = tmp_path / "interlace"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        'raise ImportError("the folder\'s own interlace/ was imported: it shadowed the package")\n')
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, str(SMOKE)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "joined rows equal the oracle's" in proc.stdout
    assert "shadowed the package" not in proc.stderr
