"""What the bench's modes share (`python -m bench` and its siblings: versus, warm, latency,
scale_out, shard_sizes, engine): running kstool and the peers, the machine's facts, the targets
and the results file."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from bench import latency as continuous, scaling
from bench.brokers import BROKERS, bench_broker
from bench.load import create_topic, keyed_records, load, text_lines
from bench.measure import ProcessTree, cold_env
from kstool.kafka.client import BULK_READ_SETTINGS

ROOT = Path(__file__).resolve().parent.parent
KSTOOL = [sys.executable, "-m", "kstool.commands.main"]
QUIX_VENV = ROOT / "bench" / ".venv-quix"
QUIX_VERSION = "3.28.1"
TARGETS = {
    "count_per_key_records_per_s": (">=", 250_000),
    "count_vs_quix_ratio": (">=", 3.0),
    "once_1m_count_wall_s": ("<=", 15.0),
    "once_1m_wordcount_wall_s": ("<=", 15.0),
    "windowed_count_5m_records_per_s": (">=", 300_000),  # #35: cold; 400k through the engine
    "windowed_count_1m_records_per_s": (">=", 250_000),
    "windowed_count_final_1m_records_per_s": (">=", 250_000),
    "windowed_final_vs_quix_ratio": (">=", 10.0),
    "hopping_count_1m_records_per_s": (">=", 250_000),
    "session_count_1m_records_per_s": (">=", 100_000),
    "table_table_join_2x1m_records_per_s": (">=", 150_000),
    "stream_table_join_records_per_s": (">=", 150_000),
    "stream_stream_join_records_per_s": (">=", 150_000),
    **{f"{continuous.step_name(app)}_{quantile}": ("<=", limit) for app in continuous.APPS
       for quantile, limit in (("p50_s", 1.0), ("p99_s", 2.0))},
    "consume_jsonl_records_per_s": (">=", 150_000),
    # #70: kstool's throughput over kcat's on the same records (bench.one_liners)
    "consume_jsonl_vs_kcat_ratio": (">=", 1.0),
    "consume_format_vs_kcat_ratio": (">=", 1.0),
    "produce_vs_kcat_ratio": (">=", 0.8),
    "help_start_s": ("<=", 0.15),  # #36
    # #38, #71: rate on 2 workers / (2 × rate on 1), one core each, under CPU quotas
    "count_per_key_efficiency": (">=", 0.8),
    "windowed_count_efficiency": (">=", 0.8),
    "stream_table_join_efficiency": (">=", 0.7),
    "table_aggregate_efficiency": (">=", 0.7),
    "foreign_key_join_efficiency": (">=", 0.7),
    "produce_100k_lines_wall_s": ("<=", 1.5),
    "table_table_join_small_batch_large_state_ratio": ("<=", 1.5),
    "windowed_count_small_batch_large_state_ratio": ("<=", 1.5),
}


def kstool(env, *args, **kwargs):
    return subprocess.run([*KSTOOL, *args], env=env, capture_output=True, text=True, **kwargs)


def ceiling(bootstrap: str, topic: str, partitions: int, expected: int) -> dict:
    # the same fetch sizes kstool's readers use, so the ceiling is one
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ceiling",
                         "enable.auto.commit": False, **BULK_READ_SETTINGS})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, started = 0, time.perf_counter()
    while seen < expected:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                seen += 1
    seconds = time.perf_counter() - started
    consumer.close()
    return {"records": seen, "seconds": round(seconds, 2), "records_per_s": round(seen / seconds)}


def run_once(env, topic: str, app: str, master: str, topology: str = "wordcount", extra: tuple = ()) -> dict:
    started = time.perf_counter()
    if topology == "aggregate":
        extra = ("--agg", "count", *extra)
    inputs = ["--left", topic, "--right", f"{topic}-right"] if topology == "join" else ["--input", topic]
    proc = subprocess.Popen([*KSTOOL, "run", topology, *extra, *inputs, "--output", f"{app}-out",
                             "--app-id", app, "--once", "--report", "json", "--master", master,
                             "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tree = ProcessTree(proc.pid)
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    peak, cpu_s = tree.stop()
    if proc.returncode != 0:
        raise SystemExit(f"kstool run failed: {err.strip()}")
    summary = json.loads(out)
    return {"records": summary["input_records"], "wall_s": round(wall, 2),
            "spark_start_s": summary["spark_start_seconds"],
            "processing_s": summary["processing_seconds"],
            "records_per_s": round(summary["input_records"] / summary["processing_seconds"]),
            "batches": summary["batches"], "peak_rss_mb": round(peak / 2**20),
            "cpu_s": round(cpu_s, 2)}  # the command's: in a cluster, the driver's


def embedded_ceiling(records: int) -> dict:
    """The raw consumer's ceiling on the embedded broker too, in the same run: the same records
    loaded into one of its own, which is stopped then."""
    env = cold_env("kstool-bench-embedded-")
    with bench_broker("embedded", env) as bootstrap:
        create_topic(bootstrap, "bench-keys", 2)
        load(bootstrap, "bench-keys", keyed_records(records), 2)
        return ceiling(bootstrap, "bench-keys", 2, records)


def quix(bootstrap: str, topic: str, expected: int, *mode: str) -> dict:
    """Quix Streams over `topic` (bench/peers/quix.py; mode: count, or as it says)."""
    python = QUIX_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(QUIX_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"quixstreams=={QUIX_VERSION}"],
                       check=True)
    with tempfile.TemporaryDirectory() as state:
        started = time.perf_counter()
        proc = subprocess.run([str(python), str(ROOT / "bench" / "peers" / "quix.py"), bootstrap,
                               topic, str(expected), state, *mode], capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - started  # the whole command: its start and group join too
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["records_per_s"] = round(result["records"] / result["seconds"])
    result["seconds"] = round(result["seconds"], 2)
    result["wall_s"] = round(wall, 2)
    return result


def cold_start(env, bootstrap: str, master: str) -> dict:
    """The first run on a machine: no JVM class-data archive of its home (but the installation's,
    from `kstool engine prepare`, when it was run). A home's archive recorded after this run
    serves later runs: wait for it."""
    create_topic(bootstrap, "bench-warmup", 2)
    load(bootstrap, "bench-warmup", text_lines(1000), 2)
    result = run_once(env, "bench-warmup", "bench-warmup", master)
    wait_for_jvm_archive(env)
    return result


def wait_for_jvm_archive(env: dict) -> None:
    """Until the class-data archive a run left a recorder for (kstool.engine.spark.jvm_recorder)
    is written: a run started before would neither map it nor record one."""
    deadline = time.perf_counter() + 180
    markers = list((Path(env["KSTOOL_HOME"]) / "cache").glob("*.jvm-pid"))
    while time.perf_counter() < deadline and any(_alive(m) for m in markers):
        time.sleep(0.5)


def _alive(marker: Path) -> bool:
    pid = marker.read_text().strip() if marker.exists() else ""
    return bool(pid) and Path(f"/proc/{pid}").exists()


def consume_jsonl(env, topic: str, expected: int) -> dict:
    started = time.perf_counter()
    with open(os.devnull, "w") as sink:
        proc = subprocess.run([*KSTOOL, "consume", topic, "-e", "-o", "jsonl"], env=env, stdout=sink,
                              stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"kstool consume failed: {proc.stderr.strip()}")
    return {"records": expected, "seconds": round(seconds, 2), "records_per_s": round(expected / seconds)}


def produce_lines(env, bootstrap: str, lines: int = 100_000) -> dict:
    """`kstool produce` of text lines (the whole command, start-up included), and the peer in
    the same run: a bare confluent-kafka producer loop over the same lines with default batching."""
    data = b"".join(b"line-%d some words here\n" % i for i in range(lines))
    create_topic(bootstrap, "bench-produce", 2)
    create_topic(bootstrap, "bench-produce-peer", 2)
    started = time.perf_counter()
    proc = subprocess.run([*KSTOOL, "produce", "bench-produce"], env=env, input=data, capture_output=True)
    kstool_s = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"kstool produce failed: {proc.stderr.decode().strip()}")
    peer_s = raw_produce(bootstrap, "bench-produce-peer", data.splitlines())
    read = kstool(env, "consume", "bench-produce", "-e", "-o", "jsonl")
    return {"lines": lines, "wall_s": round(kstool_s, 3), "peer_confluent_kafka_loop_s": round(peer_s, 3),
            "read_back": len(read.stdout.splitlines())}


def raw_produce(bootstrap: str, topic: str, values: list[bytes]) -> float:
    """Seconds a bare confluent-kafka producer loop takes to write `values` (default batching):
    the floor of any Python producer."""
    started = time.perf_counter()
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    return time.perf_counter() - started


def help_start() -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([*KSTOOL, "--help"], capture_output=True, check=True)
        best = min(best, time.perf_counter() - started)
    return round(best, 3)


def machine(broker: str) -> dict:
    import confluent_kafka
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return {"cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "pyspark": pyspark.__version__, "confluent_kafka": confluent_kafka.version()[0],
            "librdkafka": confluent_kafka.libversion()[0], "java": java, "python_loop_s": python_loop_seconds(),
            "broker": BROKERS[broker]}


def python_loop_seconds() -> float:
    """One core's speed that day, best of 3: 20M additions in a Python loop. The same machine
    has run 2-3x slower on some days (bench/README.md); figures compare only at a like speed."""
    best = float("inf")
    for _ in range(3):
        started, total = time.perf_counter(), 0
        for i in range(20_000_000):
            total += i
        best = min(best, time.perf_counter() - started)
    return round(best, 2)


def check(figures: dict, targets: dict) -> dict:
    verdicts = {}
    for name, (op, target) in targets.items():
        value = figures.get(name)
        if value is None:
            verdicts[name] = {"target": f"{op} {target}", "value": None, "met": None}
            continue
        met = value >= target if op == ">=" else value <= target
        verdicts[name] = {"target": f"{op} {target}", "value": value, "met": met}
    return verdicts


def write_results(results: dict, figures: dict, prefix: str = "", targets: dict | None = None) -> None:
    """targets: a mode's own, beside TARGETS."""
    results["figures"] = figures
    results["targets"] = {k: v for k, v in check(figures, {**TARGETS, **(targets or {})}).items() if k in figures}
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{prefix}{time.strftime('%Y%m%dT%H%M%S')}.json"
    text = json.dumps(results, indent=2) + "\n"
    out.write_text(text)
    if not prefix:  # only a full run speaks for the whole bench
        (out_dir / "latest.json").write_text(text)
    print_table(results)
    print(f"\nwritten {out}")


def print_table(results: dict) -> None:
    from tabulate import tabulate

    runs = results["runs"]
    if "ceiling" in runs:
        print_runs(runs)
    if "state_scaling" in runs:
        print(scaling.describe(runs["state_scaling"]))
    if "produce_100k_lines" in runs:
        p = runs["produce_100k_lines"]
        print(f"kstool produce of {p['lines']:,} lines: {p['wall_s']}s (the whole command); a bare "
              f"confluent-kafka loop in-process: {p['peer_confluent_kafka_loop_s']}s\n")
    print(tabulate([[k, v["target"], v["value"], {True: "met", False: "NOT MET", None: "-"}[v["met"]]]
                    for k, v in results["targets"].items()], headers=["target", "wanted", "measured", ""]))


def print_runs(runs: dict) -> None:
    from tabulate import tabulate

    rows = [
        ["raw consumer (ceiling)", runs["ceiling"]["records_per_s"], runs["ceiling"]["seconds"], "", ""],
        *([["raw consumer (ceiling) on the embedded broker", runs["ceiling_embedded"]["records_per_s"],
            runs["ceiling_embedded"]["seconds"], "", ""]] if "ceiling_embedded" in runs else []),
        [f"kstool aggregate --agg count --once ({runs['count_per_key']['records']:,})",
         runs["count_per_key"]["records_per_s"], runs["count_per_key"]["wall_s"],
         runs["count_per_key"]["spark_start_s"], runs["count_per_key"]["peak_rss_mb"]],
    ]
    c = runs["count_per_key_1m"]
    rows.append(["kstool aggregate --agg count --once (1M)", c["records_per_s"], c["wall_s"], c["spark_start_s"],
                 c["peak_rss_mb"]])
    w = runs["wordcount_1m"]
    rows.append(["kstool wordcount --once (1M lines)", w["records_per_s"], w["wall_s"], w["spark_start_s"], w["peak_rss_mb"]])
    pairs = f"2x{runs['stream_stream_join']['records'] // 2:,}"
    for name, label in (("count_per_key_2m", "kstool aggregate --agg count --once (2M, 10k-record batches)"),
                        ("count_per_key_2m_apps", "kstool aggregate --agg count --once (2M, a default producer's)"),
                        ("windowed_count_5m", f"kstool aggregate --window tumbling:1s --once ({runs['windowed_count_5m']['records']:,})"),
                        ("windowed_count_1m", "kstool aggregate --window tumbling:1s --once (1M)"),
                        ("windowed_count_final_1m", "kstool aggregate --window tumbling:1s --emit final --once (1M)"),
                        ("hopping_count_1m", "kstool aggregate --window hopping:5s,1s --once (1M)"),
                        ("session_count_1m", "kstool aggregate --window session:1s --once (1M)"),
                        ("table_table_join_2x1m", "kstool join --kind table-table --how outer --once (2x1M)"),
                        ("stream_table_join", f"kstool join --kind stream-table --how left --once ({pairs})"),
                        ("stream_stream_join", f"kstool join --kind stream-stream --within 1m --once ({pairs})")):
        r = runs[name]
        rows.append([label, r["records_per_s"], r["wall_s"], r["spark_start_s"], r["peak_rss_mb"]])
    for name, label in (("quix_count_per_key", "Quix Streams count per key"),
                        ("quix_windowed_count_final_1m", "Quix Streams tumbling_window(1s).count().final() (1M)"),
                        ("quix_interval_join", f"Quix Streams join_interval(1m) ({pairs})")):
        if name in runs:
            rows.append([label, runs[name].get("records_per_s"), runs[name].get("seconds"), "", ""])
    rows.append(["kstool consume -o jsonl", runs["consume_jsonl"]["records_per_s"], runs["consume_jsonl"]["seconds"], "", ""])
    print(tabulate(rows, headers=["job", "records/s", "wall s", "spark start s", "peak RSS MB"]))
    for app, label in continuous.LABELS.items():
        lat = runs[continuous.step_name(app)]
        print(f"\ncontinuous {label} at {lat['rate']}/s: p50 {lat['p50_s']}s, p99 {lat['p99_s']}s "
              f"(first {lat['warmup_s']}s: {lat['start_p50_s']}s, {lat['start_p99_s']}s; "
              f"{lat['seen']}/{lat['markers']} markers)")
    print(f"kstool --help: {runs['help_start_s']}s\n")
