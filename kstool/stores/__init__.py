"""Kafka Streams' store kinds, one home: each kind an object that owns its key layout as the
store's changelog holds it, what its changelog keeps and how a restore reads it back.
Processors call these objects; none does key arithmetic of its own.

key-value (kstool.stores.key_value)  the key itself; a versioned one keeps its history (versioned)
window    (kstool.stores.window)     key ‖ windowStart (8) ‖ seqnum (4)
session   (kstool.stores.session)    key ‖ sessionEnd (8) ‖ sessionStart (8)
An aggregation's windowed output keys (kstool.stores.windowed_keys) and the layout versions of
kstool's Spark state (kstool.stores.state_layouts) live here too.
All integers big-endian; timestamps epoch ms.
"""

from __future__ import annotations

from kstool.stores.key_value import KEY_VALUE_STORE, KeyValueStore
from kstool.stores.session import SESSION_STORE, SessionStore
from kstool.stores.versioned import VERSIONED_STORE, VersionedStore
from kstool.stores.window import WINDOW_STORE, WindowStore

StoreKind = KeyValueStore | WindowStore | SessionStore | VersionedStore
# by the kind a manifest's StoreSpec names
STORE_KINDS: dict[str, StoreKind] = {kind.name: kind for kind in (KEY_VALUE_STORE, WINDOW_STORE, SESSION_STORE, VERSIONED_STORE)}

__all__ = ["KEY_VALUE_STORE", "SESSION_STORE", "STORE_KINDS", "VERSIONED_STORE", "WINDOW_STORE", "KeyValueStore",
           "SessionStore", "StoreKind", "VersionedStore", "WindowStore"]
