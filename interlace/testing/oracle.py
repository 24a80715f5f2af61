"""The join oracle's public import path: a re-export of :mod:`interlace.testing.oracles`.

The reference model of the stream-stream join lives in
:mod:`interlace.testing.oracles.join`, the Spark layer it shares with the window oracle in
:mod:`interlace.testing.oracles.spark_rules`, the shared spec fields in
:mod:`interlace.testing.oracles.resolve`, and the output rows (dead letters,
:func:`canonical_rows`) in :mod:`interlace.testing.oracles.rows`. This module keeps the
documented import path working and exports the public names of those four modules:

>>> from interlace.testing.oracle import DEAD_LETTER_COLUMN, canonical_rows, oracle_join
>>> canonical_rows([{"b": 1, DEAD_LETTER_COLUMN: None}])
[(('_dead_letter', None), ('b', 1))]
"""

from interlace.testing.log import JoinBatch, JoinLog, to_us
from interlace.testing.oracles import join, resolve, rows, spark_rules
from interlace.testing.oracles.join import *  # noqa: F403 -- exactly join.__all__
from interlace.testing.oracles.resolve import *  # noqa: F403 -- exactly resolve.__all__
from interlace.testing.oracles.rows import *  # noqa: F403 -- exactly rows.__all__
from interlace.testing.oracles.spark_rules import *  # noqa: F403 -- exactly spark_rules.__all__

__all__ = ["JoinBatch", "JoinLog", "to_us"]
__all__ += join.__all__
__all__ += resolve.__all__
__all__ += rows.__all__
__all__ += spark_rules.__all__
