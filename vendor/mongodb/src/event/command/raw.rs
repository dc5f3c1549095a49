use std::time::Duration;

use crate::{
    bson::{doc, oid::ObjectId, RawDocumentBuf},
    bson_compat::RawError,
    event::command::{CommandEvent, CommandFailedEvent, CommandSucceededEvent},
};

pub use crate::cmap::ConnectionInfo;

use super::CommandStartedEvent;

/// A command event with its command and reply as the bytes the driver
/// sent and received: reading a field or two of them costs a lookup, where
/// a [`CommandEvent`] has converted each to a `Document` first.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RawCommandEvent {
    /// A command was sent.
    Started(RawCommandStartedEvent),
    /// A command's reply was received and the command succeeded.
    Succeeded(RawCommandSucceededEvent),
    /// A command failed.
    Failed(CommandFailedEvent),
}

/// [`super::CommandStartedEvent`] with the command as sent (with a
/// `command_event_filter`, without its document sequences).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RawCommandStartedEvent {
    /// The command's body.
    pub command: RawDocumentBuf,
    /// The database the command runs against.
    pub db: String,
    /// The command's name.
    pub command_name: String,
    /// The driver's id of the request; its succeeded or failed event has the same.
    pub request_id: i32,
    /// The connection the command was sent on.
    pub connection: ConnectionInfo,
    /// The server's service id (load-balanced mode only).
    pub service_id: Option<ObjectId>,
}

/// [`CommandSucceededEvent`] with the reply as received.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RawCommandSucceededEvent {
    /// How long the command took, from sending it to its reply.
    pub duration: Duration,
    /// The server's reply.
    pub reply: RawDocumentBuf,
    /// The command's name.
    pub command_name: String,
    /// The driver's id of the request, as in its started event.
    pub request_id: i32,
    /// The connection the command was sent on.
    pub connection: ConnectionInfo,
    /// The server's service id (load-balanced mode only).
    pub service_id: Option<ObjectId>,
}

impl Into<CommandEvent> for RawCommandEvent {
    fn into(self) -> CommandEvent {
        match self {
            RawCommandEvent::Started(ev) => CommandEvent::Started(CommandStartedEvent {
                command: ev.command.try_into().unwrap_or_else(
                    |e: RawError| doc! { "invalid command document": e.to_string() },
                ),
                db: ev.db,
                command_name: ev.command_name,
                request_id: ev.request_id,
                connection: ev.connection,
                service_id: ev.service_id,
            }),
            RawCommandEvent::Succeeded(ev) => CommandEvent::Succeeded(CommandSucceededEvent {
                duration: ev.duration,
                reply: ev
                    .reply
                    .try_into()
                    .unwrap_or_else(|e: RawError| doc! { "invalid reply document": e.to_string() }),
                command_name: ev.command_name,
                request_id: ev.request_id,
                connection: ev.connection,
                service_id: ev.service_id,
            }),
            RawCommandEvent::Failed(ev) => CommandEvent::Failed(ev),
        }
    }
}
