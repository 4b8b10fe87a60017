"""A task's stores in Spark's MapState, as its processor sees them during a batch.

PySpark's MapState answers each getValue/updateValue with a round trip to the task's state
server (a socket per task). The state server answers requests in order, one answer per
request, so `PipelinedMapState` sends a chunk of requests before reading their answers: a
batch's reads are asked for at once and its changes written without waiting for each answer
(measured: writing 200k entries 9.6 s -> 7.8 s; a continuous windowed micro-batch 2.0-2.4 s
-> 1.0-1.4 s; what remains per entry, 30-70 µs, is serialisation and the JVM's own work). It
speaks PySpark 4.3's state protocol through its state client (pinned in pyproject.toml; the
integration tests run it).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Iterable, Iterator, Protocol

from kstool.streams.task import StoreValue

# A chunk of requests goes out in one socket write, well below the socket buffers: the server
# never waits for the rest of a request while kstool waits for its answers.
CHUNK_BYTES = 32 * 1024


class BulkState(Protocol):
    def get_many(self, keys: list[bytes]) -> dict[bytes, tuple | None]: ...

    def write_many(self, changes: Iterable[tuple[bytes, tuple | None]]) -> None: ...


class PipelinedMapState:
    def __init__(self, state: Any):
        self.client = state._mapStateClient  # pyspark.sql.streaming.map_state_client.MapStateClient
        self.name = state._stateName
        self.api = self.client._stateful_processor_api_client

    def get_many(self, keys: list[bytes]) -> dict[bytes, tuple | None]:
        """getValue of each key: the stored (value, timestamp, aux), or None."""
        from pyspark.sql.streaming.proto import StateMessage_pb2 as m

        answers = self._pipeline(
            m.MapStateCall(stateName=self.name, getValue=m.GetValue(userKey=self._key(key))) for key in keys)
        return {key: tuple(self.api._deserialize_from_bytes(raw)) if raw else None
                for key, raw in zip(keys, answers)}

    def write_many(self, changes: Iterable[tuple[bytes, tuple | None]]) -> None:
        """updateValue of each (key, value), removeKey of each (key, None)."""
        from pyspark.sql.streaming.proto import StateMessage_pb2 as m

        def calls():
            for key, value in changes:
                if value is None:
                    yield m.MapStateCall(stateName=self.name, removeKey=m.RemoveKey(userKey=self._key(key)))
                else:
                    value_bytes = self.api._serialize_to_bytes(self.client.value_schema, value)
                    yield m.MapStateCall(stateName=self.name,
                                         updateValue=m.UpdateValue(userKey=self._key(key), value=value_bytes))

        self._pipeline(calls())

    def _key(self, key: bytes) -> bytes:
        return self.api._serialize_to_bytes(self.client.user_key_schema, (key,))

    def _pipeline(self, calls: Iterable[Any]) -> list[bytes]:
        from pyspark.errors import PySparkRuntimeError
        from pyspark.serializers import write_int
        from pyspark.sql.streaming.proto import StateMessage_pb2 as m

        out, answers, errors = self.api.sockfile, [], []
        waiting = size = 0

        def collect() -> None:
            out.flush()
            for _ in range(waiting):
                status, error, value = self.api._receive_proto_message()
                if status != 0:
                    errors.append(error)
                answers.append(value)

        for call in calls:
            request = m.StateRequest(stateVariableRequest=m.StateVariableRequest(mapStateCall=call)).SerializeToString()
            write_int(0, out)  # the protocol's message version
            write_int(len(request), out)
            out.write(request)
            waiting, size = waiting + 1, size + len(request) + 8
            if size >= CHUNK_BYTES:
                collect()
                waiting = size = 0
        collect()
        if errors:
            raise PySparkRuntimeError(f"map state {self.name}: {errors[0]}")
        return answers


class MapStateStore(MutableMapping[bytes, StoreValue]):
    """One store of a task during a batch: entries come from Spark's MapState when first asked
    for (`prefetch` asks for many at once; iterating reads the store whole), and changes stay
    here until `write_back`."""

    def __init__(self, state: Any, read_all: bool, bulk: BulkState | None = None):
        self.state = state
        self.bulk = bulk or PipelinedMapState(state)
        self.known: dict[bytes, StoreValue | None] = {}  # None: absent (or deleted this batch)
        self.complete = not state.exists()  # an empty store has nothing to look up
        if read_all:
            self._read_all()

    def prefetch(self, keys: Iterable[bytes]) -> None:
        if self.complete:
            return
        wanted = list({key for key in keys if key not in self.known})
        if wanted:
            for key, found in self.bulk.get_many(wanted).items():
                self.known[key] = None if found is None else StoreValue(*found)

    def write_back(self, changed: dict[bytes, bool]) -> None:
        """Persist the entries this batch changed ({key: whether it existed before})."""
        writes: list[tuple[bytes, tuple | None]] = []
        for key, existed in changed.items():
            value = self.known.get(key)
            if value is not None:
                writes.append((key, (value.value, value.timestamp, value.stored_aux())))
            elif existed:
                writes.append((key, None))
        self.bulk.write_many(writes)

    def _lookup(self, key: bytes) -> StoreValue | None:
        if key not in self.known:
            if self.complete:
                return None
            found = self.state.getValue((key,))
            self.known[key] = None if found is None else StoreValue(*found)
        return self.known[key]

    def _read_all(self) -> None:
        if not self.complete:
            for (key,), value in self.state.iterator():
                if key not in self.known:  # what this batch changed wins
                    self.known[key] = StoreValue(*value)
            self.complete = True

    def __getitem__(self, key: bytes) -> StoreValue:
        value = self._lookup(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and self._lookup(key) is not None

    def __setitem__(self, key: bytes, value: StoreValue) -> None:
        self.known[key] = value

    def __delitem__(self, key: bytes) -> None:
        if self._lookup(key) is None:
            raise KeyError(key)
        self.known[key] = None

    def __iter__(self) -> Iterator[bytes]:
        self._read_all()
        return iter([key for key, value in self.known.items() if value is not None])

    def __len__(self) -> int:
        self._read_all()
        return sum(value is not None for value in self.known.values())
