"""A run outlives a Kafka outage: when its query fails while the brokers cannot be reached, the
run waits for them (with backoff, for --broker-timeout), then starts the query again from its
checkpoint, as a restarted run would: the batch in flight runs again (exactly_once_v2 skips it
if its transaction had committed), and nothing is committed ahead of its output."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from kstool.base.errors import BrokerUnreachableError
from kstool.kafka.client import NO_LEADER_ANSWERED, KafkaClients

BACKOFF_S = (1, 2, 4, 8, 15)
# what librdkafka and kstool's own sink and source say when a broker went away mid-batch, or a
# node of a cluster did and its partitions' leaders or coordinators were not elected again yet
LOST_BROKER_SIGNS = ("Broker transport failure", "All broker connections are down", "Connection refused",
                     "Message timed out", "Local: Timed out", "no records from",
                     "Disconnected", "flush timed out", "message(s) timed out",
                     "Leader not available", "Not leader", "Not coordinator", "Coordinator load in progress",
                     "Coordinator not available", "Timed out waiting for operation to finish", "Leader epoch",
                     "Leader high watermark is not caught up", NO_LEADER_ANSWERED)
# kstool's BrokerUnreachableError, as the query's failure quotes it
_UNREACHABLE = re.compile(r"cannot reach Kafka at [^\n]*")


@dataclass
class Outage:
    """The broker timeout of a run and the retries it has left."""

    timeout_s: float
    since: float | None = None  # monotonic start of the outage being waited out
    resumed_at: int | None = None  # the last committed batch when the run resumed

    def caused(self, clients: KafkaClients, failure: Exception) -> str | None:
        """Why the failure is the brokers' (None: it is not). A failure whose brokers answer
        again at once counts when its message shows a lost connection."""
        unreachable_already = _UNREACHABLE.search(str(failure))
        if unreachable_already:  # asking again would wait out the client timeout a second time
            return unreachable_already.group(0)
        try:
            clients.fail_if_every_bootstrap_refuses()  # known at once, without the client timeout
            clients.metadata()
        except BrokerUnreachableError as unreachable:
            return str(unreachable)
        text = str(failure)
        return text.splitlines()[0] if any(sign in text for sign in LOST_BROKER_SIGNS) else None

    def wait(self, clients: KafkaClients, reason: str, last_batch: int | None, say: Callable[[str], None]) -> None:
        """Wait until the brokers answer; raise when they have not for the whole timeout. A
        run that fails again before committing a batch is still in the same outage."""
        if self.since is None or last_batch != self.resumed_at:
            self.since = time.monotonic()
            say(f"Kafka unreachable ({reason}); retrying for up to {self.timeout_s:g}s")
        attempt = 0
        while True:
            waited = time.monotonic() - self.since
            if waited >= self.timeout_s:
                committed = f"batch {last_batch}" if last_batch is not None else "none"
                raise BrokerUnreachableError(
                    f"Kafka unreachable for {waited:.0f}s (--broker-timeout {self.timeout_s:g}s): {reason}; "
                    f"last committed batch: {committed}; run again to go on from there")
            time.sleep(min(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)], self.timeout_s - waited))
            attempt += 1
            left = self.timeout_s - (time.monotonic() - self.since)
            try:  # a probe that cannot answer ends with --broker-timeout, not past it
                clients.fail_if_every_bootstrap_refuses()
                clients.metadata(max(1.0, min(clients.timeout, left)))
            except BrokerUnreachableError:
                continue
            say(f"Kafka reachable again after {time.monotonic() - self.since:.0f}s; resuming from the checkpoint")
            self.resumed_at = last_batch
            return
