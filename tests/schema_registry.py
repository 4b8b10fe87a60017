"""A STAND-IN for Confluent Schema Registry, for tests only: no registry server can be installed
on the machines that run this suite. It serves the REST endpoints kstool uses and answers as the
real one does (ids shared across subjects for identical schemas, versions per subject, 404
bodies with Confluent's error codes). Given KSTOOL_TEST_SCHEMA_REGISTRY, the tests use that real
registry instead."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

from tests.helpers import send_json


class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.schemas: dict[int, dict] = {}  # id -> {"schema", "schemaType"}
        self.subjects: dict[str, list[int]] = {}  # subject -> ids by version

    def id_of(self, body: dict) -> int | None:
        wanted = (body["schema"], body.get("schemaType", "AVRO"))
        return next((i for i, s in self.schemas.items() if (s["schema"], s["schemaType"]) == wanted), None)


def _handler(state: _State):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, status: int, body) -> None:
            send_json(self, status, body, "application/vnd.schemaregistry.v1+json")

        def _schema_doc(self, schema_id: int) -> dict:
            schema = state.schemas[schema_id]
            doc = {"schema": schema["schema"]}
            if schema["schemaType"] != "AVRO":  # the real registry leaves out the default type
                doc["schemaType"] = schema["schemaType"]
            return doc

        def do_GET(self):
            path = unquote(urlparse(self.path).path)
            with state.lock:
                if match := re.fullmatch(r"/schemas/ids/(\d+)", path):
                    schema_id = int(match[1])
                    if schema_id not in state.schemas:
                        return self._send(404, {"error_code": 40403, "message": f"Schema {schema_id} not found"})
                    return self._send(200, self._schema_doc(schema_id))
                if path == "/subjects":
                    return self._send(200, sorted(state.subjects))
                if match := re.fullmatch(r"/subjects/([^/]+)/versions/(latest|\d+)", path):
                    ids = state.subjects.get(match[1])
                    if not ids:
                        return self._send(404, {"error_code": 40401, "message": f"Subject '{match[1]}' not found."})
                    version = len(ids) if match[2] == "latest" else int(match[2])
                    if not 1 <= version <= len(ids):
                        return self._send(404, {"error_code": 40402, "message": f"Version {match[2]} not found."})
                    return self._send(200, {"subject": match[1], "version": version, "id": ids[version - 1],
                                            **self._schema_doc(ids[version - 1])})
            return self._send(404, {"error_code": 404, "message": "HTTP 404 Not Found"})

        def do_POST(self):
            path = unquote(urlparse(self.path).path)
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            body.setdefault("schemaType", "AVRO")
            with state.lock:
                if match := re.fullmatch(r"/subjects/([^/]+)/versions", path):
                    schema_id = state.id_of(body)
                    if schema_id is None:
                        schema_id = max(state.schemas, default=0) + 1
                        state.schemas[schema_id] = {"schema": body["schema"], "schemaType": body["schemaType"]}
                    ids = state.subjects.setdefault(match[1], [])
                    if schema_id not in ids:
                        ids.append(schema_id)
                    return self._send(200, {"id": schema_id})
                if match := re.fullmatch(r"/subjects/([^/]+)", path):
                    ids = state.subjects.get(match[1])
                    if not ids:
                        return self._send(404, {"error_code": 40401, "message": f"Subject '{match[1]}' not found."})
                    schema_id = state.id_of(body)
                    if schema_id not in ids:
                        return self._send(404, {"error_code": 40403, "message": "Schema not found"})
                    return self._send(200, {"subject": match[1], "version": ids.index(schema_id) + 1,
                                            "id": schema_id, **self._schema_doc(schema_id)})
            return self._send(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    return Handler


class StandInRegistry:
    def __init__(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(_State()))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
