"""kstool.kafka.client: the clients of a command, built from its config."""

from __future__ import annotations

import gc
import socket

from confluent_kafka.admin import AdminClient

from kstool.config import ClientConfig
from kstool.kafka.client import KafkaClients, every_bootstrap_refuses
from tests.cluster import free_ports


def test_clients_dropped_are_freed_at_once_not_left_to_the_cyclic_collector():
    """The engine's source makes clients per call. Left in a reference cycle, a client is freed
    by the cyclic collector in whichever thread runs it, librdkafka's callback threads included,
    and destroyed from its own thread it crashes the process (confluent-kafka-python#1761; the
    source runner died of a SIGSEGV in pthread_mutex_lock mid-query). Freed by reference
    counting, it goes where it was dropped."""
    with socket.create_server(("127.0.0.1", 0)) as listener:  # the first call's probe finds it
        config = ClientConfig(f"127.0.0.1:{listener.getsockname()[1]}", "test")
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector frees stays in gc.garbage
        try:
            clients = KafkaClients(config)
            clients.admin()
            clients.producer()
            clients.consumer()
            del clients
            gc.collect()
            left = [type(o).__name__ for o in gc.garbage if isinstance(o, (KafkaClients, AdminClient))]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert left == []


def test_a_broker_that_refuses_connections_is_known_at_once():
    closed = [f"127.0.0.1:{port}" for port in free_ports(2)]
    assert every_bootstrap_refuses(ClientConfig(",".join(closed), "test"))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listening = f"127.0.0.1:{listener.getsockname()[1]}"
        assert not every_bootstrap_refuses(ClientConfig(listening, "test"))
        assert not every_bootstrap_refuses(ClientConfig(f"{closed[0]},{listening}", "test"))  # one is enough
