"""kstool's benchmark: `python -m bench` (or `make bench`).

On a broker of its own (Apache Kafka; `--broker embedded`: kstool's own), loads data fast, then measures in one run on the same data:
the raw consumer ceiling, kstool's count per key, wordcount, windowed count and joins
(`--once`), Quix Streams doing the same count per key, windowed count and join (in its own
virtualenv), continuous-mode end-to-end latency, `kstool consume -o jsonl` throughput, start-up
and produce one-liners, and state-size scaling. Prints a table and writes
bench/results/<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from bench import latency as continuous
from bench import scale_out, scaling
from bench.brokers import BROKERS, add_broker_option, bench_broker
from bench.load import create_topic, keyed_records, load, load_as_apps_do, text_lines
from bench.measure import PeakRss, cold_env
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
    "help_start_s": ("<=", 0.15),  # #36
    # #38: rate on 2 workers / (2 × rate on 1), one core each
    "count_per_key_efficiency": (">=", 0.8),
    "windowed_count_efficiency": (">=", 0.8),
    "stream_table_join_efficiency": (">=", 0.7),
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
    rss = PeakRss(proc.pid)
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    peak = rss.stop()
    if proc.returncode != 0:
        raise SystemExit(f"kstool run failed: {err.strip()}")
    summary = json.loads(out)
    return {"records": summary["input_records"], "wall_s": round(wall, 2),
            "spark_start_s": summary["spark_start_seconds"],
            "processing_s": summary["processing_seconds"],
            "records_per_s": round(summary["input_records"] / summary["processing_seconds"]),
            "batches": summary["batches"], "peak_rss_mb": round(peak / 2**20)}


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
    """The first run on a machine: no JVM class-data archive yet. Later runs use the archive
    this run leaves behind (written by its JVM as it exits), so wait for it."""
    create_topic(bootstrap, "bench-warmup", 2)
    load(bootstrap, "bench-warmup", text_lines(1000), 2)
    result = run_once(env, "bench-warmup", "bench-warmup", master)
    deadline = time.perf_counter() + 180
    markers = list((Path(env["KSTOOL_HOME"]) / "cache").glob("*.jvm-pid"))
    while time.perf_counter() < deadline and any(_alive(m) for m in markers):
        time.sleep(0.5)
    return result


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
    started = time.perf_counter()
    producer = Producer({"bootstrap.servers": bootstrap})
    for line in data.splitlines():
        while True:
            try:
                producer.produce("bench-produce-peer", value=line)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    peer_s = time.perf_counter() - started
    read = kstool(env, "consume", "bench-produce", "-e", "-o", "jsonl")
    return {"lines": lines, "wall_s": round(kstool_s, 3), "peer_confluent_kafka_loop_s": round(peer_s, 3),
            "read_back": len(read.stdout.splitlines())}


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


def check(figures: dict) -> dict:
    verdicts = {}
    for name, (op, target) in TARGETS.items():
        value = figures.get(name)
        if value is None:
            verdicts[name] = {"target": f"{op} {target}", "value": None, "met": None}
            continue
        met = value >= target if op == ">=" else value <= target
        verdicts[name] = {"target": f"{op} {target}", "value": value, "met": met}
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=5_000_000, help="keyed records for count per key")
    parser.add_argument("--lines", type=int, default=1_000_000, help="text lines for wordcount")
    parser.add_argument("--join-records", type=int, default=1_000_000, help="records per side of the stream-stream and stream-table joins")
    parser.add_argument("--rate", type=int, default=10_000, help="records/s in the latency test")
    parser.add_argument("--latency-seconds", type=int, default=30)
    parser.add_argument("--latency-warmup-seconds", type=int, default=15)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-quix", action="store_true")
    parser.add_argument("--only-produce", action="store_true", help="only the produce one-liner step")
    parser.add_argument("--scaling-keys", type=int, default=1_000_000,
                        help="keys per table in the state-size scaling step")
    parser.add_argument("--only-state-scaling", action="store_true", help="only the state-size scaling step")
    parser.add_argument("--only-combine", action="store_true",
                        help="only the aggregations the source combines (count per key 2M, wordcount 1M lines, windowed "
                             "counts 5M and 1M), combined and not, beside Quix")
    add_broker_option(parser)
    args = parser.parse_args()
    if args.only_produce:
        return produce_only(args)
    if args.only_combine:
        return combine_only(args)
    if args.only_state_scaling:
        return state_scaling_only(args)

    env = cold_env()
    results: dict = {"machine": machine(args.broker), "args": vars(args), "runs": {}}
    runs = results["runs"]
    with bench_broker(args.broker, env) as bootstrap:
        print(f"broker {bootstrap}; loading {args.records:,} keyed records and {args.lines:,} lines",
              file=sys.stderr)
        create_topic(bootstrap, "bench-keys", 2)
        runs["load_keys_s"] = round(load(bootstrap, "bench-keys", keyed_records(args.records), 2), 2)
        create_topic(bootstrap, "bench-keys-1m", 2)
        runs["load_keys_1m_s"] = round(load(bootstrap, "bench-keys-1m", keyed_records(1_000_000), 2), 2)
        create_topic(bootstrap, "bench-keys-1m-right", 2)
        runs["load_keys_1m_right_s"] = round(load(bootstrap, "bench-keys-1m-right",
                                                  keyed_records(1_000_000, seed=3), 2), 2)
        create_topic(bootstrap, "bench-keys-2m-apps", 2)
        runs["load_keys_2m_apps_s"] = round(load_as_apps_do(bootstrap, "bench-keys-2m-apps",
                                                            keyed_records(2_000_000, keys=5_000, seed=4)), 2)
        create_topic(bootstrap, "bench-keys-2m", 2)
        runs["load_keys_2m_s"] = round(load(bootstrap, "bench-keys-2m", keyed_records(2_000_000, keys=5_000, seed=4), 2), 2)
        for side, seed in (("", 5), ("-right", 6)):  # one key in ~1M per side: ~1 partner per record
            create_topic(bootstrap, f"bench-join{side}", 2)
            runs[f"load_join{side.replace('-', '_')}_s"] = round(load(
                bootstrap, f"bench-join{side}", keyed_records(args.join_records, keys=args.join_records, seed=seed), 2,
                by_key=True), 2)
        create_topic(bootstrap, "bench-lines", 2)
        runs["load_lines_s"] = round(load(bootstrap, "bench-lines", text_lines(args.lines), 2), 2)
        scale_out.load_inputs(bootstrap, args.join_records)
        steps = [
            ("cold_start_1k_lines", lambda: cold_start(env, bootstrap, args.master)),
            ("ceiling", lambda: ceiling(bootstrap, "bench-keys", 2, args.records)),
            *((("ceiling_embedded", lambda: embedded_ceiling(args.records)),) if args.broker != "embedded" else ()),
            ("count_per_key", lambda: run_once(env, "bench-keys", "bench-count", args.master, "aggregate")),
            ("count_per_key_1m", lambda: run_once(env, "bench-keys-1m", "bench-count-1m", args.master,
                                                  "aggregate")),
            ("count_per_key_2m", lambda: run_once(env, "bench-keys-2m", "bench-count-2m", args.master,
                                                  "aggregate")),
            ("count_per_key_2m_apps", lambda: run_once(env, "bench-keys-2m-apps", "bench-count-2m-apps",
                                                       args.master, "aggregate")),
            ("wordcount_1m", lambda: run_once(env, "bench-lines", "bench-wordcount", args.master)),
            ("windowed_count_5m", lambda: run_once(env, "bench-keys", "bench-windowed-5m", args.master, "aggregate",
                                                   ("--window", "tumbling:1s"))),
            ("windowed_count_1m", lambda: run_once(env, "bench-keys-1m", "bench-windowed", args.master, "aggregate",
                                                   ("--window", "tumbling:1s"))),
            ("windowed_count_final_1m", lambda: run_once(env, "bench-keys-1m", "bench-windowed-final", args.master,
                                                         "aggregate", ("--window", "tumbling:1s", "--emit", "final"))),
            ("hopping_count_1m", lambda: run_once(env, "bench-keys-1m", "bench-hopping", args.master, "aggregate",
                                                  ("--window", "hopping:5s,1s"))),
            ("session_count_1m", lambda: run_once(env, "bench-keys-1m", "bench-session", args.master, "aggregate",
                                                  ("--window", "session:1s"))),
            ("table_table_join_2x1m", lambda: run_once(env, "bench-keys-1m", "bench-join", args.master, "join",
                                                       ("--kind", "table-table", "--how", "outer"))),
            ("stream_table_join", lambda: run_once(env, "bench-join", "bench-stream-table", args.master, "join",
                                                   ("--kind", "stream-table", "--how", "left"))),
            ("stream_stream_join", lambda: run_once(env, "bench-join", "bench-stream-join", args.master, "join",
                                                         ("--kind", "stream-stream", "--within", "1m"))),
            ("consume_jsonl", lambda: consume_jsonl(env, "bench-keys", args.records)),
            *((continuous.step_name(app), lambda app=app: continuous.latency(KSTOOL, env, bootstrap, args.rate,
                                                                              args.latency_seconds, app,
                                                                              args.latency_warmup_seconds))
              for app in continuous.APPS),
            ("produce_100k_lines", lambda: produce_lines(env, bootstrap)),
            ("state_scaling", lambda: scaling.state_scaling(run_once, env, bootstrap, args.master,
                                                            args.scaling_keys)),
            ("scale_out", lambda: scale_out.scale_out(run_once, env)),
        ]
        if not args.skip_quix:
            steps[2:2] = [
                ("quix_count_per_key", lambda: quix(bootstrap, "bench-keys", args.records)),
                ("quix_windowed_count_final_1m", lambda: quix(bootstrap, "bench-keys-1m", 1_000_000,
                                                              "tumbling-count", "1000")),
                ("quix_interval_join", lambda: quix(bootstrap, "bench-join", 2 * args.join_records,
                                                         "interval-join", "bench-join-right", "60000")),
            ]
        for name, step in steps:
            print(f"running {name} ...", file=sys.stderr)
            runs[name] = step()
            print(f"  {runs[name]}", file=sys.stderr)
        runs["help_start_s"] = help_start()

    def vs_quix(step: str, peer: str) -> float | None:
        rate = runs.get(peer, {}).get("records_per_s")
        return round(runs[step]["records_per_s"] / rate, 2) if rate else None

    figures = {
        "count_per_key_records_per_s": runs["count_per_key"]["records_per_s"],
        "count_vs_quix_ratio": vs_quix("count_per_key", "quix_count_per_key"),
        "once_1m_count_wall_s": runs["count_per_key_1m"]["wall_s"],
        "once_1m_wordcount_wall_s": runs["wordcount_1m"]["wall_s"] if args.lines == 1_000_000 else None,
        "windowed_count_5m_records_per_s": runs["windowed_count_5m"]["records_per_s"],
        "windowed_count_1m_records_per_s": runs["windowed_count_1m"]["records_per_s"],
        "windowed_count_final_1m_records_per_s": runs["windowed_count_final_1m"]["records_per_s"],
        "windowed_final_vs_quix_ratio": vs_quix("windowed_count_final_1m", "quix_windowed_count_final_1m"),
        "hopping_count_1m_records_per_s": runs["hopping_count_1m"]["records_per_s"],
        "session_count_1m_records_per_s": runs["session_count_1m"]["records_per_s"],
        "table_table_join_2x1m_records_per_s": runs["table_table_join_2x1m"]["records_per_s"],
        "stream_table_join_records_per_s": runs["stream_table_join"]["records_per_s"],
        "stream_stream_join_records_per_s": runs["stream_stream_join"]["records_per_s"],
        "stream_stream_join_vs_quix_ratio": vs_quix("stream_stream_join", "quix_interval_join"),
        **{f"{continuous.step_name(app)}_{quantile}": runs[continuous.step_name(app)][quantile] for app in continuous.APPS
           for quantile in ("p50_s", "p99_s")},
        "consume_jsonl_records_per_s": runs["consume_jsonl"]["records_per_s"],
        "help_start_s": runs["help_start_s"],
        "produce_100k_lines_wall_s": runs["produce_100k_lines"]["wall_s"],
        **scaling.figures(runs["state_scaling"]),
        **scale_out.figures(runs["scale_out"]),
    }
    full = all(getattr(args, name) == parser.get_default(name) for name in
               ("records", "lines", "join_records", "scaling_keys", "latency_seconds", "latency_warmup_seconds",
                "rate", "skip_quix"))
    # latest.json: a full run on Apache Kafka, the broker users run
    on_default_broker = args.broker == parser.get_default("broker")
    write_results(results, figures, prefix=("" if on_default_broker else f"{args.broker}-") if full else "reduced-")


def produce_only(args) -> None:
    env = cold_env()
    results: dict = {"machine": machine(args.broker), "args": {"only_produce": True}, "runs": {}}
    with bench_broker(args.broker, env) as bootstrap:
        results["runs"]["produce_100k_lines"] = produce_lines(env, bootstrap)
    write_results(results, {"produce_100k_lines_wall_s": results["runs"]["produce_100k_lines"]["wall_s"]},
                  prefix="produce-")


def combine_only(args) -> None:
    """The source's combiner against every record on its own (KSTOOL_COMBINE=off), in one run on
    the same records, with Quix Streams' count per key beside them."""
    env = cold_env()
    results: dict = {"machine": machine(args.broker), "args": vars(args), "runs": {}}
    runs = results["runs"]
    with bench_broker(args.broker, env) as bootstrap:
        create_topic(bootstrap, "bench-keys-2m-apps", 2)
        load_as_apps_do(bootstrap, "bench-keys-2m-apps", keyed_records(2_000_000, keys=5_000, seed=4))
        create_topic(bootstrap, "bench-lines", 2)
        load(bootstrap, "bench-lines", text_lines(args.lines), 2)
        create_topic(bootstrap, "bench-keys-5m", 2)
        load(bootstrap, "bench-keys-5m", keyed_records(5_000_000), 2)
        create_topic(bootstrap, "bench-keys-1m", 2)
        load(bootstrap, "bench-keys-1m", keyed_records(1_000_000, seed=3), 2)
        runs["cold_start_1k_lines"] = cold_start(env, bootstrap, args.master)
        windowed = [("windowed_count_5m", "bench-keys-5m", ("--window", "tumbling:1s")),
                    ("windowed_count_final_1m", "bench-keys-1m", ("--window", "tumbling:1s", "--emit", "final")),
                    ("hopping_count_1m", "bench-keys-1m", ("--window", "hopping:5s,1s"))]
        for mode in ("off", "on"):  # the same records, each way
            mode_env = {**env, "KSTOOL_COMBINE": mode}
            runs[f"count_per_key_2m_apps_combine_{mode}"] = run_once(
                mode_env, "bench-keys-2m-apps", f"bench-count-{mode}", args.master, "aggregate")
            runs[f"wordcount_1m_combine_{mode}"] = run_once(mode_env, "bench-lines", f"bench-wc-{mode}", args.master)
            for name, topic, options in windowed:
                runs[f"{name}_combine_{mode}"] = run_once(mode_env, topic, f"bench-{name}-{mode}", args.master,
                                                          "aggregate", options)
        if not args.skip_quix:
            runs["quix_count_per_key_2m_apps"] = quix(bootstrap, "bench-keys-2m-apps", 2_000_000)
            runs["quix_windowed_count_final_1m"] = quix(bootstrap, "bench-keys-1m", 1_000_000, "tumbling-count", "1000")
    figures = {f"{name}_wall_s": run["wall_s"] for name, run in runs.items() if "wall_s" in run}
    figures.update({f"{name}_records_per_s": run["records_per_s"] for name, run in runs.items()
                    if "records_per_s" in run})
    for peer, ours in (("quix_count_per_key_2m_apps", "count_per_key_2m_apps_combine_on"),
                       ("quix_windowed_count_final_1m", "windowed_count_final_1m_combine_on")):
        quix_run, wall = runs.get(peer, {}), runs[ours]["wall_s"]
        if "seconds" in quix_run:  # Quix's whole command, and (kinder to it) its processing alone
            figures[f"{ours}_vs_quix_wall_ratio"] = round(quix_run["wall_s"] / wall, 2)
            figures[f"{ours}_vs_quix_processing_ratio"] = round(quix_run["seconds"] / wall, 2)
    write_results(results, figures, prefix="combine-")


def state_scaling_only(args) -> None:
    env = cold_env()
    results: dict = {"machine": machine(args.broker), "args": vars(args), "runs": {}}
    with bench_broker(args.broker, env) as bootstrap:
        results["runs"]["state_scaling"] = scaling.state_scaling(run_once, env, bootstrap, args.master,
                                                                 args.scaling_keys)
    write_results(results, scaling.figures(results["runs"]["state_scaling"]),
                  prefix="state-scaling-")


def write_results(results: dict, figures: dict, prefix: str = "") -> None:
    results["figures"] = figures
    results["targets"] = {k: v for k, v in check(figures).items() if k in figures}
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


if __name__ == "__main__":
    main()
