"""Scripted join inputs and the outputs worked out for them by hand (times: seconds after T0),
shared by the join, restore and engine tests."""

from __future__ import annotations

from tests.helpers import T0, read_all


def joined_output(kafka, topic) -> list[tuple]:
    return [(m.key().decode(), None if m.value() is None else m.value().decode(), (m.timestamp()[1] - T0) // 1000)
            for m in read_all(kafka, topic)]


# Processing order within the task: the side whose next record has the smaller timestamp goes
# first (ties: right). Left: L1 a@5, L2 b@20, L4 a@9, L3 a@3, L5 a@-6; right: R1 a@12, R3 d@15,
# R2 c@40 -> L1@5, R1@12, R3@15, L2@20, L4@9, L3@3, L5@-6, R2@40.
STREAM_LEFT = [("a", "L1", 5), ("b", "L2", 20), ("a", "L4", 9), ("a", "L3", 3), ("a", "L5", -6)]


STREAM_RIGHT = [("a", "R1", 12), ("d", "R3", 15), ("c", "R2", 40)]


STREAM_STREAM = ("--kind", "stream-stream", "--within", "10s", "--grace", "5s")


JOINED = [("a", '{"left":"L1","right":"R1"}', 12), ("a", '{"left":"L4","right":"R1"}', 12),
           ("a", '{"left":"L3","right":"R1"}', 12)]


L5_ALONE, L2_ALONE = ("a", '{"left":"L5","right":null}', -6), ("b", '{"left":"L2","right":null}', 20)


STREAM_STREAM_OUTPUT = {"inner": JOINED, "left": JOINED + [L5_ALONE, L2_ALONE],
                        "outer": JOINED + [L5_ALONE, ("d", '{"left":null,"right":"R3"}', 15), L2_ALONE]}


# stream (left): S1 a@10, S2 b@20, S3 a@30, S4 c@35, S5 a@40
# table (right): T1 a@5, T3 b@22, T2 a@25, delete a@32
TABLE_STREAM = [("a", "S1", 10), ("b", "S2", 20), ("a", "S3", 30), ("c", "S4", 35), ("a", "S5", 40)]


TABLE_UPDATES = [("a", "T1", 5), ("b", "T3", 22), ("a", "T2", 25), ("a", None, 32)]


STREAM_TABLE_OUTPUT = {"inner": [("a", "S1+T1", 10), ("a", "S3+T2", 30)],
                       "left": [("a", "S1+T1", 10), ("b", "S2+null", 20), ("a", "S3+T2", 30), ("c", "S4+null", 35),
                                ("a", "S5+null", 40)]}
