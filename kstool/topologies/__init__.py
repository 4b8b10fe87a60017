"""Kafka-Streams-style topologies built on Spark DataFrames, by name.

Adding a topology: write its module (a class with the kstool.contract.Topology methods and a
`TYPE = TopologyType(...)` naming its settings, examples and shapes) and add the module to
REGISTRY below; `kstool run NAME`, `topology describe NAME`, manifests, help examples, man pages,
completions and the tests' lists of topologies follow from it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kstool.base.errors import UsageError
from kstool.topologies import aggregate, join, table_aggregate, wordcount
from kstool.topologies.spec import TopologyType

if TYPE_CHECKING:
    from kstool.application.model import Manifest
    from kstool.contract import Topology

REGISTRY: dict[str, TopologyType] = {t.name: t for t in (wordcount.TYPE, aggregate.TYPE, join.TYPE,
                                                          table_aggregate.TYPE)}
NAMES = tuple(REGISTRY)


def from_manifest(manifest: Manifest) -> Topology:
    """Rebuild the topology an app was created with (for describe, state, reset, reprocess)."""
    kind = REGISTRY.get(manifest.topology)
    if kind is None:
        raise UsageError(f"app {manifest.app_id!r} uses topology {manifest.topology!r}, "
                         "which this kstool version does not know")
    return kind.from_manifest(manifest)
