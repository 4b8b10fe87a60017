"""Examples per command path: they end every --help and fill the man pages' EXAMPLES."""

EXAMPLES: dict[str, list[str]] = {
    "": ["kstool broker start", "kstool run wordcount --input lines --output counts --once",
         "kstool reset --app-id wordcount --to-datetime 2024-05-01T00:00:00 --dry-run"],
    "apps describe": ["kstool apps describe wordcount", "kstool apps describe wordcount -o json | jq .stores"],
    "apps list": ["kstool apps list", "kstool apps list -o csv"],
    "apps top": ["kstool apps top --group my-streams-app",
                 "kstool apps top --once --fail-on-lag 5m -o json > /dev/null || echo lagging"],
    "broker start": ["kstool broker start", "kstool broker start --port 0"],
    "broker status": ["kstool broker status", "kstool broker status -o json | jq -r .bootstrap_servers"],
    "broker stop": ["kstool broker stop"],
    "changelog describe": ["kstool changelog describe wordcount-counts-changelog",
                           "kstool changelog describe app-store-changelog -o json | jq .layout"],
    "changelog dump": ["kstool changelog dump wordcount-counts-changelog --compact",
                       "kstool changelog dump app-store-changelog --key-format windowed:string "
                       "--value-format long --follow"],
    "changelog list": ["kstool changelog list", "kstool changelog list --app-id wordcount -o jsonl"],
    "completion": ["kstool completion bash > ~/.local/share/bash-completion/completions/kstool",
                   "kstool completion fish > ~/.config/fish/completions/kstool.fish"],
    "config show": ["kstool --command-config client.properties config show",
                    "kstool config show -o json | jq .bootstrap_servers"],
    "consume": ["kstool consume lines --from-time -1h -e -o jsonl > last-hour.jsonl",
                "kstool consume counts -e --value-format long -f '%k=%s\\n'",
                "kstool consume images -e --value-format raw -n 1 > image.bin"],
    "engine start": ["kstool engine start", "kstool engine start --master spark://spark-master:7077"],
    "engine status": ["kstool engine status", "kstool engine status -o json | jq '.runs[].name'"],
    "engine stop": ["kstool engine stop"],
    "engine prepare": ["kstool engine prepare"],
    "groups describe": ["kstool groups describe wordcount",
                        "kstool groups describe wordcount -o json | jq '.partitions[] | select(.lag > 0)'",
                        "kstool groups describe my-streams-app --time-lag -o json | jq .max_time_lag_ms"],
    "groups delete": ["kstool groups delete old-app --dry-run", "kstool groups delete orders-sg --yes"],
    "groups list": ["kstool groups list", "kstool groups list -o jsonl | jq -r .group"],
    "produce": ["printf 'k1:hello\\nk2:world\\n' | kstool produce lines -K :",
                "kstool produce lines-copy --format jsonl --file slice.jsonl",
                "seq 1 100000 | kstool produce numbers --value-format long"],
    "replay": ["kstool replay --from-topic orders --to-topic orders-replay --from-time 2024-05-01T00:00 "
               "--to-time 2024-05-01T06:00",
               "kstool replay --from-file slice.jsonl --to-topic orders-replay --rate 500/s --dry-run"],
    "reprocess": ["kstool reprocess --app-id wordcount --from-time 2024-05-01T00:00 --dry-run",
                  "0 3 * * * kstool reprocess --app-id wordcount --from-time -24h --yes --quiet || logger kstool failed",
                  "kstool reprocess --app-id wordcount --from-beginning --yes"],
    "reset": ["kstool reset --app-id wordcount --to-datetime 2024-05-01T00:00:00 --dry-run",
              "kstool reset --application-id ks-app --input-topics orders --to-earliest "
              "--state-dir /var/lib/kafka-streams --yes",
              "kstool reset --app-id wordcount --shift-by -100 --export plan.csv --dry-run"],
    "state all": ["kstool state all --app-id wordcount --batch-id 3 -o json",
                  "kstool state all --app-id wordcount -o csv > counts.csv"],
    "state changes": ["kstool state changes --app-id wordcount --from-batch 2 --to-batch 4"],
    "state count": ["kstool state count --app-id wordcount", "kstool state count --app-id wordcount --batch-id 3"],
    "state fetch": ["kstool state fetch --app-id clicks-per-minute alice --from -1h"],
    "state get": ["kstool state get --app-id wordcount liberty",
                  "kstool state get --app-id wordcount --from-changelog nation"],
    "state restore": ["kstool state restore --app-id clicks-per-minute --dry-run",
                      "kstool state restore --app-id clicks-per-minute --yes && "
                      "kstool run aggregate --input clicks --output clicks-per-minute --window tumbling:1m "
                      "--app-id clicks-per-minute --once"],
    "state range": ["kstool state range --app-id wordcount --from a --to c"],
    "state stores": ["kstool state stores --app-id wordcount", "kstool state stores --app-id wordcount -o json"],
    "topics create": ["kstool topics create lines -p 2 --config retention.ms=86400000",
                      "kstool topics create counts --config cleanup.policy=compact"],
    "topics delete": ["kstool topics delete lines-old --dry-run", "kstool topics delete lines-old --yes"],
    "topics describe": ["kstool topics describe lines", "kstool topics describe lines -o json | jq .total_records"],
    "topics list": ["kstool topics list", "kstool topics list -b broker1:9092 -o jsonl | jq -r .topic"],
    "topology describe": ["kstool topology describe wordcount --input lines --output counts",
                          "kstool topology describe --app-id wordcount -o svg > wordcount.svg",
                          "kstool topology describe --from-file describe.txt --app-id my-streams-app -o mermaid"],
}


def all_examples() -> dict[str, list[str]]:
    """EXAMPLES, and each `run NAME`'s from its topology's registration."""
    from kstool.topologies import REGISTRY

    return {**EXAMPLES, **{f"run {t.name}": list(t.examples) for t in REGISTRY.values()}}


def examples_for(path: str) -> list[str]:
    """A command's examples; a group without its own: the first of each subcommand's, three at most."""
    # other commands' help imports no topology
    examples = all_examples() if path == "run" or path.startswith("run ") else EXAMPLES
    if path in examples:
        return examples[path]
    return [lines[0] for sub, lines in sorted(examples.items()) if sub.startswith(path + " ")][:3]


def epilog(path: str) -> str | None:
    """The examples as a --help epilog (\\b keeps click from re-wrapping them)."""
    lines = examples_for(path)
    if not lines:
        return None
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
