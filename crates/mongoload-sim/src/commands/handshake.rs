//! The handshake and server commands: `hello`/`isMaster`, `buildInfo`,
//! `serverStatus`.

use std::sync::atomic::Ordering as AtomicOrdering;

use bson::{doc, DateTime, Document};

use super::*;

pub(super) fn hello(connection_id: i64, legacy: bool, sessions: bool) -> Document {
    let mut d = Document::new();
    d.insert("helloOk", true);
    d.insert(
        if legacy {
            "ismaster"
        } else {
            "isWritablePrimary"
        },
        true,
    );
    d.extend(doc! {
        "maxBsonObjectSize": MAX_BSON_SIZE as i32,
        "maxMessageSizeBytes": MAX_MESSAGE_SIZE as i32,
        "maxWriteBatchSize": MAX_WRITE_BATCH as i32,
        "localTime": DateTime::now(),
        "connectionId": connection_id,
        "minWireVersion": 0,
        "maxWireVersion": 21,
        "readOnly": false,
        "ok": 1.0,
    });
    if sessions {
        d.insert("logicalSessionTimeoutMinutes", 30);
    }
    d
}

pub(super) fn build_info() -> Document {
    doc! {
        "version": VERSION,
        "gitVersion": "mongoload-sim",
        "versionArray": [7, 0, 0, 0],
        "modules": [],
        "allocator": "system",
        "javascriptEngine": "none",
        "sysInfo": "mongoload sim: an in-memory test double, not a database",
        "bits": 64,
        "debug": false,
        "maxBsonObjectSize": MAX_BSON_SIZE as i32,
        "storageEngines": ["mongoload-sim-memory"],
        "ok": 1.0,
    }
}

pub(super) fn server_status(shared: &Shared) -> Document {
    let s = &shared.stats;
    let up = shared.started.elapsed();
    let get = |c: &std::sync::atomic::AtomicU64| c.load(AtomicOrdering::Relaxed) as i64;
    doc! {
        "host": "mongoload-sim",
        "version": VERSION,
        "process": "mongoload-sim",
        "pid": std::process::id() as i64,
        "uptime": up.as_secs_f64().floor(),
        "uptimeMillis": up.as_millis() as i64,
        "uptimeEstimate": up.as_secs() as i64,
        "localTime": DateTime::now(),
        "connections": {
            "current": get(&s.conns_current) as i32,
            "available": 1_000_000 - get(&s.conns_current) as i32,
            "totalCreated": get(&s.conns_total),
            "active": get(&s.conns_current) as i32,
        },
        "opcounters": {
            "insert": get(&s.insert),
            "query": get(&s.query),
            "update": get(&s.update),
            "delete": get(&s.delete),
            "getmore": get(&s.getmore),
            "command": get(&s.command),
        },
        "ok": 1.0,
    }
}
