"""The dependency direction, pinned: commands -> output -> operations -> topologies ->
tasks -> streams / engine -> contract -> checkpoint -> application -> kafka -> config -> broker -> base.
A module may import from lower layers and its own package only; a new back edge (or an edge
between siblings) fails here, with the import that made it."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import REPO

# lowest first; the packages (or top-level modules) of kstool, and `commands`
LAYERS = [
    {"kstool"},  # `kstool` itself: only __version__
    {"base"},  # errors, names, timeutil, home, serdes, documents
    {"stores"},  # Kafka Streams' store kinds: key layouts, changelogs, restores
    {"descriptions"},  # any Kafka Streams app's topology as a document, and its diagram
    {"broker"},
    {"config"},
    {"kafka", "schemas"},  # siblings: record bytes from Kafka, schemas for their payloads
    {"application"},
    {"checkpoint"},  # the app's Spark checkpoint read without a query
    {"contract"},
    {"streams", "engine"},  # siblings: the engine runs any topology, the processors know no Spark
    {"tasks"},  # a processor run per task inside the engine's query
    {"topologies"},
    {"changelog", "reset", "replay", "apps"},
    {"state", "reprocess"},
    {"output"},
    {"commands"},
]
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "kstool":
        return None
    return parts[1] if len(parts) > 1 else "kstool"


def modules() -> list[tuple[str, Path]]:
    found = [("kstool.commands." + p.stem, p) for p in (REPO / "commands").glob("*.py")]
    for path in (REPO / "kstool").rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        found.append((".".join(parts[:-1] if parts[-1] == "__init__" else parts), path))
    return found


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return out


def test_every_package_has_a_layer():
    units = {unit_of(name) for name, _ in modules()}
    assert units - set(RANK) == set(), "add new packages to LAYERS"


def test_imports_only_go_down():
    back_edges = []
    for name, path in modules():
        source = unit_of(name)
        for line, target_module in imports(path):
            target = unit_of(target_module)
            if target is None or target == source or target_module.startswith("kstool.__"):
                continue
            if target == "kstool":  # `from kstool import x`: x is the unit
                continue
            if RANK[target] >= RANK[source]:
                back_edges.append(f"{path.relative_to(REPO)}:{line} imports {target_module} "
                                  f"({source} may not depend on {target})")
    assert back_edges == []


def test_commands_do_not_talk_to_kafka_or_spark():
    direct = [f"{path.relative_to(REPO)}:{line} {module}" for name, path in modules() if ".commands." in name
              for line, module in imports(path) if module.split(".")[0] in ("confluent_kafka", "pyspark")]
    assert direct == []


# kstool.engine's sub-packages and root modules, lowest first: the query's Kafka I/O knows no
# Spark session, Spark's process no query, the daemon hosts queries, run_app takes them all
ENGINE_LAYERS = [
    {"exceptions"},
    {"failures", "progress", "stopping"},
    {"io"},
    {"spark"},
    {"query"},
    {"daemon"},
    {"hooks"},  # the two hooks bound for the packages above
    {"runtime"},
]
ENGINE_RANK = {unit: rank for rank, units in enumerate(ENGINE_LAYERS) for unit in units}


def engine_unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["kstool", "engine"] and len(parts) > 2 else None


def test_every_engine_module_has_a_layer():
    units = {engine_unit(name) for name, _ in modules()} - {None}
    assert units - set(ENGINE_RANK) == set(), "add new engine modules or sub-packages to ENGINE_LAYERS"


def test_engine_imports_only_go_down():
    back_edges = []
    for name, path in modules():
        source = engine_unit(name)
        if source is None:
            continue
        for line, target_module in imports(path):
            target = engine_unit(target_module)
            if target is None or target == source or target not in ENGINE_RANK:
                continue
            if ENGINE_RANK[target] >= ENGINE_RANK[source]:
                back_edges.append(f"{path.relative_to(REPO)}:{line} imports {target_module}")
    assert back_edges == []


def test_other_packages_use_the_engine_through_its_front_door():
    """kstool.engine's own modules are its business: the rest of kstool imports the names its
    __init__ exports, and nothing from a module below it."""
    import kstool.engine

    exported = set(kstool.engine.__all__)
    around = [f"{path.relative_to(REPO)}:{line} {module}" for name, path in modules() if engine_unit(name) is None
              and name != "kstool.engine" for line, module in imports(path)
              if module.startswith("kstool.engine.") and module.removeprefix("kstool.engine.") not in exported]
    assert around == []


def test_the_front_door_exports_each_name_from_the_module_it_imports_it_from():
    """Its TYPE_CHECKING imports (what mypy sees) and _EXPORTS (what runs) say the same."""
    import kstool.engine

    path = REPO / "kstool" / "engine" / "__init__.py"
    checked = {alias.asname or alias.name: node.module for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kstool.engine.")
               for alias in node.names}
    assert checked == kstool.engine._EXPORTS
    assert all(getattr(kstool.engine, name) is not None for name in kstool.engine.__all__)


def test_the_bench_modules_import_one_another_without_a_circle():
    """Imports inside functions included: a circle there only hides the order it needs."""
    names = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
             for p in (REPO / "bench").rglob("*.py") if ".venv" not in p.parts}
    graph = {name: {target for _, module in imports(path)
                    for target in (module, module.rsplit(".", 1)[0]) if target in names and target != name}
             for name, path in names.items()}
    circles, state = [], dict.fromkeys(graph, "new")

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            if state[target] == "open":
                circles.append(" -> ".join(trail[trail.index(target):] + [target]))
            elif state[target] == "new":
                visit(target, [*trail, target])
        state[name] = "done"
    for name in sorted(graph):
        if state[name] == "new":
            visit(name, [name])
    assert circles == []
