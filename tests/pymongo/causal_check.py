#!/usr/bin/env python3
"""An independent client for `mongoload sim --replset rs0 --members 3
--replication-lag 500ms`, checking cluster time as MongoDB's documentation
describes it: every reply of a member carries `operationTime` and
`$clusterTime`, the cluster time advances with writes, and a causally
consistent session's read from a secondary (pymongo sends
`readConcern.afterClusterTime`) sees the session's own write although the
secondaries apply it 500 ms late, while a read outside the session does
not wait for it. Exits non-zero on the first mismatch."""

import sys
import time

import pymongo
from pymongo import monitoring
from pymongo.read_preferences import Secondary
from pymongo.write_concern import WriteConcern


def check(cond, what):
    if not cond:
        print(f"MISMATCH: {what}", file=sys.stderr)
        sys.exit(1)


class Commands(monitoring.CommandListener):
    def __init__(self):
        self.finds = []

    def started(self, event):
        if event.command_name == "find":
            self.finds.append(event.command)

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


def main(uri):
    commands = Commands()
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=15000, event_listeners=[commands])
    ping = client.admin.command("ping")
    check("operationTime" in ping, f"operationTime in a member's reply: {ping}")
    cluster = ping.get("$clusterTime", {})
    check("clusterTime" in cluster and "signature" in cluster, f"$clusterTime: {ping}")

    items = client["causal"]["items"]
    items.drop()
    before = client.admin.command("ping")["$clusterTime"]["clusterTime"]
    items.insert_one({"_id": 0})
    after = client.admin.command("ping")["$clusterTime"]["clusterTime"]
    check(after > before, f"the cluster time advances with a write: {before} then {after}")

    secondary = items.with_options(read_preference=Secondary())
    # Acknowledged by the primary alone (w: 1; the default, majority,
    # would wait for the secondaries).
    w1 = items.with_options(write_concern=WriteConcern(w=1))
    # Outside a session the secondary answers at once, before it applied
    # the write (500 ms behind).
    w1.insert_one({"_id": 1})
    check(secondary.find_one({"_id": 1}) is None, "a plain secondary read sees the lag")

    with client.start_session(causal_consistency=True) as s:
        w1.insert_one({"_id": 2}, session=s)
        started = time.monotonic()
        doc = secondary.find_one({"_id": 2}, session=s)
        waited = time.monotonic() - started
    check(doc is not None, "a causally consistent read sees its session's write")
    check(waited >= 0.2, f"the secondary waited to apply it: {waited:.3f}s")
    rc = commands.finds[-1].get("readConcern", {})
    check("afterClusterTime" in rc, f"pymongo sent afterClusterTime: {commands.finds[-1]}")
    print("pymongo causal consistency check passed")


if __name__ == "__main__":
    main(sys.argv[1])
