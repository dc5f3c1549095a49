#!/usr/bin/env python3
"""An independent client for `mongoload sim --replset rs0 --members 3`:
pymongo discovers the set from the seed list given as the first argument,
writes, reads from a secondary, steps the primary down with
replSetStepDown, follows the election and writes again. The step-down is
MongoDB 4.2's and later: it answers ok, the old primary keeps its
connections, and a write sent to it on the connection it already had gets
NotWritablePrimary (10107) with the member's new topologyVersion, which
pymongo reads without clearing that member's pool. Exits non-zero on the
first mismatch."""

import sys
import time

import pymongo
from pymongo import errors, monitoring
from pymongo.read_preferences import Secondary
from pymongo.write_concern import WriteConcern


def check(cond, what):
    if not cond:
        print(f"MISMATCH: {what}", file=sys.stderr)
        sys.exit(1)


def wait_for(cond, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    check(False, f"timed out waiting for {what}")


class Pools(monitoring.ConnectionPoolListener):
    """The pool events that matter here: clears and closed connections."""

    def __init__(self):
        self.cleared = []
        self.closed = []
        self.created = 0

    def pool_cleared(self, event):
        self.cleared.append(event.address)

    def connection_closed(self, event):
        self.closed.append((event.address, event.reason))

    def connection_created(self, event):
        self.created += 1

    def pool_created(self, event):
        pass

    def pool_ready(self, event):
        pass

    def pool_closed(self, event):
        pass

    def connection_ready(self, event):
        pass

    def connection_check_out_started(self, event):
        pass

    def connection_check_out_failed(self, event):
        pass

    def connection_checked_out(self, event):
        pass

    def connection_checked_in(self, event):
        pass


def main(uri):
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=15000)
    hello = client.admin.command("hello")
    check(hello["setName"] == "rs0", f"setName {hello.get('setName')!r}")
    check(hello["isWritablePrimary"] is True, "hello from the primary")
    check(len(hello["hosts"]) == 3, f"hosts {hello['hosts']}")
    first = client.primary
    check(first is not None, "pymongo found a primary")
    wait_for(lambda: len(client.secondaries) == 2, "two secondaries")

    items = client["pycheck"]["items"]
    items.drop()
    items.insert_many([{"_id": i} for i in range(10)])
    majority = items.with_options(write_concern=WriteConcern(w="majority"))
    majority.insert_one({"_id": 10})
    on_secondary = items.with_options(read_preference=Secondary())
    wait_for(lambda: on_secondary.count_documents({}) == 11, "the secondaries replicate")

    status = client.admin.command("replSetGetStatus")
    check([m["stateStr"] for m in status["members"]].count("PRIMARY") == 1, "one primary in replSetGetStatus")

    # A client of the primary alone, with one connection open before the
    # step-down.
    pools = Pools()
    direct = pymongo.MongoClient(
        f"mongodb://{first[0]}:{first[1]}/?directConnection=true",
        maxPoolSize=1,
        event_listeners=[pools],
    )
    direct.admin.command("ping")
    before = direct.admin.command("hello")["topologyVersion"]
    check(pools.created == 1, f"one connection to the primary, {pools.created}")

    reply = client.admin.command("replSetStepDown", 30)
    check(reply.get("ok") == 1, f"replSetStepDown answers ok: {reply}")
    try:
        direct["pycheck"]["items"].insert_one({"_id": 100})
        check(False, "a write on the stepped-down primary is refused")
    except errors.NotPrimaryError as e:
        details = e.details or {}
        check(details.get("code") == 10107, f"NotWritablePrimary, got {details}")
        tv = details.get("topologyVersion")
        check(tv is not None, f"the refusal carries a topologyVersion: {e.details}")
        check(tv["processId"] == before["processId"], "the same process")
        check(tv["counter"] > before["counter"], f"a newer topologyVersion: {tv} after {before}")
    direct.admin.command("ping")
    check(direct.admin.command("hello")["isWritablePrimary"] is False, "no longer primary")
    check(not pools.cleared, f"no pool cleared: {pools.cleared}")
    check(not pools.closed, f"no connection closed: {pools.closed}")
    check(pools.created == 1, f"the first connection still serves: {pools.created} opened")
    direct.close()
    wait_for(lambda: client.primary is not None and client.primary != first, "a new primary")
    items.insert_one({"_id": 11})
    check(items.count_documents({}) == 12, "writes land on the new primary")
    new_hello = client.admin.command("hello")
    check(new_hello["electionId"] != hello["electionId"], "a new electionId")
    print("pymongo replica-set check passed")


if __name__ == "__main__":
    main(sys.argv[1])
