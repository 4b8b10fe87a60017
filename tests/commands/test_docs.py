"""Completions and man pages: generated from the command tree, committed, current, valid."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import cast

import click
import pytest

from kstool.commands.context import GLOBAL_OPTION_NAMES
from kstool.commands.docs import generated_files
from kstool.commands.main import cli
from tests.helpers import REPO


def test_committed_completions_and_man_pages_are_current():
    stale = [path for path, text in generated_files().items()
             if not (REPO / path).exists() or (REPO / path).read_text(encoding="utf-8") != text]
    assert not stale, f"run `make docs`: stale or missing {stale}"


def test_bash_completion_script_registers():
    result = subprocess.run(["bash", "-c", f"source {REPO / 'completions/kstool.bash'} && complete -p kstool"],
                            capture_output=True, text=True)
    assert result.returncode == 0 and "kstool" in result.stdout


def _complete(words: str) -> list[str]:
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
           "_KSTOOL_COMPLETE": "bash_complete"}
    out = subprocess.run([sys.executable, "-m", "kstool.commands.main"], env=env, capture_output=True, text=True)
    return [line.split(",", 1)[1] for line in out.stdout.splitlines() if "," in line]


def test_completing_re_offers_reset_and_replay():
    assert {"reset", "replay", "reprocess"} <= set(_complete("kstool re"))


def test_topic_names_complete_from_the_broker(kafka, topic_name):
    from tests.helpers import create_topic

    create_topic(kafka, topic_name, 1)
    assert topic_name in _complete(f"kstool consume {topic_name[:12]}")


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        yield prefix + (name,), command
        if isinstance(command, click.Group):
            yield from _commands(command, prefix + (name,))


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_man_pages_render_without_warnings_and_cover_every_option():
    for page in sorted((REPO / "man" / "man1").glob("*.1")):
        result = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(page)], capture_output=True, text=True)
        assert result.returncode == 0 and result.stderr == "", (page.name, result.stderr)
    for path, command in _commands(cli):
        page = (REPO / "man" / "man1" / f"kstool-{path[0]}.1").read_text(encoding="utf-8").replace("\\-", "-")
        assert " ".join(("kstool",) + path) in page, path
        assert "global options" in page.lower()  # listed once, on kstool(1)
        for param in command.params:
            if isinstance(param, click.Option) and param.name not in GLOBAL_OPTION_NAMES:
                for opt in param.opts + param.secondary_opts:
                    assert re.search(rf"(^|[ ,]){re.escape(opt)}\b", page, re.M), (path, opt)
    root_page = (REPO / "man" / "man1" / "kstool.1").read_text(encoding="utf-8").replace("\\-", "-")
    for name in cli.commands:
        assert f"kstool-{name}" in root_page


def test_the_readme_s_completion_and_man_lines_work_in_a_new_home(tmp_path):
    """Run as a new user would: the `cp`s need their folders made, and `man kstool-reset`
    finds the page through MANPATH (pages must sit in man/man1)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Shell completions and man pages", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(lines) == 4, lines  # bash, zsh, fish, man
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"], "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "80"}
    for line in lines:
        result = subprocess.run(["bash", "-c", f"set -e; {line}"], cwd=REPO, env=env, capture_output=True, text=True)
        assert result.returncode == 0, (line, result.stderr)
    assert (tmp_path / ".local/share/bash-completion/completions/kstool").read_text() == \
        (REPO / "completions/kstool.bash").read_text()
    assert (tmp_path / ".zfunc/_kstool").is_file() and (tmp_path / ".config/fish/completions/kstool.fish").is_file()
    assert "kstool reset" in result.stdout and "--application-id" in result.stdout


def test_window_kinds_complete():
    assert _complete("kstool run aggregate --window ") == ["tumbling:", "hopping:", "sliding:", "session:"]
    assert _complete("kstool run aggregate --window ses") == ["session:"]


def test_the_docs_runs_each_have_an_app_of_their_own():
    """Followed in order, two examples with the same app id (the topology's name by default) and
    other settings refused the second: 'created with other settings'. The README and docs/ alike."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    blocks = [block for page in pages for block in re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), re.S)]
    runs: dict[str, set[tuple[str, ...]]] = {}
    for block in blocks:
        for command in re.sub(r"\\\n\s*", " ", block).splitlines():
            words = command.split("#")[0].split()
            if words[:2] != ["kstool", "run"] or len(words) < 3 or "..." in words:
                continue
            app = words[words.index("--app-id") + 1] if "--app-id" in words else words[2]
            settings = tuple(w for w in words[2:] if w not in ("--once", "--restore-missing-state"))
            runs.setdefault(app, set()).add(settings)
    assert len(runs) >= 10, runs
    shared = {app: sorted(settings) for app, settings in runs.items() if len(settings) > 1}
    assert not shared, f"examples that share an app id with other settings: {shared}"


def _shell_examples() -> list[tuple[str, list[str]]]:
    """(page, words) of each kstool command in the ```sh blocks of docs/: a pipeline's kstool
    parts, its comment and shell syntax left out; lines with placeholders (`...`, `[`) skipped."""
    import shlex

    found = []
    for page in sorted((REPO / "docs").glob("*.md")):
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                if "kstool " not in line or "..." in line or " [--" in line:
                    continue
                lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
                lexer.whitespace_split, lexer.commenters = True, "#"
                tokens = list(lexer)
                # each command of a pipeline or list, from its `kstool` on (after a cron schedule, `VAR=...`)
                commands = [[]]
                for token in tokens:
                    if token in ("|", "||", "&&", ";", ">", "<"):
                        commands.append([])
                    else:
                        commands[-1].append(token)
                for words in commands:
                    while words and (words[0] in "**" or words[0].isdigit() or "=" in words[0]):
                        words = words[1:]  # a cron schedule, VAR=value
                    if words[:1] == ["kstool"]:
                        found.append((page.name, words[1:]))
    return found


def test_every_kstool_command_in_the_docs_parses():
    """Each example's command and options exist and take the values shown (parsed by the command
    tree as the console script would, not run: its topics and registries are the reader's)."""
    examples = _shell_examples()
    assert len(examples) >= 40
    import warnings

    refused = []
    for page, words in examples:
        try:
            ctx = cli.make_context("kstool", list(words))
            with warnings.catch_warnings():  # a group's subcommand is in protected_args until Click 9, in args then
                warnings.filterwarnings("ignore", "'protected_args'", DeprecationWarning)
                while isinstance(ctx.command, click.Group) and (ctx.protected_args or ctx.args):
                    name, command, rest = ctx.command.resolve_command(ctx, [*ctx.protected_args, *ctx.args])
                    ctx = command.make_context(cast(str, name), rest, parent=ctx)
        except click.ClickException as exc:
            if not re.search("does not exist|No such file", exc.format_message()):  # a file of the reader's
                refused.append(f"{page}: kstool {' '.join(words)}: {exc.format_message()}")
    assert refused == []


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_docs_links_reach_their_pages_and_headings():
    """Every relative link in README.md and docs/ names a file that exists and, with a #, one of
    that file's headings (a link to a section moved to another page once went nowhere)."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.MULTILINE)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{page.name}: {target}")
    assert not broken, broken
