#!/usr/bin/env python3
"""An independent client for `mongoload sim`: pymongo runs CRUD, aggregate
and cursors against the URI given as the first argument and exits non-zero
on the first mismatch."""

import sys

import pymongo
from pymongo import errors


def check(cond, what):
    if not cond:
        print(f"MISMATCH: {what}", file=sys.stderr)
        sys.exit(1)


def main(uri):
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=3000)
    info = client.server_info()
    check("mongoload-sim" in info["version"], f"buildInfo version {info['version']!r}")
    check(client.admin.command("ping")["ok"] == 1.0, "ping")

    db = client["pycheck"]
    db.drop_collection("items")
    items = db["items"]

    # CRUD
    res = items.insert_many([{"_id": i, "k": i % 10, "name": f"n{i}"} for i in range(300)])
    check(len(res.inserted_ids) == 300, "insert_many inserted 300")
    oid = items.insert_one({"name": "auto"}).inserted_id
    check(items.find_one({"_id": oid})["name"] == "auto", "find_one by ObjectId")
    check(items.find_one({"_id": 42}) == {"_id": 42, "k": 2, "name": "n42"}, "find_one by _id")
    r = items.update_one({"_id": 1}, {"$set": {"name": "one"}, "$inc": {"k": 5}})
    check((r.matched_count, r.modified_count) == (1, 1), "update_one counts")
    check(items.find_one({"_id": 1}) == {"_id": 1, "k": 6, "name": "one"}, "update_one effect")
    r = items.update_many({"k": 3}, {"$set": {"three": True}})
    check(r.modified_count == 30, f"update_many modified {r.modified_count}")
    r = items.update_one({"_id": 1000}, {"$set": {"k": 99}}, upsert=True)
    check(r.upserted_id == 1000, "upsert id")
    r = items.replace_one({"_id": 2}, {"only": "field"})
    check(items.find_one({"_id": 2}) == {"_id": 2, "only": "field"}, "replace_one")
    doc = items.find_one_and_update(
        {"_id": 5}, {"$inc": {"k": 1}}, return_document=pymongo.ReturnDocument.AFTER
    )
    check(doc["k"] == 6, "find_one_and_update returns the new document")
    check(items.delete_one({"_id": 5}).deleted_count == 1, "delete_one")
    check(items.delete_many({"k": 9}).deleted_count == 30, "delete_many")
    check(items.count_documents({}) == 271, f"count_documents {items.count_documents({})}")
    check(items.estimated_document_count() == 271, "estimated_document_count")
    check(sorted(items.distinct("k", {"_id": {"$lt": 20}})) == list(range(9)), "distinct")

    try:
        items.insert_many([{"_id": 7000}, {"_id": 42}, {"_id": 7001}], ordered=True)
        check(False, "duplicate key must fail")
    except errors.BulkWriteError as e:
        details = e.details
        check(details["nInserted"] == 1, f"ordered batch stopped: {details}")
        check(details["writeErrors"][0]["code"] == 11000, "E11000 code")
        check(details["writeErrors"][0]["index"] == 1, "E11000 index")

    # Indexes
    items.create_index([("k", pymongo.ASCENDING), ("name", pymongo.DESCENDING)], name="k_name")
    check("k_name" in items.index_information(), "index listed")
    got = [d["_id"] for d in items.find({"k": {"$gte": 7, "$lt": 8}}).sort("_id", -1).limit(3)]
    check(got == [297, 287, 277], f"range with sort and limit: {got}")

    # Cursors across getMore batches
    seen = [d["_id"] for d in items.find({"_id": {"$lt": 1000}}, batch_size=17).sort("_id", 1)]
    check(len(seen) == 269 and seen == sorted(seen), f"cursor paged {len(seen)} docs in order")
    cur = items.find({}, batch_size=5)
    for _ in range(7):
        next(cur)
    cur.close()

    # Aggregate
    out = list(
        items.aggregate(
            [
                {"$match": {"_id": {"$lt": 100}, "k": {"$in": [0, 1]}}},
                {"$group": {"_id": "$k", "n": {"$sum": 1}, "avg": {"$avg": "$_id"}}},
                {"$sort": {"_id": 1}},
            ]
        )
    )
    check([d["_id"] for d in out] == [0, 1], f"group keys {out}")
    check(out[0]["n"] == 10 and out[0]["avg"] == 45.0, f"group values {out[0]}")
    n = list(items.aggregate([{"$match": {"three": True}}, {"$count": "n"}]))
    check(n == [{"n": 30}], f"$count {n}")

    # explain, as mongod's queryPlanner shows the plan: IDHACK for an _id,
    # an IXSCAN under a FETCH for an indexed field (k_name, made above),
    # COLLSCAN otherwise.
    def winning(cursor):
        return cursor.explain()["queryPlanner"]["winningPlan"]
    check(winning(items.find({"_id": 3}))["stage"] == "IDHACK", "explain of an _id find")
    w = winning(items.find({"k": 1}))
    check(w["stage"] == "FETCH" and w["inputStage"]["stage"] == "IXSCAN", f"explain of an indexed find {w}")
    check(w["inputStage"]["keyPattern"] == {"k": 1, "name": -1}, f"the index scanned {w}")
    check(winning(items.find({"three": True}))["stage"] == "COLLSCAN", "explain of a scan")
    agg = db.command("explain", {"aggregate": "items", "pipeline": [{"$match": {"k": 2}}], "cursor": {}})
    check(agg["queryPlanner"]["winningPlan"]["inputStage"]["indexName"] == "k_name", f"explain of an aggregate {agg}")
    # A standalone has no retryable writes: a txnNumber is refused (20),
    # never ignored.
    from bson.int64 import Int64
    from bson.son import SON
    with client.start_session() as s:
        try:
            db.command(SON([("insert", "items"), ("documents", [{"_id": 10_000}]), ("txnNumber", Int64(1))]), session=s)
            check(False, "a txnNumber on a standalone must fail")
        except errors.OperationFailure as e:
            check(e.code == 20, f"txnNumber on a standalone: code {e.code}")
    check(items.find_one({"_id": 10_000}) is None, "the refused insert wrote nothing")

    # isdbgrid is a mongos's command: a mongod does not have it.
    try:
        client.admin.command("isdbgrid")
        check(False, "isdbgrid on a mongod must fail")
    except errors.OperationFailure as e:
        check(e.code == 59, f"isdbgrid code {e.code}")

    # Catalog
    check("items" in db.list_collection_names(), "list_collection_names")
    check("pycheck" in client.list_database_names(), "list_database_names")
    try:
        db.command("nonsense")
        check(False, "unknown command must fail")
    except errors.OperationFailure as e:
        check(e.code == 59, f"unknown command code {e.code}")
    client.drop_database("pycheck")
    check("pycheck" not in client.list_database_names(), "drop_database")
    print("pymongo check passed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: sim_check.py MONGODB_URI", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
