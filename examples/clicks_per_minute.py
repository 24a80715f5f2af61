"""Build the ``clicks_per_minute.toml`` pipeline in Python and print it as TOML.

Run from the repository root::

    python examples/clicks_per_minute.py

``tests/unit/test_pipeline.py`` checks that this pipeline equals
``Pipeline.load("examples/clicks_per_minute.toml")``.
"""

from __future__ import annotations

from interlace import Aggregation, Window
from interlace.pipeline import Pipeline, Source, SparkSettings, Target


def build() -> Pipeline:
    """Return the clicks-per-minute pipeline."""
    return Pipeline(
        name="clicks-per-minute",
        sources=[
            Source(
                name="clicks",
                format="json",
                path="data/clicks",
                schema="user STRING, page STRING, click_ts TIMESTAMP",
                event_time_column="click_ts",
                options={"maxFilesPerTrigger": "1"},
            )
        ],
        window=Window(
            kind="tumbling",
            duration_ms=60_000,
            event_time_column="click_ts",
            lateness_ms=30_000,
            group_by=["user"],
            late_data="reopen",
            allowed_lateness_ms=120_000,
            max_groups_per_window=100_000,
            key_groups=8,
            aggregations=[
                Aggregation(agg="count", as_="clicks"),
                Aggregation(agg="count_distinct", column="page", mode="approximate",
                            as_="unique_pages"),
            ],
        ),
        target=Target(
            kind="duckdb",
            path="out/clicks.duckdb",
            table="clicks_per_minute",
            key=["window_start", "window_end", "user"],
        ),
        spark=SparkSettings(checkpoint="out/checkpoints/clicks-per-minute"),
    )


if __name__ == "__main__":
    print(build().to_toml(), end="")
