"""Key groups: balanced group values, checked against Spark's own hash partitioning."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from interlace.state.keygroups import (
    BALANCED_MAX_KEY_GROUPS,
    KEY_GROUP_ID_SCHEME,
    balanced_key_group_id,
    key_group_sql,
    spark_hash_int,
)


@given(st.integers(0, 2**31 - 1))
def test_balanced_id_hashes_to_its_key_group(group):
    x = balanced_key_group_id(group)
    assert -(2**31) <= x < 2**31
    assert spark_hash_int(x) == group


def test_balanced_ids_are_distinct():
    ids = [balanced_key_group_id(g) for g in range(BALANCED_MAX_KEY_GROUPS)]
    assert len(set(ids)) == len(ids)


def test_key_group_sql_looks_up_balanced_ids_up_to_the_limit_and_numbers_above_it():
    sql = key_group_sql(["`a`", "`b`"], 3)
    ids = ", ".join(str(balanced_key_group_id(g)) for g in range(3))
    assert sql == f"element_at(array({ids}), CAST(pmod(xxhash64(`a`, `b`), 3) AS INT) + 1)"
    big = BALANCED_MAX_KEY_GROUPS + 1
    assert key_group_sql(["`a`"], big) == f"CAST(pmod(xxhash64(`a`), {big}) AS INT)"


def test_spark_hash_int_is_sparks_hash(spark):
    from pyspark.sql import functions as F

    values = [-(2**31), -1, 0, 1, 42, 123_456_789, 2**31 - 1,
              *(balanced_key_group_id(g) for g in range(5))]
    got = (spark.createDataFrame([(v,) for v in values], "x int")
           .select(F.hash("x").alias("h")).collect())
    assert [r.h for r in got] == [spark_hash_int(v) for v in values]


@pytest.mark.parametrize(("key_groups", "partitions"), [(8, 4), (8, 3), (6, 4), (5, 2)])
def test_key_groups_spread_evenly_over_sparks_hash_partitions(spark, key_groups, partitions):
    # repartition(P, col) uses the same HashPartitioning (Murmur3, seed 42) that Spark requires
    # of a stateful operator's input, so this is where each key group's state and calls go.
    from pyspark.sql import functions as F

    df = (spark.range(4_000)
          .select(F.expr(key_group_sql(["`id`"], key_groups)).cast("int").alias("kg"))
          .repartition(partitions, "kg")
          .select("kg", F.spark_partition_id().alias("p"))
          .distinct().collect())
    groups = {r.kg for r in df}
    assert len(groups) == key_groups
    per_partition = Counter(r.p for r in df)
    assert len(df) == key_groups  # each key group sits in one partition
    lo, hi = key_groups // partitions, -(-key_groups // partitions)
    assert all(lo <= per_partition.get(p, 0) <= hi for p in range(partitions)), per_partition
    # Key group g is on partition g mod P.
    by_id = {balanced_key_group_id(g): g for g in range(key_groups)}
    assert all(r.p == by_id[r.kg] % partitions for r in df)


def test_the_id_scheme_is_part_of_both_state_fingerprints(monkeypatch):
    import interlace.operators.join.spec as join_module
    import interlace.operators.window.plan as window_module
    from interlace.operators.window import WindowPlan

    from interlace import Aggregation, Join, Window

    spec = Join(left_keys=["k"], right_keys=["k"], time_window_ms=1_000, event_time_column="ts")
    wspec = Window(kind="tumbling", duration_ms=1_000, event_time_column="ts", group_by=["k"],
                   max_groups_per_window=10,
                   aggregations=[Aggregation(agg="count", as_="n")])
    import pyarrow as pa

    schema = pa.schema([("ts", pa.timestamp("us")), ("k", pa.int64())])
    before = spec.state_fingerprint(["k"], ["k"]), WindowPlan.from_schema(wspec, schema).fp
    monkeypatch.setattr(join_module, "KEY_GROUP_ID_SCHEME", "identity")
    monkeypatch.setattr(window_module, "KEY_GROUP_ID_SCHEME", "identity")
    after = spec.state_fingerprint(["k"], ["k"]), WindowPlan.from_schema(wspec, schema).fp
    assert KEY_GROUP_ID_SCHEME != "identity"
    assert before[0] != after[0] and before[1] != after[1]
