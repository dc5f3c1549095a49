//! Every exit status the binary uses, in one place. The commands return
//! these; `--help`, mongoload(1)'s EXIT STATUS and the table in
//! docs/commands.md list them (a test keeps the three equal).

use std::process::ExitCode;

/// An exit status of `mongoload` (sysexits' numbers where one fits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// A failure of the command itself.
    Failure = 1,
    /// A bad command line, or input that cannot be read.
    Usage = 2,
    /// EX_UNAVAILABLE: the deployment or the daemon cannot be reached.
    Unavailable = 69,
    /// EX_PROTOCOL: the deployment does not support a command or an option
    /// the plan needs.
    Unsupported = 76,
    /// EX_NOPERM: the deployment refused the login or a privilege.
    Refused = 77,
    /// EX_CONFIG: the configuration is unusable.
    Config = 78,
}

impl Exit {
    /// Every status, in numeric order.
    pub const ALL: [Exit; 7] = [
        Exit::Ok,
        Exit::Failure,
        Exit::Usage,
        Exit::Unavailable,
        Exit::Unsupported,
        Exit::Refused,
        Exit::Config,
    ];

    /// The number the process exits with.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// What the status means, command by command (the man page's text).
    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Ok => {
                "Success: run's schedules ended, or it was stopped by SIGTERM or SIGINT and drained; \
                 check-config found the file valid; check-target found the deployment ready; \
                 report --compare found no regression; ctl got an answer."
            }
            Exit::Failure => {
                "Failure: run or demo could not start (cannot listen, cannot create the client); \
                 sim failed; check-target's scratch-collection check failed for another reason \
                 than a refusal; report --compare: a stage's throughput dropped by more than \
                 --max-drop; ctl: the daemon refused the request (an unknown workload)."
            }
            Exit::Usage => {
                "Usage: a bad command line; report: a run log cannot be read or parsed; \
                 ctl: bad arguments."
            }
            Exit::Unavailable => {
                "Unavailable (EX_UNAVAILABLE): check-target cannot reach the deployment (network, \
                 TLS, timeouts); ctl: no daemon answers on the control socket."
            }
            Exit::Unsupported => {
                "Unsupported (EX_PROTOCOL): the deployment does not have a command or an option \
                 the plan needs (it answered CommandNotFound, CommandNotSupported, \
                 NotImplemented, IllegalOperation or InvalidOptions): run, at prepare (the \
                 message names the command and the way out); check-target; the systemd units \
                 do not restart on it."
            }
            Exit::Refused => {
                "Refused (EX_NOPERM): check-target: the deployment refused the login or a \
                 privilege the plan needs; run, at prepare: a command was refused a privilege \
                 (named); the systemd units do not restart on it."
            }
            Exit::Config => {
                "Config (EX_CONFIG): an invalid config (the message names file, key and \
                 reason), a run.log or control.socket path the daemon cannot write, or a \
                 RLIMIT_NOFILE too low for the plan, or (run, at prepare) a shard_key against a \
                 deployment that is not a sharded cluster, or a collection already sharded on \
                 another key; the systemd units do not restart on it."
            }
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_status_once_in_order() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [0, 1, 2, 69, 76, 77, 78]);
        assert!(Exit::ALL.iter().all(|e| !e.meaning().is_empty()));
    }
}
