"""Generate docs/api.md from the public docstrings: ``python docs/gen_api.py``."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

MODULES = [
    "interlace",
    "interlace.operators.join",
    "interlace.operators.join.spec",
    "interlace.operators.join.plan",
    "interlace.operators.join.step",
    "interlace.operators.join.shim",
    "interlace.operators.window",
    "interlace.operators.window.spec",
    "interlace.operators.window.plan",
    "interlace.operators.window.step",
    "interlace.operators.window.shim",
    "interlace.operators.stream_table",
    "interlace.operators.stream_table.spec",
    "interlace.operators.stream_table.plan",
    "interlace.operators.stream_table.step",
    "interlace.operators.stream_table.shim",
    "interlace.operators.foreign_key",
    "interlace.operators.foreign_key.spec",
    "interlace.operators.foreign_key.plan",
    "interlace.operators.foreign_key.step",
    "interlace.operators.foreign_key.shim",
    "interlace.operators.table_aggregate",
    "interlace.operators.table_aggregate.spec",
    "interlace.operators.table_aggregate.plan",
    "interlace.operators.table_aggregate.step",
    "interlace.operators.table_aggregate.shim",
    "interlace.pipeline",
    "interlace.pipeline.model",
    "interlace.pipeline.parts",
    "interlace.pipeline.stages",
    "interlace.pipeline.kinds",
    "interlace.pipeline.values",
    "interlace.pipeline.ddl",
    "interlace.runner",
    "interlace.run_inputs",
    "interlace.run_progress",
    "interlace.inspection",
    "interlace.inspection_items",
    "interlace.chain",
    "interlace.connectors",
    "interlace.connectors.files",
    "interlace.connectors.kafka",
    "interlace.connectors.duckdb",
    "interlace.connectors.parquet",
    "interlace.connectors.console",
    "interlace.connectors.jars",
    "interlace.sinks",
    "interlace.metrics",
    "interlace.operators.common.counters",
    "interlace.state.blob",
    "interlace.state.buffers",
    "interlace.state.tables",
    "interlace.state.foreign_key",
    "interlace.state.table_aggregate",
    "interlace.state.accumulators",
    "interlace.state.keygroups",
    "interlace.testing",
    "interlace.testing.chain",
    "interlace.testing.local_table_aggregate",
    "interlace.testing.oracles.table_aggregate",
    "interlace.testing.kafka",
]


def render() -> str:
    """Return the markdown API reference."""
    import importlib

    out = ["# API reference", "", "Generated from the docstrings by `docs/gen_api.py`; do not edit.", ""]
    for name in MODULES:
        mod = importlib.import_module(name)
        out += [f"## `{name}`", "", inspect.cleandoc(mod.__doc__ or ""), ""]
        for attr in getattr(mod, "__all__", []):
            obj = getattr(mod, attr)
            if getattr(obj, "__module__", name) != name or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            try:
                sig = str(inspect.signature(obj))
            except (TypeError, ValueError):
                sig = ""
            # Defaults like sys.stderr repr differently under pytest's capture: name them.
            sig = re.sub(r"<_io\.TextIOWrapper .*?encoding='[^']*'>", "sys.stderr", sig)
            out += [f"### `{attr}{sig}`", "", inspect.cleandoc(obj.__doc__ or ""), ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    Path(__file__).with_name("api.md").write_text(render())
