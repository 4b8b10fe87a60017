"""State-size scaling: the same small batch through an app whose state holds 10 keys, and
through one whose state holds many. Per-batch work must follow the batch, not the state (#20).

Two shapes: a table-table join (stores read by key) and a windowed count with one-day
windows (every key's window stays open: the window ends are found through the index store)."""

from __future__ import annotations

from bench.load import create_topic, load

PARTITIONS = 2
SMALL_BATCH = 10
# name -> (topology, its arguments, its input topics' suffixes)
SHAPES = {
    "table_table_join": ("join", ("--kind", "table-table", "--how", "outer"), ("", "-right")),
    "windowed_count": ("aggregate", ("--window", "tumbling:1d"), ("",)),
}


def small_batch_against(run_once, env, bootstrap: str, master: str, keys: int, shape: str) -> dict:
    """First run over `keys` keys (per table), then a --once over SMALL_BATCH updates of them."""
    topology, args, sides = SHAPES[shape]
    topic = f"bench-scaling-{shape.replace('_', '-')}-{keys}"
    for side in sides:
        create_topic(bootstrap, topic + side, PARTITIONS)
        load(bootstrap, topic + side, ((f"k{i}".encode(), f"{i}".encode()) for i in range(keys)), PARTITIONS,
             by_key=True)
    first = run_once(env, topic, f"{topic}-app", master, topology, args)
    for side in sides:
        load(bootstrap, topic + side, ((f"k{i}".encode(), b"1") for i in range(SMALL_BATCH // len(sides))),
             PARTITIONS, by_key=True)
    second = run_once(env, topic, f"{topic}-app", master, topology, args)
    return {"keys": keys, "first_run": first, "small_batch": second}


def state_scaling(run_once, env, bootstrap: str, master: str, keys: int) -> dict:
    """Per shape: the small batch's processing time against 10 keys and against `keys`."""
    results = {}
    for shape in SHAPES:
        small = small_batch_against(run_once, env, bootstrap, master, 10, shape)
        large = small_batch_against(run_once, env, bootstrap, master, keys, shape)
        ratio = large["small_batch"]["processing_s"] / small["small_batch"]["processing_s"]
        results[shape] = {"small_state": small, "large_state": large, "processing_ratio": round(ratio, 2)}
    return results


def figures(scaling: dict) -> dict:
    return {f"{shape}_small_batch_large_state_ratio": s["processing_ratio"] for shape, s in scaling.items()}


def describe(scaling: dict) -> str:
    return "\n".join(
        f"a {s['small_state']['small_batch']['records']}-record batch through the {shape.replace('_', ' ')}: "
        f"{s['small_state']['small_batch']['processing_s']}s against 10 keys, "
        f"{s['large_state']['small_batch']['processing_s']}s against {s['large_state']['keys']:,} "
        f"(first run over those: {s['large_state']['first_run']['processing_s']}s)"
        for shape, s in scaling.items()) + "\n"
