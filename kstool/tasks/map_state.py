"""Bulk calls to Spark's MapState, which holds a task's store shards (kstool.tasks.shards).

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

from typing import Any, Iterable, Iterator, Protocol, cast

# A chunk of requests goes out in one socket write, well below the socket buffers: the server
# never waits for the rest of a request while kstool waits for its answers.
CHUNK_BYTES = 32 * 1024


class BulkState(Protocol):
    def get_many(self, keys: list[bytes]) -> dict[bytes, tuple[Any, ...] | None]: ...

    def write_many(self, changes: Iterable[tuple[bytes, tuple[Any, ...] | None]]) -> None: ...


class PipelinedMapState:
    def __init__(self, state: Any):
        self.client = state._mapStateClient  # pyspark.sql.streaming.map_state_client.MapStateClient
        self.name = state._stateName
        self.api = self.client._stateful_processor_api_client

    def get_many(self, keys: list[bytes]) -> dict[bytes, tuple[Any, ...] | None]:
        """getValue of each key: the stored value (a tuple of the value schema's fields), or None."""
        from pyspark.sql.streaming.proto import StateMessage_pb2 as m

        answers = self._pipeline(
            m.MapStateCall(stateName=self.name, getValue=m.GetValue(userKey=self._key(key))) for key in keys)
        return {key: tuple(self.api._deserialize_from_bytes(raw)) if raw else None
                for key, raw in zip(keys, answers)}

    def write_many(self, changes: Iterable[tuple[bytes, tuple[Any, ...] | None]]) -> None:
        """updateValue of each (key, value), removeKey of each (key, None)."""
        from pyspark.sql.streaming.proto import StateMessage_pb2 as m

        def calls() -> Iterator[Any]:
            for key, value in changes:
                if value is None:
                    yield m.MapStateCall(stateName=self.name, removeKey=m.RemoveKey(userKey=self._key(key)))
                else:
                    value_bytes = self.api._serialize_to_bytes(self.client.value_schema, value)
                    yield m.MapStateCall(stateName=self.name,
                                         updateValue=m.UpdateValue(userKey=self._key(key), value=value_bytes))

        self._pipeline(calls())

    def _key(self, key: bytes) -> bytes:
        return cast(bytes, self.api._serialize_to_bytes(self.client.user_key_schema, (key,)))

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
