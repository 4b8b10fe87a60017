"""Generate completions/, man/ and commands/summaries.py from the click command tree: `make docs`, or
`python -m kstool.commands.docs [ROOT]`. A test checks the committed files are current."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import click

from kstool import __version__
from kstool.commands.completion import completion_script
from kstool.commands.context import GLOBAL_OPTION_NAMES
from kstool.commands.examples import all_examples

COMPLETION_FILES = {"bash": "kstool.bash", "zsh": "_kstool", "fish": "kstool.fish"}

EXIT_STATUS = [("0", "success"), ("1", "a runtime error (broker unreachable, missing topic, failed step)"),
               ("2", "a usage error: bad option, argument or value; nothing was done"),
               ("75", "the application is already running (cron may retry later)"),
               ("130", "interrupted (a bounded read says how many records it got)")]
ENVIRONMENT = [
    ("KSTOOL_HOME", "kstool's home: embedded broker files, connection profile, app state "
                    "(default $XDG_STATE_HOME/kstool, else ~/.local/state/kstool)."),
    ("KSTOOL_BOOTSTRAP_SERVERS", "default bootstrap servers when -b is not given."),
    ("KSTOOL_JVM_CACHE", "off disables Spark's JVM class-data archive."),
    ("JAVA_HOME", "the Java 17+ runtime Spark uses (else java on PATH)."),
]
FILES = [
    ("$KSTOOL_HOME/broker/", "the embedded broker's pid, log and connection profile."),
    ("$KSTOOL_HOME/apps/APP/", "an app's manifest (app.json), run lock, spark.log and Spark checkpoint "
                               "(unless run --checkpoint-location put it elsewhere)."),
    ("$KSTOOL_HOME/cache/", "Spark's JVM class-data archive."),
]
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


def _options(command: click.Command, with_globals: bool = False) -> list[str]:
    """Option entries; the global options only on the kstool page (every command takes them)."""
    lines = []
    for param in command.params:
        if (isinstance(param, click.Option) and not param.hidden
                and (with_globals or param.name not in GLOBAL_OPTION_NAMES)):
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

    pages, examples_of = {}, all_examples()
    root_body = [".B kstool", "[GLOBAL OPTIONS] COMMAND [ARGS]...", ".SH DESCRIPTION", _text(cli.help),
                 ".SH GLOBAL OPTIONS"] + _options(cli, with_globals=True) + [".SH COMMANDS"]
    for name, command in sorted(cli.commands.items()):
        root_body += [".TP", f".BR kstool\\-{_escape(name)} (1)", _escape(command.get_short_help_str(200))]
    pages["kstool.1"] = _page("kstool", cli, "a toolbox for Kafka stream jobs", root_body, examples_of[""])
    for name, command in sorted(cli.commands.items()):
        examples = examples_of.get(name, [])
        if isinstance(command, click.Group):
            body = [".B kstool " + _escape(name), "COMMAND [OPTIONS] [ARGS]...", ".SH DESCRIPTION",
                    _text(command.help), ".SH COMMANDS"]
            for sub_name, sub in sorted(command.commands.items()):
                body += _section(sub, f"kstool {name} {sub_name}")
                examples = examples + examples_of.get(f"{name} {sub_name}", [])
        else:
            body = [f".B kstool {_escape(name)}", f"[OPTIONS] {_arguments(command)}".rstrip(),
                    ".SH DESCRIPTION", _text(command.help), ".SH OPTIONS"] + _options(command)
        body += [".SS Global options", _escape(
            "The global options (-b, --command-config, -X, --timeout, --debug; see kstool(1)) are "
            "taken after the command too.")]
        pages[f"kstool-{name}.1"] = _page(f"kstool-{name}", command, command.get_short_help_str(200), body,
                                          examples)
    return pages


def summaries() -> str:
    """commands/summaries.py: each command's first paragraph, for `kstool --help` to list the
    commands without importing them."""
    from kstool.commands.main import cli

    lines = ['"""Generated by `make docs` from the command tree (kstool.commands.docs): do not edit."""', "",
             "SUMMARIES = {"]
    for name, command in sorted(cli.commands.items()):
        first = " ".join(inspect.cleandoc(command.help or "").partition("\n\n")[0].split())
        lines.append(f"    {name!r}: {first!r},")
    return "\n".join(lines + ["}"]) + "\n"


def generated_files() -> dict[str, str]:
    files = {f"completions/{filename}": completion_script(shell) for shell, filename in COMPLETION_FILES.items()}
    # man/man1: where `man` looks for section 1 under a MANPATH entry
    files.update({f"man/man1/{name}": text for name, text in man_pages().items()})
    files["commands/summaries.py"] = summaries()
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
