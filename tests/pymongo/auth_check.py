#!/usr/bin/env python3
"""An independent SCRAM and TLS client for `mongoload sim --auth USER:PASSWORD
--tls-cert … --tls-key …`: pymongo authenticates with each mechanism over
TLS (trusting the CA file given), is refused with a wrong password (code 18)
and without credentials (code 13), and rejects a certificate it does not
trust. Arguments: HOST:PORT USER PASSWORD CA_FILE OTHER_CA_FILE. Exits
non-zero on the first mismatch."""

import sys
from urllib.parse import quote_plus

import pymongo
from pymongo import errors


def check(cond, what):
    if not cond:
        print(f"MISMATCH: {what}", file=sys.stderr)
        sys.exit(1)


def client(hostport, ca, user=None, password=None, **kw):
    auth = f"{quote_plus(user)}:{quote_plus(password)}@" if user else ""
    uri = f"mongodb://{auth}{hostport}/?tls=true"
    return pymongo.MongoClient(uri, tlsCAFile=ca, serverSelectionTimeoutMS=3000, **kw)


def main(hostport, user, password, ca, other_ca):
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-1", None):
        kw = {"authMechanism": mechanism} if mechanism else {}
        c = client(hostport, ca, user, password, **kw)
        items = c["pyauth"]["items"]
        items.insert_one({"mechanism": str(mechanism)})
        found = items.find_one({"mechanism": str(mechanism)})
        check(found is not None, f"round trip with {mechanism}")
        c.close()

    c = client(hostport, ca, user, password + "x")
    try:
        c["pyauth"]["items"].find_one({})
        check(False, "a wrong password is refused")
    except errors.OperationFailure as e:
        check(e.code == 18, f"wrong password: code {e.code}, {e}")
    c.close()

    c = client(hostport, ca)
    check(c.admin.command("ping")["ok"] == 1.0, "ping needs no authentication")
    try:
        c["pyauth"]["items"].find_one({})
        check(False, "find without credentials is refused")
    except errors.OperationFailure as e:
        check(e.code == 13, f"no credentials: code {e.code}, {e}")
        check("requires authentication" in str(e), str(e))
    c.close()

    c = client(hostport, other_ca, user, password)
    try:
        c.admin.command("ping")
        check(False, "an untrusted certificate is refused")
    except errors.ServerSelectionTimeoutError as e:
        check("CERTIFICATE_VERIFY_FAILED" in str(e), f"untrusted: {e}")
    c.close()
    print("pymongo auth check passed")


if __name__ == "__main__":
    main(*sys.argv[1:6])
