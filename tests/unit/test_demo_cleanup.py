"""``interlace demo`` without ``--workdir`` leaves no temporary folder behind (issue 11)."""

from __future__ import annotations

import pytest

import interlace.demo as demo


def test_the_demos_temporary_folder_is_removed_also_on_failure(monkeypatch, tmp_path):
    monkeypatch.setattr(demo.tempfile, "tempdir", str(tmp_path))
    seen = []

    def fake_run(root, spark, quiet, master, started, *, keep):
        (root / "demo.duckdb").write_text("x")
        seen.append((root, keep))
        if len(seen) == 2:
            raise RuntimeError("boom")
        return "result"

    monkeypatch.setattr(demo, "_run_demo", fake_run)
    assert demo.run_demo() == "result"
    with pytest.raises(RuntimeError):
        demo.run_demo()
    assert [keep for _, keep in seen] == [False, False]
    assert all(not root.exists() for root, _ in seen) and not any(tmp_path.iterdir())
    kept = tmp_path / "kept"
    assert demo.run_demo(kept) == "result"
    assert (kept / "demo.duckdb").is_file() and seen[-1][1] is True
