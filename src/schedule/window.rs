//! Time-of-day windows for continuous soak schedules (issue 4): "weekdays
//! 09:00–17:00 in Europe/Berlin". Pure functions of a UTC instant; the time
//! zone's rules (DST) come from chrono-tz.
//!
//! [`WindowPlan`] gives each window a level (and a default level outside
//! them); [`super::Schedule::from_windows`] makes it a schedule that repeats
//! forever and follows wall-clock time.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, Duration as ChronoDuration, NaiveDate, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

use super::{Mode, Shape, Stage, StageError};

const MINUTES_PER_DAY: u16 = 24 * 60;

/// The longest a window slot runs before the engine looks again (when no
/// window changes within the next days, or the zone's rules are odd).
pub(crate) const MAX_SLOT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// A window change this close ahead counts as already happened, so an
/// engine woken a hair early by its monotonic timer does not start a
/// sliver of the old window.
const SNAP_MS: i64 = 1000;

/// Days of the week a window starts on, Monday = bit 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Days(u8);

const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

impl Days {
    /// Every day.
    pub const ALL: Days = Days(0x7f);

    /// Whether the window starts on `date`'s weekday.
    pub fn contains(self, date: NaiveDate) -> bool {
        self.0 & (1 << date.weekday().num_days_from_monday()) != 0
    }

    fn parse_day(s: &str) -> Option<u8> {
        let s = s.trim().to_ascii_lowercase();
        DAY_NAMES
            .iter()
            .position(|d| s.starts_with(d) && d.len() >= 3)
            .map(|i| i as u8)
    }
}

impl FromStr for Days {
    type Err = String;

    /// `daily`, `weekdays`, `weekends`, or a comma list of days and ranges:
    /// `mon-fri`, `sat,sun`, `mon,wed-fri`.
    fn from_str(s: &str) -> Result<Days, String> {
        let bad = || format!("not a day set: {s:?} (e.g. \"mon-fri\", \"sat,sun\", \"daily\")");
        match s.trim().to_ascii_lowercase().as_str() {
            "daily" | "every day" | "all" => return Ok(Days::ALL),
            "weekdays" => return Ok(Days(0x1f)),
            "weekends" | "weekend" => return Ok(Days(0x60)),
            _ => {}
        }
        let mut bits = 0u8;
        for part in s.split(',') {
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (
                        Days::parse_day(a).ok_or_else(bad)?,
                        Days::parse_day(b).ok_or_else(bad)?,
                    );
                    // A range may wrap over the week end (fri-mon).
                    let mut d = a;
                    loop {
                        bits |= 1 << d;
                        if d == b {
                            break;
                        }
                        d = (d + 1) % 7;
                    }
                }
                None => bits |= 1 << Days::parse_day(part).ok_or_else(bad)?,
            }
        }
        Ok(Days(bits))
    }
}

impl fmt::Display for Days {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0x7f => f.write_str("daily"),
            0x1f => f.write_str("mon-fri"),
            0x60 => f.write_str("sat,sun"),
            bits => {
                let names: Vec<&str> = (0..7)
                    .filter(|d| bits & (1 << d) != 0)
                    .map(|d| DAY_NAMES[d])
                    .collect();
                f.write_str(&names.join(","))
            }
        }
    }
}

/// A daily window in local time: `start` ≤ t < `end`, in minutes of the
/// day. `end` ≤ `start` crosses midnight into the next day; `24:00` ends at
/// midnight. The window belongs to the day it starts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The days the window starts on.
    pub days: Days,
    /// Start, minutes after local midnight (0..1440).
    pub start: u16,
    /// End, minutes after local midnight (1..=1440).
    pub end: u16,
}

fn parse_hhmm(s: &str) -> Option<u16> {
    let (h, m) = s.trim().split_once(':')?;
    let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
    let total = h.checked_mul(60)?.checked_add(m)?;
    (m < 60 && total <= MINUTES_PER_DAY).then_some(total)
}

fn fmt_hhmm(m: u16) -> String {
    format!("{:02}:{:02}", m / 60, m % 60)
}

impl FromStr for Window {
    type Err = String;

    /// `"mon-fri 09:00-17:00"`, `"daily 22:00-06:00"`, `"09:00-17:00"`
    /// (every day).
    fn from_str(s: &str) -> Result<Window, String> {
        let bad = || format!("not a window: {s:?} (e.g. \"mon-fri 09:00-17:00\")");
        let s = s.trim();
        let (days, times) = match s.rsplit_once(' ') {
            Some((d, t)) => (d.parse::<Days>()?, t),
            None => (Days::ALL, s),
        };
        let (a, b) = times.split_once('-').ok_or_else(bad)?;
        let (start, end) = (
            parse_hhmm(a).ok_or_else(bad)?,
            parse_hhmm(b).ok_or_else(bad)?,
        );
        if start == MINUTES_PER_DAY || start == end {
            return Err(format!("{s:?}: a window must not be empty"));
        }
        Ok(Window { days, start, end })
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}-{}",
            self.days,
            fmt_hhmm(self.start),
            fmt_hhmm(self.end)
        )
    }
}

impl Window {
    fn crosses_midnight(&self) -> bool {
        self.end <= self.start
    }

    /// How long the window is open on a day without a clock change.
    pub fn length(&self) -> std::time::Duration {
        let minutes = if self.crosses_midnight() {
            self.end + MINUTES_PER_DAY - self.start
        } else {
            self.end - self.start
        };
        std::time::Duration::from_secs(u64::from(minutes) * 60)
    }

    /// Whether local `date` at `minute` lies in the window.
    fn contains_local(&self, date: NaiveDate, minute: u16) -> bool {
        if self.crosses_midnight() {
            (self.days.contains(date) && minute >= self.start)
                || (date.pred_opt().is_some_and(|d| self.days.contains(d)) && minute < self.end)
        } else {
            self.days.contains(date) && minute >= self.start && minute < self.end
        }
    }
}

/// A set of windows in one time zone. The first window that contains an
/// instant is the active one.
#[derive(Debug, Clone, PartialEq)]
pub struct Windows {
    tz: Tz,
    windows: Vec<Window>,
}

/// One row of [`Windows::timeline`]: `[from, to)` with the active window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowSpan {
    /// Start of the span.
    pub from: DateTime<Utc>,
    /// End of the span (exclusive), clipped to the horizon.
    pub to: DateTime<Utc>,
    /// Index of the active window, `None` outside every window.
    pub window: Option<usize>,
}

impl Windows {
    /// Windows in a time zone.
    pub fn new(tz: Tz, windows: Vec<Window>) -> Windows {
        Windows { tz, windows }
    }

    /// Parses an IANA zone name such as `Europe/Berlin` or `UTC`.
    pub fn parse_tz(name: &str) -> Result<Tz, String> {
        name.parse::<Tz>().map_err(|_| {
            format!("unknown time zone {name:?} (an IANA name such as \"Europe/Berlin\")")
        })
    }

    /// The time zone.
    pub fn tz(&self) -> Tz {
        self.tz
    }

    /// The windows.
    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    /// The index of the window active at `t`, if any. Local time is read to
    /// the minute: windows open and close on minute boundaries.
    pub fn active_at(&self, t: DateTime<Utc>) -> Option<usize> {
        let local = t.with_timezone(&self.tz);
        let minute = (local.hour() * 60 + local.minute()) as u16;
        let date = local.date_naive();
        self.windows
            .iter()
            .position(|w| w.contains_local(date, minute))
    }

    /// The UTC instant of local `date` + `minute`; in a DST gap, the first
    /// valid instant after it.
    fn instant(&self, date: NaiveDate, minute: u16) -> Option<DateTime<Utc>> {
        let (date, minute) = if minute >= MINUTES_PER_DAY {
            (date.succ_opt()?, minute - MINUTES_PER_DAY)
        } else {
            (date, minute)
        };
        let naive = date.and_hms_opt((minute / 60) as u32, (minute % 60) as u32, 0)?;
        // A gap is at most a few hours; step forward a minute at a time.
        (0..=180).find_map(|skip| {
            self.tz
                .from_local_datetime(&(naive + ChronoDuration::minutes(skip)))
                .earliest()
                .map(|d| d.with_timezone(&Utc))
        })
    }

    /// The first instant after `t` at which the active window changes, if
    /// any within the next 8 days.
    pub fn next_change(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let now = self.active_at(t);
        let today = t.with_timezone(&self.tz).date_naive();
        let mut candidates: Vec<DateTime<Utc>> = Vec::new();
        for offset in -1..=8i64 {
            let Some(date) = today.checked_add_signed(ChronoDuration::days(offset)) else {
                continue;
            };
            for w in &self.windows {
                let end = if w.crosses_midnight() {
                    w.end + MINUTES_PER_DAY
                } else {
                    w.end
                };
                for m in [w.start, end] {
                    if let Some(i) = self.instant(date, m) {
                        if i > t {
                            candidates.push(i);
                        }
                    }
                }
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        candidates.into_iter().find(|&c| self.active_at(c) != now)
    }

    /// The spans between `start` and `start + horizon`, each with its active
    /// window: what `check-config` prints for the next 24 hours.
    pub fn timeline(&self, start: DateTime<Utc>, horizon: std::time::Duration) -> Vec<WindowSpan> {
        let end = start + ChronoDuration::from_std(horizon).unwrap_or(ChronoDuration::days(1));
        let mut out = Vec::new();
        let mut from = start;
        while from < end {
            let window = self.active_at(from);
            let to = self.next_change(from).map_or(end, |c| c.min(end));
            out.push(WindowSpan { from, to, window });
            from = to;
        }
        out
    }
}

/// Windows with a level each, and a default level outside them: the
/// continuous-soak schedule ("weekdays 09:00–17:00 at 2,000 ops/s,
/// otherwise 300 ops/s"). Levels are holds; a window's level applies while
/// the window is active.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowPlan {
    windows: Windows,
    /// One stage per window, then the default's (nominal duration
    /// [`MAX_SLOT`]; the engine gives each occurrence its real length).
    stages: Vec<Stage>,
    has_default: bool,
}

/// What a [`WindowPlan`] says about one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSlot {
    /// Index into [`WindowPlan::stages`]: the active window's, else the
    /// default's; `None` outside every window without a default (idle).
    pub index: Option<usize>,
    /// When that changes next, if within the next days.
    pub until: Option<DateTime<Utc>>,
}

/// One level of a window plan as configured: a name (the `stage` label),
/// open or closed loop, and the level (ops/s or workers).
#[derive(Debug, Clone, PartialEq)]
pub struct WindowLevel {
    /// The `stage` label while this level applies.
    pub name: String,
    /// Open loop (rate) or closed loop (concurrency).
    pub mode: Mode,
    /// Ops/s or workers.
    pub level: f64,
    /// A capacity search instead of the level: it runs once each time the
    /// window opens, idle after it until the window closes.
    pub search: Option<super::SearchSpec>,
}

impl WindowPlan {
    /// Builds a plan in zone `tz`: each window's level applies inside it
    /// (the first active window wins), `default` outside every window (idle
    /// when `None`). Errors name the bad level: `(Some(i), e)` for window
    /// `i`, `(None, e)` for the default.
    pub fn new(
        tz: Tz,
        windows: Vec<(Window, WindowLevel)>,
        default: Option<WindowLevel>,
    ) -> Result<WindowPlan, (Option<usize>, StageError)> {
        let (windows, levels): (Vec<Window>, Vec<WindowLevel>) = windows.into_iter().unzip();
        let windows = Windows::new(tz, windows);
        let build = |l: &WindowLevel| match &l.search {
            Some(spec) => Stage::search(l.name.clone(), spec.clone(), Some(MAX_SLOT)),
            None => Stage::new(l.name.clone(), l.mode, Shape::Hold(l.level), MAX_SLOT),
        };
        let mut stages = Vec::with_capacity(levels.len() + 1);
        for (i, l) in levels.iter().enumerate() {
            stages.push(build(l).map_err(|e| (Some(i), e))?);
        }
        if let Some(d) = &default {
            stages.push(build(d).map_err(|e| (None, e))?);
        }
        Ok(WindowPlan {
            windows,
            stages,
            has_default: default.is_some(),
        })
    }

    /// The windows and their zone.
    pub fn windows(&self) -> &Windows {
        &self.windows
    }

    /// One nominal stage per window, then the default's.
    pub fn stages(&self) -> Vec<Stage> {
        self.stages.clone()
    }

    /// The level that applies at `t` and until when. A change less than a
    /// second ahead is taken as already happened.
    pub fn at(&self, t: DateTime<Utc>) -> WindowSlot {
        let t = match self.windows.next_change(t) {
            Some(c) if (c - t).num_milliseconds() <= SNAP_MS => c,
            _ => t,
        };
        WindowSlot {
            index: self.resolve(self.windows.active_at(t)),
            until: self.windows.next_change(t),
        }
    }

    fn resolve(&self, window: Option<usize>) -> Option<usize> {
        window.or(self.has_default.then_some(self.windows.windows().len()))
    }

    /// The spans of `[start, start + horizon)` with the stage index that
    /// applies in each (see [`WindowPlan::at`]).
    pub fn timeline(&self, start: DateTime<Utc>, horizon: std::time::Duration) -> Vec<WindowSpan> {
        self.windows
            .timeline(start, horizon)
            .into_iter()
            .map(|s| WindowSpan {
                window: self.resolve(s.window),
                ..s
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn berlin_business() -> Windows {
        Windows::new(
            Windows::parse_tz("Europe/Berlin").unwrap(),
            vec!["mon-fri 09:00-17:00".parse().unwrap()],
        )
    }

    #[test]
    fn parses_days_and_windows() {
        assert_eq!("mon-fri".parse::<Days>().unwrap(), Days(0x1f));
        assert_eq!("sat,sun".parse::<Days>().unwrap(), Days(0x60));
        assert_eq!("fri-mon".parse::<Days>().unwrap(), Days(0b111_0001));
        assert_eq!("daily".parse::<Days>().unwrap(), Days::ALL);
        assert!("funday".parse::<Days>().is_err());
        let w: Window = "mon-fri 09:00-17:30".parse().unwrap();
        assert_eq!((w.start, w.end), (540, 1050));
        assert_eq!(w.to_string(), "mon-fri 09:00-17:30");
        let all: Window = "00:00-24:00".parse().unwrap();
        assert_eq!((all.days, all.start, all.end), (Days::ALL, 0, 1440));
        for bad in [
            "mon-fri 9-17",
            "25:00-26:00",
            "09:00-09:00",
            "mon-fri 09:00",
            "09:61-10:00",
        ] {
            assert!(bad.parse::<Window>().is_err(), "{bad}");
        }
        assert!(Windows::parse_tz("Mars/Olympus").is_err());
    }

    #[test]
    fn weekday_business_hours_in_berlin() {
        let w = berlin_business();
        // 2026-06-01 is a Monday; Berlin is UTC+2 in summer.
        assert_eq!(w.active_at(utc("2026-06-01T06:59:00Z")), None);
        assert_eq!(w.active_at(utc("2026-06-01T07:00:00Z")), Some(0));
        assert_eq!(w.active_at(utc("2026-06-05T14:59:59Z")), Some(0)); // Fri 16:59
        assert_eq!(w.active_at(utc("2026-06-05T15:00:00Z")), None); // Fri 17:00
        assert_eq!(w.active_at(utc("2026-06-06T10:00:00Z")), None); // Saturday
                                                                    // Winter: UTC+1.
        assert_eq!(w.active_at(utc("2026-01-05T08:00:00Z")), Some(0));
        assert_eq!(w.active_at(utc("2026-01-05T07:59:00Z")), None);
    }

    #[test]
    fn next_change_skips_the_weekend() {
        let w = berlin_business();
        assert_eq!(
            w.next_change(utc("2026-06-05T15:00:00Z")),
            Some(utc("2026-06-08T07:00:00Z"))
        );
        assert_eq!(
            w.next_change(utc("2026-06-08T07:00:00Z")),
            Some(utc("2026-06-08T15:00:00Z"))
        );
    }

    #[test]
    fn windows_cross_midnight_and_belong_to_their_start_day() {
        let w = Windows::new(Tz::UTC, vec!["fri 22:00-06:00".parse().unwrap()]);
        assert_eq!(w.active_at(utc("2026-06-05T21:59:00Z")), None);
        assert_eq!(w.active_at(utc("2026-06-05T23:00:00Z")), Some(0)); // Fri night
        assert_eq!(w.active_at(utc("2026-06-06T05:59:00Z")), Some(0)); // Sat morning
        assert_eq!(w.active_at(utc("2026-06-06T06:00:00Z")), None);
        assert_eq!(w.active_at(utc("2026-06-06T23:00:00Z")), None); // Sat night: not a Friday
        assert_eq!(
            w.next_change(utc("2026-06-05T23:00:00Z")),
            Some(utc("2026-06-06T06:00:00Z"))
        );
    }

    #[test]
    fn first_matching_window_wins() {
        let w = Windows::new(
            Tz::UTC,
            vec![
                "daily 12:00-13:00".parse().unwrap(),
                "daily 09:00-17:00".parse().unwrap(),
            ],
        );
        assert_eq!(w.active_at(utc("2026-06-01T12:30:00Z")), Some(0));
        assert_eq!(w.active_at(utc("2026-06-01T10:00:00Z")), Some(1));
        let spans = w.timeline(
            utc("2026-06-01T00:00:00Z"),
            std::time::Duration::from_secs(86_400),
        );
        let rows: Vec<(u32, u32, Option<usize>)> = spans
            .iter()
            .map(|s| (s.from.hour(), s.to.hour(), s.window))
            .collect();
        assert_eq!(
            rows,
            vec![
                (0, 9, None),
                (9, 12, Some(1)),
                (12, 13, Some(0)),
                (13, 17, Some(1)),
                (17, 0, None)
            ]
        );
    }

    #[test]
    fn dst_gap_opens_the_window_at_the_first_valid_instant() {
        // Berlin skips 02:00–03:00 local on 2026-03-29 (01:00 UTC).
        let w = Windows::new(
            Windows::parse_tz("Europe/Berlin").unwrap(),
            vec!["daily 02:30-04:00".parse().unwrap()],
        );
        let open = w.next_change(utc("2026-03-29T00:00:00Z")).unwrap();
        assert_eq!(open, utc("2026-03-29T01:00:00Z")); // 03:00 CEST
        assert_eq!(w.active_at(open), Some(0));
        assert_eq!(w.next_change(open), Some(utc("2026-03-29T02:00:00Z")));
    }

    #[test]
    fn no_windows_never_change() {
        let w = Windows::new(Tz::UTC, vec![]);
        assert_eq!(w.active_at(utc("2026-06-01T00:00:00Z")), None);
        assert_eq!(w.next_change(utc("2026-06-01T00:00:00Z")), None);
        assert_eq!(
            w.timeline(
                utc("2026-06-01T00:00:00Z"),
                std::time::Duration::from_secs(3600)
            )
            .len(),
            1
        );
    }

    fn soak_plan(default: bool) -> WindowPlan {
        let level = |name: &str, mode, level| WindowLevel {
            name: name.into(),
            mode,
            level,
            search: None,
        };
        WindowPlan::new(
            Windows::parse_tz("Europe/Berlin").unwrap(),
            vec![(
                "mon-fri 09:00-17:00".parse().unwrap(),
                level("mon-fri 09:00-17:00", Mode::Rate, 2000.0),
            )],
            default.then(|| level("default", Mode::Rate, 300.0)),
        )
        .unwrap()
    }

    #[test]
    fn plan_applies_the_window_level_then_the_default() {
        let p = soak_plan(true);
        // Monday 08:00 Berlin (06:00 UTC): default until 09:00 local.
        let s = p.at(utc("2026-06-01T06:00:00Z"));
        assert_eq!(s.index, Some(1));
        assert_eq!(s.until, Some(utc("2026-06-01T07:00:00Z")));
        assert_eq!(p.stages()[1].rate_at(std::time::Duration::ZERO), 300.0);
        // Monday 10:00: the window at 2000/s until 17:00 local.
        let s = p.at(utc("2026-06-01T08:00:00Z"));
        assert_eq!(
            (s.index, s.until),
            (Some(0), Some(utc("2026-06-01T15:00:00Z")))
        );
        assert_eq!(p.stages()[0].rate_at(std::time::Duration::ZERO), 2000.0);
        assert_eq!(p.stages()[0].name(), "mon-fri 09:00-17:00");
        // Friday 17:00: default over the weekend until Monday 09:00.
        let s = p.at(utc("2026-06-05T15:00:00Z"));
        assert_eq!(
            (s.index, s.until),
            (Some(1), Some(utc("2026-06-08T07:00:00Z")))
        );
        // Without a default the plan idles outside the window.
        assert_eq!(soak_plan(false).at(utc("2026-06-06T10:00:00Z")).index, None);
    }

    #[test]
    fn plan_snaps_to_a_change_less_than_a_second_ahead() {
        let p = soak_plan(true);
        // 08:59:59.5 local: the engine woke early; the window has begun.
        let s = p.at(utc("2026-06-01T06:59:59.500Z"));
        assert_eq!(
            (s.index, s.until),
            (Some(0), Some(utc("2026-06-01T15:00:00Z")))
        );
        let s = p.at(utc("2026-06-01T06:59:58Z"));
        assert_eq!(s.index, Some(1));
    }

    #[test]
    fn plan_timeline_and_bad_levels() {
        let p = soak_plan(true);
        let spans = p.timeline(
            utc("2026-06-01T00:00:00Z"),
            std::time::Duration::from_secs(86_400),
        );
        let rows: Vec<(u32, u32, Option<usize>)> = spans
            .iter()
            .map(|s| (s.from.hour(), s.to.hour(), s.window))
            .collect();
        assert_eq!(
            rows,
            vec![(0, 7, Some(1)), (7, 15, Some(0)), (15, 0, Some(1))]
        );
        let bad = WindowPlan::new(
            Tz::UTC,
            vec![(
                "09:00-10:00".parse().unwrap(),
                WindowLevel {
                    name: "w".into(),
                    mode: Mode::Concurrency,
                    level: 2.5,
                    search: None,
                },
            )],
            None,
        );
        assert_eq!(bad, Err((Some(0), StageError::FractionalConcurrency(2.5))));
    }
}
