"""State-size scaling: the same small batch through a table-table join whose tables hold 10
keys, and whose tables hold many. Per-batch work must follow the batch, not the state (#20)."""

from __future__ import annotations

from bench.load import create_topic, load

PARTITIONS = 2
SMALL_BATCH = 10


def small_batch_against(run_once, env, bootstrap: str, master: str, keys: int) -> dict:
    """First run over `keys` keys per table, then a --once over SMALL_BATCH updates of them."""
    topic = f"bench-scaling-{keys}"
    for side in ("", "-right"):
        create_topic(bootstrap, topic + side, PARTITIONS)
        load(bootstrap, topic + side, ((f"k{i}".encode(), f"v{i}".encode()) for i in range(keys)), PARTITIONS,
             by_key=True)
    args = ("--kind", "table-table", "--how", "outer")
    first = run_once(env, topic, f"{topic}-app", master, "join", args)
    for side in ("", "-right"):
        load(bootstrap, topic + side, ((f"k{i}".encode(), b"changed") for i in range(SMALL_BATCH // 2)), PARTITIONS,
             by_key=True)
    second = run_once(env, topic, f"{topic}-app", master, "join", args)
    return {"keys_per_table": keys, "first_run": first, "small_batch": second}


def state_scaling(run_once, env, bootstrap: str, master: str, keys: int) -> dict:
    small = small_batch_against(run_once, env, bootstrap, master, 10)
    large = small_batch_against(run_once, env, bootstrap, master, keys)
    ratio = large["small_batch"]["processing_s"] / small["small_batch"]["processing_s"]
    return {"small_state": small, "large_state": large, "processing_ratio": round(ratio, 2)}
