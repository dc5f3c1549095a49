#!/usr/bin/env python3
"""An independent client for `mongoload sim --replset rs0 --members 3`:
pymongo discovers the set from the seed list given as the first argument,
writes, reads from a secondary, steps the primary down with
replSetStepDown, follows the election and writes again. Exits non-zero on
the first mismatch."""

import sys
import time

import pymongo
from pymongo import errors
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

    try:
        client.admin.command("replSetStepDown", 30)
    except errors.AutoReconnect:
        pass  # a server may close the connection instead of answering
    wait_for(lambda: client.primary is not None and client.primary != first, "a new primary")
    items.insert_one({"_id": 11})
    check(items.count_documents({}) == 12, "writes land on the new primary")
    new_hello = client.admin.command("hello")
    check(new_hello["electionId"] != hello["electionId"], "a new electionId")
    print("pymongo replica-set check passed")


if __name__ == "__main__":
    main(sys.argv[1])
