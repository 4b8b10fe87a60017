"""kstool's benchmark: `python -m bench` (or `make bench`).

On a broker of its own (Apache Kafka; `--broker embedded`: kstool's own), loads data fast, then measures in one run on the same data:
the raw consumer ceiling, kstool's count per key, wordcount, windowed count and joins
(`--once`), Quix Streams doing the same count per key, windowed count and join (in its own
virtualenv), continuous-mode end-to-end latency, `kstool consume -o jsonl` throughput, start-up
and produce one-liners (consume and produce beside kcat: bench.one_liners), state-size scaling, scale-out
(workers under CPU quotas: bench.scale_out) and Kafka Streams beside kstool (bench.kafka_streams). Prints a
table and writes bench/results/<time>.json.
"""

from __future__ import annotations

import argparse
import sys

from bench import kafka_streams, latency as continuous, one_liners, scale_out, scaling
from bench.brokers import add_broker_option, bench_broker
from bench.load import create_topic, keyed_records, load, load_as_apps_do, text_lines
from bench.measure import cold_env
from bench.runs import (
    KSTOOL,
    ceiling,
    cold_start,
    consume_jsonl,
    embedded_ceiling,
    help_start,
    machine,
    produce_lines,
    quix,
    run_once,
    write_results,
)


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
        scale_out.load_inputs(bootstrap)
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
            ("consume_vs_kcat", lambda: one_liners.consume_vs_kcat(env, bootstrap, "bench-keys", args.records)),
            ("produce_vs_kcat", lambda: one_liners.produce_vs_kcat(env, bootstrap, 1_000_000)),
            *((continuous.step_name(app), lambda app=app: continuous.latency(KSTOOL, env, bootstrap, args.rate,
                                                                              args.latency_seconds, app,
                                                                              args.latency_warmup_seconds))
              for app in continuous.APPS),
            ("produce_100k_lines", lambda: produce_lines(env, bootstrap)),
            ("state_scaling", lambda: scaling.state_scaling(run_once, env, bootstrap, args.master,
                                                            args.scaling_keys)),
            ("scale_out", lambda: scale_out.scale_out(run_once, env)),
            ("beside_kafka_streams", lambda: beside_kafka_streams(env, bootstrap, args)),
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
        **{f"{name}_vs_kcat_ratio": ratio for name, ratio in
           one_liners.ratios_to_kcat(runs["consume_vs_kcat"], runs["produce_vs_kcat"]).items()},
        "help_start_s": runs["help_start_s"],
        "produce_100k_lines_wall_s": runs["produce_100k_lines"]["wall_s"],
        **scaling.figures(runs["state_scaling"]),
        **scale_out.figures(runs["scale_out"]),
        **kafka_streams.figures(runs["beside_kafka_streams"]),
    }
    full = all(getattr(args, name) == parser.get_default(name) for name in
               ("records", "lines", "join_records", "scaling_keys", "latency_seconds", "latency_warmup_seconds",
                "rate", "skip_quix"))
    # latest.json: a full run on Apache Kafka, the broker users run
    on_default_broker = args.broker == parser.get_default("broker")
    write_results(results, figures, prefix=("" if on_default_broker else f"{args.broker}-") if full else "reduced-",
                  targets=kafka_streams.TARGETS)


def beside_kafka_streams(env: dict, bootstrap: str, args) -> dict:
    """bench.kafka_streams' comparison (its topics loaded where the run has not), on Apache Kafka only:
    the twins need the broker their client is made for."""
    if args.broker != "apache-kafka":
        return {}
    steps = list(kafka_streams.TWINS)
    kafka_streams.load_inputs(bootstrap, steps)
    return kafka_streams.beside(env, bootstrap, args.master, steps, args.skip_quix)


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


if __name__ == "__main__":
    main()
