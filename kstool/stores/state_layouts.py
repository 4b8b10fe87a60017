"""The versions of how kstool keeps per-task stores in Spark's state; a checkpoint keeps the
layout it began with, in its app's manifest (state_layout).

ENTRIES      an entry per store key (checkpoints begun before the shards)
SHARDS       shards of a few thousand entries (kstool.tasks.shards)
OWNER_SHARDS shards where a stream-stream join's window stores keep each record key's entries together
STAGES       a topology's stages in stateful operators of their own (a table aggregation's rows and
             groups, a foreign-key join's three)
"""

from __future__ import annotations

STATE_LAYOUT_ENTRIES, STATE_LAYOUT_SHARDS, STATE_LAYOUT_OWNER_SHARDS, STATE_LAYOUT_STAGES = 1, 2, 3, 4
