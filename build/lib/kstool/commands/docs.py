"""Generate completions/ and man/ from the click command tree: `make docs`, or
`python -m kstool.commands.docs [ROOT]`. A test checks the committed files are current."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import click

from kstool import __version__
from kstool.commands.completion import completion_script

COMPLETION_FILES = {"bash": "kstool.bash", "zsh": "_kstool", "fish": "kstool.fish"}

EXIT_STATUS = [("0", "success"), ("1", "a runtime error (broker unreachable, missing topic, failed step)"),
               ("2", "a usage error: bad option, argument or value; nothing was done"),
               ("75", "the application is already running (cron may retry later)"),
               ("130", "interrupted")]
ENVIRONMENT = [
    ("KSTOOL_HOME", "kstool's home: embedded broker files, connection profile, app state "
                    "(default $XDG_STATE_HOME/kstool, else ~/.local/state/kstool)."),
    ("KSTOOL_BOOTSTRAP_SERVERS", "default bootstrap servers when -b is not given."),
    ("KSTOOL_JVM_CACHE", "off disables Spark's JVM class-data archive."),
    ("JAVA_HOME", "the Java 17+ runtime Spark uses (else java on PATH)."),
]
FILES = [
    ("$KSTOOL_HOME/broker/", "the embedded broker's pid, log and connection profile."),
    ("$KSTOOL_HOME/apps/APP/", "an app's manifest (app.json), Spark checkpoint, run lock and spark.log."),
    ("$KSTOOL_HOME/cache/", "Spark's JVM class-data archive."),
]
EXAMPLES = {
    "": ["kstool broker start", "kstool run wordcount --input lines --output counts --once",
         "kstool reset --app-id wordcount --to-datetime 2024-05-01T00:00:00 --dry-run"],
    "broker": ["kstool broker start --port 0", "kstool broker status -o json", "kstool broker stop"],
    "topics": ["kstool topics create lines -p 2 --config retention.ms=86400000",
               "kstool topics describe lines -o json | jq .total_records"],
    "groups": ["kstool groups describe wordcount -o json | jq '.partitions[] | select(.lag > 0)'"],
    "produce": ["printf 'k1:hello\\nk2:world\\n' | kstool produce lines -K :",
                "kstool produce lines-copy --format jsonl --file slice.jsonl"],
    "consume": ["kstool consume lines --from-time -1h -e -o jsonl > last-hour.jsonl",
                "kstool consume counts -e --value-format long -f '%k=%s\\n'"],
    "run": ["kstool run wordcount --input lines --output counts --once",
            "kstool run wordcount --input lines --output counts --processing-guarantee exactly_once_v2"],
    "reprocess": ["0 3 * * * kstool reprocess --app-id wordcount --from-time -24h --quiet || logger kstool failed"],
    "topology": ["kstool topology describe wordcount --input lines --output counts"],
    "apps": ["kstool apps list", "kstool apps describe wordcount -o json"],
    "reset": ["kstool reset --app-id wordcount --to-datetime 2024-05-01T00:00:00 --dry-run",
              "kstool reset --application-id ks-app --input-topics orders --to-earliest --state-dir /var/lib/kafka-streams",
              "kstool reset --app-id wordcount --shift-by -100 --export plan.csv --dry-run"],
    "changelog": ["kstool changelog dump wordcount-counts-changelog --compact",
                  "kstool changelog dump app-store-changelog --key-format windowed:string --value-format long --follow"],
    "state": ["kstool state get --app-id wordcount liberty",
              "kstool state all --app-id wordcount --batch-id 3 -o json",
              "kstool state get --app-id wordcount --from-changelog nation"],
    "replay": ["kstool replay --from-topic orders --to-topic orders-replay --from-time 2024-05-01T00:00 --to-time 2024-05-01T06:00",
               "kstool replay --from-file slice.jsonl --to-topic orders-replay --rate 500/s"],
    "config": ["kstool --command-config client.properties config show"],
    "completion": ["kstool completion bash > ~/.local/share/bash-completion/completions/kstool"],
}


def _escape(text: str) -> str:
    out = text.replace("\\", "\\e").replace("-", "\\-")
    lines = [("\\&" + line) if line[:1] in (".", "'") else line for line in out.splitlines()]
    return "\n".join(lines)


def _text(help_text: str | None) -> str:
    """A docstring as roff paragraphs: lines joined, blank lines become .PP."""
    paragraphs = inspect.cleandoc(help_text or "").split("\n\n")
    return "\n.PP\n".join(_escape(" ".join(p.split())) for p in paragraphs if p.strip())


def _option_line(param: click.Option) -> tuple[str, str]:
    names = ", ".join(param.opts + param.secondary_opts)
    metavar = "" if param.is_flag else f" \\fI{_escape(param.make_metavar(click.Context(click.Command('x'))))}\\fR"
    extra = []
    if param.required:
        extra.append("required")
    if param.show_default and param.default not in (None, False, ()):
        extra.append(f"default: {param.default}")
    help_text = " ".join((param.help or "").split()) + (f" [{'; '.join(extra)}]" if extra else "")
    return f".B {_escape(names)}{metavar}", _escape(help_text.strip())


def _options(command: click.Command) -> list[str]:
    lines = []
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            head, body = _option_line(param)
            lines += [".TP", head, body or "\\&"]
    return lines


def _arguments(command: click.Command) -> str:
    return " ".join(_escape(p.make_metavar(click.Context(command))) for p in command.params
                    if isinstance(p, click.Argument))


def _section(command: click.Command, path: str) -> list[str]:
    lines = [".SS " + _escape(path), f".B {_escape(path)}", f"[OPTIONS] {_arguments(command)}".rstrip(), ".PP",
             _text(command.help)]
    return lines + _options(command)


def _page(name: str, command: click.Command, summary: str, body: list[str], examples: list[str]) -> str:
    title = name.upper()
    lines = [f'.TH {_escape(title)} 1 "" "kstool {__version__}" "kstool manual"', ".SH NAME",
             f"{_escape(name)} \\- {_escape(summary)}", ".SH SYNOPSIS"]
    lines += body
    lines += [".SH EXIT STATUS"]
    for code, meaning in EXIT_STATUS:
        lines += [".TP", f".B {code}", _escape(meaning)]
    lines += [".SH ENVIRONMENT"]
    for var, meaning in ENVIRONMENT:
        lines += [".TP", f".B {var}", _escape(meaning)]
    lines += [".SH FILES"]
    for path, meaning in FILES:
        lines += [".TP", f".I {_escape(path)}", _escape(meaning)]
    lines += [".SH EXAMPLES"]
    for example in examples:
        lines += [".PP", ".nf", f"\\f(CW{_escape(example)}\\fR", ".fi"]
    if name != "kstool":
        lines += [".SH SEE ALSO", ".BR kstool (1)"]
    return "\n".join(lines) + "\n"


def man_pages() -> dict[str, str]:
    from kstool.commands.main import cli

    pages = {}
    root_body = [".B kstool", "[GLOBAL OPTIONS] COMMAND [ARGS]...", ".SH DESCRIPTION", _text(cli.help),
                 ".SH GLOBAL OPTIONS"] + _options(cli) + [".SH COMMANDS"]
    for name, command in sorted(cli.commands.items()):
        root_body += [".TP", f".BR kstool\\-{_escape(name)} (1)", _escape(command.get_short_help_str(200))]
    pages["kstool.1"] = _page("kstool", cli, "a toolbox for Kafka stream jobs", root_body, EXAMPLES[""])
    for name, command in sorted(cli.commands.items()):
        if isinstance(command, click.Group):
            body = [".B kstool " + _escape(name), "COMMAND [OPTIONS] [ARGS]...", ".SH DESCRIPTION",
                    _text(command.help), ".SH COMMANDS"]
            for sub_name, sub in sorted(command.commands.items()):
                body += _section(sub, f"kstool {name} {sub_name}")
        else:
            body = [f".B kstool {_escape(name)}", f"[OPTIONS] {_arguments(command)}".rstrip(),
                    ".SH DESCRIPTION", _text(command.help), ".SH OPTIONS"] + _options(command)
        pages[f"kstool-{name}.1"] = _page(f"kstool-{name}", command, command.get_short_help_str(200), body,
                                          EXAMPLES.get(name, []))
    return pages


def generated_files() -> dict[str, str]:
    files = {f"completions/{filename}": completion_script(shell) for shell, filename in COMPLETION_FILES.items()}
    files.update({f"man/{name}": text for name, text in man_pages().items()})
    return files


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    for relative, text in generated_files().items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {relative}")


if __name__ == "__main__":
    main()
