use super::*;
use proptest::prelude::*;

const MINUTE: u64 = 60_000;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

/// 2024-01-01T00:00:00Z, a Monday.
const MONDAY: u64 = 1_704_067_200_000;

fn schedule(expr: &str, timezone: Option<&str>) -> Schedule {
    Schedule::parse(expr, timezone).expect("a valid schedule")
}

#[test]
fn weekday_mornings_skip_the_weekend() {
    let weekdays = schedule("0 9 * * MON-FRI", None);
    assert_eq!(weekdays.timezone(), "UTC");
    assert_eq!(weekdays.next_after(MONDAY), Some(MONDAY + 9 * HOUR));
    // Friday 09:00 to the next Monday 09:00.
    let friday_nine = MONDAY + 4 * DAY + 9 * HOUR;
    assert_eq!(
        weekdays.next_after(friday_nine),
        Some(MONDAY + 7 * DAY + 9 * HOUR)
    );
    // Strictly after: a slot is not its own successor, a millisecond before it is.
    assert_eq!(weekdays.next_after(friday_nine - 1), Some(friday_nine));
}

#[test]
fn timezone_shifts_the_slot() {
    // Paris is UTC+1 in January: 09:00 there is 08:00 UTC.
    let paris = schedule("0 9 * * *", Some("Europe/Paris"));
    assert_eq!(paris.next_after(MONDAY), Some(MONDAY + 8 * HOUR));
    // And UTC+2 in July (2024-07-01 is 182 days later).
    let july = MONDAY + 182 * DAY;
    assert_eq!(paris.next_after(july), Some(july + 7 * HOUR));
}

#[test]
fn parse_errors_name_the_bad_part() {
    let bad = Schedule::parse("61 * * * *", None).expect_err("minute 61");
    assert!(matches!(bad, ScheduleError::Expression { ref expr, .. } if expr == "61 * * * *"));
    assert!(
        Schedule::parse("0 0 9 * * *", None).is_err(),
        "six fields (seconds) are refused"
    );
    assert_eq!(
        Schedule::parse("0 9 * * *", Some("Mars/Olympus")).expect_err("no such zone"),
        ScheduleError::UnknownTimezone("Mars/Olympus".into())
    );
    assert!(matches!(
        Schedule::parse(&"1,".repeat(200), None),
        Err(ScheduleError::TooLong { .. })
    ));
}

#[test]
fn a_long_downtime_fires_once_for_the_latest_slot() {
    let hourly = schedule("0 * * * *", None);
    let last = MONDAY;
    let now = MONDAY + 400 * DAY + 30 * MINUTE;
    let due = hourly.due_on_start(Some(last), 0, now);
    assert_eq!(
        due,
        Some(MONDAY + 400 * DAY),
        "the latest slot, not the first missed one"
    );
}

#[test]
fn a_fired_slot_never_fires_again() {
    let hourly = schedule("0 * * * *", None);
    let now = MONDAY + 5 * HOUR + MINUTE;
    let slot = hourly
        .due_on_start(None, MONDAY, now)
        .expect("a slot is due");
    assert_eq!(slot, MONDAY + 5 * HOUR);
    let mut state = ScheduleState::default();
    state.fired(slot);
    assert_eq!(hourly.due_on_start(state.last_fired_ms, MONDAY, now), None);
    state.fired(slot - HOUR);
    assert_eq!(
        state.last_fired_ms,
        Some(slot),
        "an older slot never moves it back"
    );
    assert_eq!(
        hourly.due_on_start(state.last_fired_ms, MONDAY, slot + HOUR),
        Some(slot + HOUR)
    );
}

#[test]
fn nothing_before_since_fires() {
    let daily = schedule("0 9 * * *", None);
    let since = MONDAY + 10 * HOUR;
    assert_eq!(daily.due_on_start(None, since, MONDAY + 12 * HOUR), None);
    assert_eq!(
        daily.due_on_start(None, MONDAY, MONDAY + 12 * HOUR),
        Some(MONDAY + 9 * HOUR)
    );
    // Exactly at a slot counts as due.
    assert_eq!(
        daily.due_on_start(None, MONDAY, MONDAY + 9 * HOUR),
        Some(MONDAY + 9 * HOUR)
    );
}

#[test]
fn a_rare_schedule_is_found_years_back() {
    let leap_day = schedule("0 0 29 2 *", None);
    // 2024-02-29 is day 59 of 2024; ask in 2027.
    let slot = MONDAY + 59 * DAY;
    assert_eq!(
        leap_day.due_on_start(None, 0, MONDAY + 3 * 365 * DAY),
        Some(slot)
    );
}

#[test]
fn an_impossible_date_is_never_due() {
    let never = schedule("0 0 31 2 *", None);
    assert_eq!(never.next_after(MONDAY), None);
    assert_eq!(never.due_on_start(None, 0, MONDAY), None);
}

#[test]
fn state_round_trips_through_bincode() {
    let config = bincode::config::standard();
    for state in [
        ScheduleState::default(),
        ScheduleState {
            last_fired_ms: Some(MONDAY),
        },
    ] {
        let bytes = bincode::serde::encode_to_vec(state, config).expect("encodes");
        let (back, _): (ScheduleState, usize) =
            bincode::serde::decode_from_slice(&bytes, config).expect("decodes");
        assert_eq!(back, state);
    }
}

const EXPRS: [&str; 6] = [
    "0 9 * * MON-FRI",
    "*/15 * * * *",
    "30 2 * * *",
    "0 0 1 * *",
    "5 4 * * SUN",
    "0 0 29 2 *",
];
const ZONES: [&str; 4] = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The due slot is in bounds, is a real slot, and is the latest one.
    #[test]
    fn due_slot_is_real_latest_and_in_bounds(
        expr in proptest::sample::select(&EXPRS[..]),
        zone in proptest::sample::select(&ZONES[..]),
        since in MONDAY..MONDAY + 800 * DAY,
        last_offset in proptest::option::of(0..30 * DAY),
        downtime in 0..500 * DAY,
    ) {
        let schedule = schedule(expr, Some(zone));
        let last = last_offset.map(|offset| since + offset);
        let now = since + downtime;
        if let Some(slot) = schedule.due_on_start(last, since, now) {
            prop_assert!(slot > since && last.is_none_or(|last| slot > last) && slot <= now);
            prop_assert_eq!(schedule.next_after(slot - 1), Some(slot), "not a real slot");
            prop_assert!(schedule.next_after(slot).is_none_or(|next| next > now), "not the latest");
        } else if let Some(next) = schedule.next_after(last.unwrap_or(0).max(since)) {
            prop_assert!(next > now, "slot {next} was due by {now} but not returned");
        }
    }
}

#[test]
fn a_slot_in_a_skipped_hour_fires_once_after_the_gap() {
    // Berlin skips 02:00-03:00 local on 2024-03-31 (01:00 UTC), day 90.
    let night = schedule("30 2 * * *", Some("Europe/Berlin"));
    let gap_day = MONDAY + 90 * DAY;
    let since = gap_day - 12 * HOUR;
    let slot = night.next_after(since).expect("a slot");
    assert_eq!(slot, gap_day + HOUR, "03:00 local, just after the gap");
    assert_eq!(
        night.due_on_start(None, since, gap_day + HOUR + 10 * MINUTE),
        Some(slot)
    );
    assert_eq!(
        night.due_on_start(Some(slot), since, gap_day + 5 * HOUR),
        None
    );
}
