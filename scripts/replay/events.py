# SPDX-License-Identifier: GPL-2.0-only
"""events.jsonl, the run's sequence-numbered event log, and lost-event counting.
"""
import json
import threading

from .common import now_ns


class EventLog:
    """events.jsonl: one JSON object a line, sequence-numbered."""

    def __init__(self, path):
        self.f = open(path, "w")
        self.seq = 0
        self.lock = threading.Lock()

    def emit(self, kind, **fields):
        with self.lock:
            self.seq += 1
            ev = {"seq": self.seq, "t_ns": now_ns(), "type": kind}
            ev.update(fields)
            self.f.write(json.dumps(ev, sort_keys=True) + "\n")
            self.f.flush()
            return ev

    def close(self):
        self.f.close()


def event_seq_gaps(path, key="seq"):
    last, lost = 0, 0
    with open(path) as f:
        for ln in f:
            s = json.loads(ln)[key]
            if s != last + 1:
                lost += max(0, s - last - 1)
            last = s
    return lost
