"""`python -m bench.latency`: the latency step alone (its own module: the results writer it
uses knows every step, this one among them)."""

from __future__ import annotations

import argparse
import statistics

from bench.brokers import add_broker_option, bench_broker
from bench.latency import APPS, app_id_of, latency, step_name
from bench.measure import cold_env
from bench.runs import KSTOOL, kstool, machine, write_results


def main() -> None:
    """`python -m bench.latency [--apps windowed,...] [--runs 3] [--engine]`: the latency step
    alone, each run with an embedded broker of its own (in `make bench` the apps share the broker
    that holds every step's input, after those steps); figures are the runs' medians. Each run
    has a kstool home of its own and no engine, or with `--engine` every run is a new app through
    one engine, as `kstool run` goes by default: the first run starts it, later runs find its JVM
    warm. Results: bench/results/latency-<time>.json (latency-engine-<time>.json)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--apps", default=",".join(APPS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--warmup-seconds", type=int, default=15)
    parser.add_argument("--engine", action="store_true")
    add_broker_option(parser)
    args = parser.parse_args()
    results: dict = {"machine": machine(args.broker), "args": vars(args), "runs": {}}
    figures: dict = {}
    engine_env = {**cold_env(), "KSTOOL_ENGINE": "on"} if args.engine else None
    try:
        for app in args.apps.split(","):
            runs = results["runs"][app] = []
            for number in range(args.runs):
                env = engine_env or cold_env()
                with bench_broker(args.broker, env) as bootstrap:
                    runs.append(latency(KSTOOL, env, bootstrap, args.rate, args.seconds, app, args.warmup_seconds,
                                        f"{app_id_of(app)}-{number}"))
            for quantile in ("p50_s", "p99_s", "start_p50_s", "start_p99_s"):
                figures[f"{step_name(app)}_{quantile}"] = statistics.median(run[quantile] for run in runs)
    finally:
        if engine_env:
            kstool(engine_env, "engine", "stop")
    # #70: through the engine, the windowed count and the stream-table join within 1 s at p99
    engine_targets = {f"{step_name(app)}_p99_s": ("<=", 1.0) for app in ("windowed", "stream_table_join")}
    write_results(results, figures, prefix="latency-engine-" if args.engine else "latency-",
                  targets=engine_targets if args.engine else None)


if __name__ == "__main__":
    main()
