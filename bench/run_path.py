"""The run path as a maintainer reads it: which of kstool's run-path modules (`kstool.commands.run`,
`kstool.engine.*`) control enters, in order, during one command in this process (the driver;
KSTOOL_ENGINE=off), and how often it goes back into a module it had left for another by a call
rather than a return (a "jump back": where a reader must turn back pages).

    KSTOOL_ENGINE=off python -m bench.run_path run wordcount --input lines --output counts --once

Writes the reading as JSON to stdout after the command's own output. Functions only: module and
class bodies that imports run, and generated code (dataclasses' __init__), are not reading."""

from __future__ import annotations

import inspect
import json
import sys
import threading
from collections import Counter
from typing import Any

RUN_PATH = ("kstool.commands.run", "kstool.engine.")


def reading(calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    """calls: (event, module, function) as the profiler saw them, "call" or "return"."""
    stack: list[str] = []
    entered: list[str] = []
    left: set[str] = set()
    steps, jumps = 0, []
    for event, module, function in calls:
        if event == "return":
            if stack:
                gone = stack.pop()
                if stack and stack[-1] != gone:
                    left.add(gone)
            continue
        caller = stack[-1] if stack else None
        if module != caller:
            steps += 1
            if module not in entered:
                entered.append(module)
            elif module in left and module not in stack:
                jumps.append(f"{caller} -> {module}.{function}")
        stack.append(module)
    return {"modules_entered": len(entered), "module_steps": steps, "jumps_back": len(jumps),
            "jumps": [f"{n} × {jump}" if n > 1 else jump for jump, n in Counter(jumps).items()],
            "modules": entered}


def main(argv: list[str]) -> None:
    calls: list[tuple[str, str, str]] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        module = frame.f_globals.get("__name__", "")
        if (event in ("call", "return") and module.startswith(RUN_PATH)
                and code.co_flags & inspect.CO_OPTIMIZED and code.co_filename.endswith(".py")):
            calls.append((event, module, code.co_name))

    from kstool.commands.main import main as kstool

    sys.argv = ["kstool", *argv]
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        kstool()
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    print(json.dumps(reading(calls), indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
