//! Cron expressions, evaluated in UTC.
//!
//! Five fields (`minute hour day-of-month month day-of-week`), or six with seconds first
//! (`second minute hour …`), each `*`, a number, a range `a-b`, a list `a,b`, or a step
//! `*/n` / `a-b/n`. Day of week is 0–7 (0 and 7 are Sunday). As in classic cron, when both
//! day fields are restricted a day matching either runs. Macros: `@yearly`, `@monthly`,
//! `@weekly`, `@daily`, `@hourly`.

use std::fmt;

use crate::time::civil;

/// A parsed cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    seconds: u64,
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    any_day: bool,
    any_weekday: bool,
}

/// Why an expression was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSchedule(String);

impl fmt::Display for BadSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn field(text: &str, name: &str, min: u64, max: u64) -> Result<(u64, bool), BadSchedule> {
    let bad = |why: &str| BadSchedule(format!("{name} field {text:?}: {why}"));
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => (range, step.parse::<u64>().map_err(|_| bad("the step is not a number"))?),
            None => (part, 1),
        };
        if step == 0 {
            return Err(bad("a step of 0"));
        }
        let (low, high) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            let a = a.parse::<u64>().map_err(|_| bad("not a number"))?;
            let b = b.parse::<u64>().map_err(|_| bad("not a number"))?;
            (a, b)
        } else {
            let a = range.parse::<u64>().map_err(|_| bad("not a number"))?;
            // `5/10` means from 5 to the end, every 10.
            (a, if part.contains('/') { max } else { a })
        };
        if low < min || high > max || low > high {
            return Err(bad(&format!("outside {min}-{max}")));
        }
        let mut v = low;
        while v <= high {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, text == "*"))
}

impl Schedule {
    /// Parses an expression.
    pub fn parse(text: &str) -> Result<Self, BadSchedule> {
        let text = text.trim();
        let expanded = match text {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let (second, rest) = match fields.len() {
            5 => ("0", &fields[..]),
            6 => (fields[0], &fields[1..]),
            n => {
                return Err(BadSchedule(format!(
                    "{n} fields; a schedule has 5 (minute hour day month weekday) or 6 (seconds first)"
                )));
            }
        };
        let (seconds, _) = field(second, "second", 0, 59)?;
        let (minutes, _) = field(rest[0], "minute", 0, 59)?;
        let (hours, _) = field(rest[1], "hour", 0, 23)?;
        let (days, any_day) = field(rest[2], "day-of-month", 1, 31)?;
        let (months, _) = field(rest[3], "month", 1, 12)?;
        let (mut weekdays, any_weekday) = field(rest[4], "day-of-week", 0, 7)?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1;
        }
        Ok(Self { seconds, minutes, hours, days, months, weekdays, any_day, any_weekday })
    }

    fn day_matches(&self, day: u32, month: u32, weekday: u32) -> bool {
        if self.months & (1 << month) == 0 {
            return false;
        }
        let by_day = self.days & (1 << day) != 0;
        let by_weekday = self.weekdays & (1 << weekday) != 0;
        match (self.any_day, self.any_weekday) {
            (true, true) => true,
            (true, false) => by_weekday,
            (false, true) => by_day,
            (false, false) => by_day || by_weekday,
        }
    }

    /// The first time strictly after `after_secs` (Unix seconds) the schedule fires, within
    /// the next five years; `None` for a schedule that never does (say, 31 February).
    pub fn next_after(&self, after_secs: i64) -> Option<i64> {
        let start = after_secs + 1;
        let first_day = start.div_euclid(86_400);
        for day in first_day..first_day + 5 * 366 {
            let (_, month, dom) = civil(day);
            let weekday = (day + 4).rem_euclid(7) as u32; // 1970-01-01 was a Thursday.
            if !self.day_matches(dom, month, weekday) {
                continue;
            }
            let from = if day == first_day { start.rem_euclid(86_400) } else { 0 };
            for hour in (from / 3600)..24 {
                if self.hours & (1 << hour) == 0 {
                    continue;
                }
                for minute in 0..60 {
                    if self.minutes & (1 << minute) == 0 {
                        continue;
                    }
                    for second in 0..60 {
                        let at = day * 86_400 + hour * 3600 + minute * 60 + second;
                        if at >= start && self.seconds & (1 << second) != 0 {
                            return Some(at);
                        }
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-22 (a Sunday) 10:15:30 UTC.
    const T: i64 = 1_795_342_530;

    #[test]
    fn common_schedules() {
        let next = |s: &str| Schedule::parse(s).unwrap().next_after(T).unwrap() - T;
        assert_eq!(next("* * * * *"), 30);
        assert_eq!(next("*/2 * * * * *"), 2);
        assert_eq!(next("0 11 * * *"), 45 * 60 - 30);
        assert_eq!(next("@hourly"), 45 * 60 - 30);
        assert_eq!(next("@daily"), 86_400 - (10 * 3600 + 15 * 60 + 30));
        assert_eq!(next("30 10 * * 1"), 86_400 + 15 * 60 - 30);
        // Today is a Sunday (0 or 7).
        assert_eq!(next("30 10 * * 7"), 15 * 60 - 30);
        assert_eq!(next("15,45 10 * * *"), 30 * 60 - 30);
        assert_eq!(next("0 0 1 12 *"), 9 * 86_400 - (10 * 3600 + 15 * 60 + 30));
    }

    #[test]
    fn either_day_field_matches_when_both_are_set() {
        // The 23rd (Monday) by weekday; the 1st would also do.
        let s = Schedule::parse("0 0 1 * 1").unwrap();
        assert_eq!(s.next_after(T).unwrap() - T, 86_400 - (10 * 3600 + 15 * 60 + 30));
    }

    #[test]
    fn bad_schedules_say_why() {
        for bad in ["", "* * * *", "61 * * * *", "*/0 * * * *", "a * * * *", "5-1 * * * *", "* * * * * * *"] {
            assert!(Schedule::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Schedule::parse("0 0 31 2 *").unwrap().next_after(T), None);
    }
}
