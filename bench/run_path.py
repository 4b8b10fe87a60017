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
    """calls: (event, module, function) as the profiler saw them, "call" or "return". A function's
    calls one after another into one other module are one visit there (a reader reads
    `topology.name, topology.parameters()` in one look), not a jump back each."""
    stack: list[str] = []
    entered: list[str] = []
    left: set[str] = set()
    last_callee: dict[int, str] = {}  # per caller depth: the module its latest call went to
    steps, jumps = 0, []
    for event, module, function in calls:
        if event == "return":
            if stack:
                gone = stack.pop()
                if stack and stack[-1] != gone:
                    left.add(gone)
            continue
        depth = len(stack)
        caller = stack[-1] if stack else None
        if module != caller and last_callee.get(depth) != module:
            steps += 1
            if module not in entered:
                entered.append(module)
            elif module in left and module not in stack:
                jumps.append(f"{caller} -> {module}.{function}")
        last_callee[depth] = module
        for deeper in [d for d in last_callee if d > depth]:  # the callee's own calls start afresh
            del last_callee[deeper]
        stack.append(module)
    return {"modules_entered": len(entered), "module_steps": steps, "jumps_back": len(jumps),
            "jumps": [f"{n} × {jump}" if n > 1 else jump for jump, n in Counter(jumps).items()],
            "modules": entered}


def takes_the_topology(code: Any) -> bool:
    """A function the run's topology is handed to (a parameter named `topology`)."""
    return "topology" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def _own_code(code: Any) -> bool:
    return bool(code.co_flags & inspect.CO_OPTIMIZED) and code.co_filename.endswith(".py")


def main(argv: list[str]) -> None:
    calls: list[tuple[str, str, str]] = []
    # the topology's walk: the command, then every kstool function it is handed to, and its own methods
    topology_calls: list[tuple[str, str, str]] = []
    followed: list[int] = []  # the run's topology, once a function takes it

    def profile(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        module = frame.f_globals.get("__name__", "")
        if event not in ("call", "return") or not module.startswith("kstool.") or not _own_code(code):
            return
        if module.startswith(RUN_PATH):
            calls.append((event, module, code.co_name))
        handed = takes_the_topology(code)
        if handed and not followed:
            followed.append(id(frame.f_locals["topology"]))
        own = bool(followed) and id(frame.f_locals.get("self")) == followed[0]
        if handed or module == RUN_PATH[0] or own:  # the topology's methods read as its class's module
            topology_calls.append((event, type(frame.f_locals["self"]).__module__ if own else module, code.co_name))

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
    print(json.dumps({**reading(calls), "topology_walk": reading(topology_calls)}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
