//! The broker's running counters, as `GET_BROKER_RUNTIME_INFO` (28) reports them (Java's
//! `StoreStatsService` and `BrokerStats`): messages and bytes put, pulls that found messages
//! or not and the messages they carried, and rates over the last 10 s, 60 s and 600 s.
//!
//! Sans-IO: every method takes the time from the caller (the host's clock). The glue samples
//! the counters once a second ([`BrokerStats::sample`]), as Java's store statistics thread
//! does; a rate is computed between the newest sample and the one its window back, and is
//! empty (`""`) until the broker has run that long, as Java's is. The day counters
//! (`msgPutTotalTodayMorning` and the like) are the totals at the last two midnights (UTC;
//! Java takes the broker's time zone), zero until the broker has seen a midnight.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Milliseconds in a day.
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The rate windows Java reports, in seconds (4.9.7 all three; 5.5.0 the first two for puts).
pub const WINDOWS: [i64; 3] = [10, 60, 600];

/// Samples kept: one a second for the longest window, and one more.
const SAMPLES: usize = 601;

/// The counters since boot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Messages stored by sends (a batch counts its messages).
    pub put_messages: u64,
    /// Puts (a batch counts once), stored or refused by the store.
    pub put_times: u64,
    /// Bytes the stored messages occupy in the commit log.
    pub put_bytes: u64,
    /// Puts the store refused.
    pub put_failed: u64,
    /// Pulls answered with messages.
    pub get_found: u64,
    /// Pulls answered without messages.
    pub get_miss: u64,
    /// Messages pulls carried.
    pub get_transferred: u64,
}

/// How often the per-topic and per-group counters are sampled (Java's `StatsItemSet` samples
/// every 10 s).
pub const KEYED_SAMPLE_MS: i64 = 10_000;

/// Samples a per-key rate is computed over: the newest and six before it, a minute (Java's
/// `csListMinute` keeps 7).
const KEYED_SAMPLES: usize = 7;

/// Java's `StatsItem` minute view of one key (`TOPIC_PUT_NUMS` of a topic, `GROUP_GET_NUMS` of
/// `topic@group`): the running count, and its samples every [`KEYED_SAMPLE_MS`].
#[derive(Debug, Default)]
struct KeyedItem {
    value: u64,
    /// `(ms, value)`, oldest first; the first sample of a key is preceded by `(t - 10 s, 0)`,
    /// as Java's is.
    samples: VecDeque<(i64, u64)>,
}

impl KeyedItem {
    /// Java's `getStatsDataInMinute().getTps()`: the count between the oldest and the newest
    /// sample, per second; 0 before the first sample.
    fn tps(&self) -> f64 {
        match (self.samples.front(), self.samples.back()) {
            (Some(&(t0, v0)), Some(&(t1, v1))) if t1 > t0 => {
                v1.saturating_sub(v0) as f64 * 1000.0 / (t1 - t0) as f64
            }
            _ => 0.0,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    now: Counters,
    /// Messages stored per topic (Java's `TOPIC_PUT_NUMS`).
    topic_puts: HashMap<String, KeyedItem>,
    /// Messages pulled per topic, then per group (Java's `GROUP_GET_NUMS`, keyed `topic@group`;
    /// nested here so that a pull looks its counter up without building the key).
    group_gets: HashMap<String, HashMap<String, KeyedItem>>,
    /// When the keyed counters were last sampled.
    keyed_sampled: Option<i64>,
    /// `(ms, counters)`, oldest first, at least a second apart.
    samples: VecDeque<(i64, Counters)>,
    /// The day (since the epoch) of the last midnight seen, and the totals then and a day before.
    day: Option<i64>,
    today_morning: Counters,
    yesterday_morning: Counters,
    put_time_max_ms: u64,
}

/// The broker's counters. Every method takes `&self`.
#[derive(Debug)]
pub struct BrokerStats {
    boot_ms: i64,
    inner: Mutex<Inner>,
}

impl BrokerStats {
    /// Counters of a broker that booted at `boot_ms` (ms since the epoch).
    pub fn new(boot_ms: i64) -> Self {
        let inner = Inner { day: Some(boot_ms.div_euclid(DAY_MS)), ..Inner::default() };
        Self { boot_ms, inner: Mutex::new(inner) }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// When the broker booted.
    pub fn boot_ms(&self) -> i64 {
        self.boot_ms
    }

    /// A put of `messages` messages to `topic` taking `bytes` in the log was stored, after
    /// `took_ms`.
    pub fn put_stored(&self, topic: &str, messages: u64, bytes: u64, took_ms: u64) {
        let mut i = self.inner();
        i.now.put_times += 1;
        i.now.put_messages += messages;
        i.now.put_bytes += bytes;
        i.put_time_max_ms = i.put_time_max_ms.max(took_ms);
        add_keyed(&mut i.topic_puts, topic, messages);
    }

    /// A pull of `group` from `topic` carried `messages` messages (Java's `incGroupGetNums`,
    /// counted for pulls answered `SUCCESS`).
    pub fn group_got(&self, group: &str, topic: &str, messages: u64) {
        let mut i = self.inner();
        match i.group_gets.get_mut(topic) {
            Some(groups) => add_keyed(groups, group, messages),
            None => {
                let mut groups = HashMap::new();
                add_keyed(&mut groups, group, messages);
                i.group_gets.insert(topic.to_string(), groups);
            }
        }
    }

    /// Messages stored to `topic` per second over the last minute of samples (Java's
    /// `tpsTopicPutNums`, `TopicStatsTable.topicPutTps`); 0 for a topic without any.
    pub fn topic_put_tps(&self, topic: &str) -> f64 {
        self.inner().topic_puts.get(topic).map_or(0.0, KeyedItem::tps)
    }

    /// Messages `group` pulled from `topic` per second over the last minute of samples (Java's
    /// `tpsGroupGetNums`, what `ConsumeStats.consumeTps` sums).
    pub fn group_get_tps(&self, group: &str, topic: &str) -> f64 {
        self.inner().group_gets.get(topic).and_then(|groups| groups.get(group)).map_or(0.0, KeyedItem::tps)
    }

    /// A put was refused by the store.
    pub fn put_failed(&self) {
        let mut i = self.inner();
        i.now.put_times += 1;
        i.now.put_failed += 1;
    }

    /// A pull was answered with `messages` messages (0: nothing found).
    pub fn pulled(&self, messages: u64) {
        let mut i = self.inner();
        if messages == 0 {
            i.now.get_miss += 1;
        } else {
            i.now.get_found += 1;
            i.now.get_transferred += messages;
        }
    }

    /// The counters now.
    pub fn counters(&self) -> Counters {
        self.inner().now
    }

    /// Records the counters at `now_ms` (ignored within a second of the last sample) and rolls
    /// the day counters over at midnight.
    pub fn sample(&self, now_ms: i64) {
        let mut i = self.inner();
        let day = now_ms.div_euclid(DAY_MS);
        if i.day.is_some_and(|d| day > d) {
            i.yesterday_morning = if i.day == Some(day - 1) { i.today_morning } else { i.now };
            i.today_morning = i.now;
            i.day = Some(day);
        }
        if i.keyed_sampled.is_none_or(|t| now_ms - t >= KEYED_SAMPLE_MS) {
            i.keyed_sampled = Some(now_ms);
            let Inner { topic_puts, group_gets, .. } = &mut *i;
            for item in topic_puts.values_mut().chain(group_gets.values_mut().flat_map(HashMap::values_mut)) {
                if item.samples.is_empty() {
                    item.samples.push_back((now_ms - KEYED_SAMPLE_MS, 0));
                }
                item.samples.push_back((now_ms, item.value));
                while item.samples.len() > KEYED_SAMPLES {
                    item.samples.pop_front();
                }
            }
        }
        if i.samples.back().is_some_and(|(t, _)| now_ms - t < 1000) {
            return;
        }
        let now = i.now;
        i.samples.push_back((now_ms, now));
        while i.samples.len() > SAMPLES {
            i.samples.pop_front();
        }
    }

    /// The rate of `field` over the last `window_s` seconds, per second; `None` until a
    /// sample that old exists.
    fn rate(i: &Inner, window_s: i64, field: fn(&Counters) -> u64) -> Option<f64> {
        let &(t1, last) = i.samples.back()?;
        let &(t0, first) = i.samples.iter().rev().find(|(t, _)| t1 - t >= window_s * 1000)?;
        let dt = (t1 - t0) as f64 / 1000.0;
        Some(field(&last).saturating_sub(field(&first)) as f64 / dt)
    }

    /// Java's TPS text: the rate of each of `windows`, each followed by a space, empty where the
    /// broker has not run that long.
    fn tps(i: &Inner, windows: &[i64], field: fn(&Counters) -> u64) -> String {
        let mut out = String::new();
        for (n, w) in windows.iter().enumerate() {
            if n > 0 {
                out.push(' ');
            }
            if let Some(r) = Self::rate(i, *w, field) {
                out.push_str(&java_double(r));
            }
        }
        out
    }

    /// The counters' part of the runtime table at `now_ms` (after sampling), with the key
    /// names of `v5` (5.x: `getTransferredTps`) or 4.9 (`getTransferedTps`).
    pub fn runtime_entries(&self, now_ms: i64, v5: bool) -> Vec<(String, String)> {
        self.sample(now_ms);
        let i = self.inner();
        let n = i.now;
        let times = n.put_times.max(1);
        let mut out: Vec<(String, String)> = vec![
            ("bootTimestamp".into(), self.boot_ms.to_string()),
            ("runtime".into(), runtime_text(now_ms - self.boot_ms)),
            ("putMessageTimesTotal".into(), times.to_string()),
            ("putMessageFailedTimes".into(), n.put_failed.to_string()),
            ("putMessageSizeTotal".into(), n.put_bytes.to_string()),
            ("putMessageAverageSize".into(), java_double(n.put_bytes as f64 / times as f64)),
            ("putMessageEntireTimeMax".into(), i.put_time_max_ms.to_string()),
            ("msgPutTotalTodayNow".into(), n.put_messages.to_string()),
            ("msgPutTotalTodayMorning".into(), i.today_morning.put_messages.to_string()),
            ("msgPutTotalYesterdayMorning".into(), i.yesterday_morning.put_messages.to_string()),
            ("msgGetTotalTodayNow".into(), n.get_transferred.to_string()),
            ("msgGetTotalTodayMorning".into(), i.today_morning.get_transferred.to_string()),
            ("msgGetTotalYesterdayMorning".into(), i.yesterday_morning.get_transferred.to_string()),
        ];
        let put_windows: &[i64] = if v5 { &WINDOWS[..2] } else { &WINDOWS };
        out.push(("putTps".into(), Self::tps(&i, put_windows, |c| c.put_messages)));
        out.push(("getFoundTps".into(), Self::tps(&i, &WINDOWS, |c| c.get_found)));
        out.push(("getMissTps".into(), Self::tps(&i, &WINDOWS, |c| c.get_miss)));
        out.push(("getTotalTps".into(), Self::tps(&i, &WINDOWS, |c| c.get_found + c.get_miss)));
        let transferred = if v5 { "getTransferredTps" } else { "getTransferedTps" };
        out.push((transferred.into(), Self::tps(&i, &WINDOWS, |c| c.get_transferred)));
        out
    }
}

fn add_keyed(items: &mut HashMap<String, KeyedItem>, key: &str, n: u64) {
    match items.get_mut(key) {
        Some(item) => item.value += n,
        None => {
            items.insert(key.to_string(), KeyedItem { value: n, samples: VecDeque::new() });
        }
    }
}

/// Java's `StoreStatsService.getFormatRuntime`: `[ D days, H hours, M minutes, S seconds ]`.
pub fn runtime_text(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    format!("[ {} days, {} hours, {} minutes, {} seconds ]", s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60)
}

/// `Double.toString` for the values the table holds: `0.0`, `2.5`, `0.3332`.
pub fn java_double(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    // Debug prints the shortest text that reads back, with `.0` on whole numbers, as Java does
    // between 1e-3 and 1e7 (the range rates and averages live in).
    format!("{v:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000;

    fn table(s: &BrokerStats, now: i64, v5: bool) -> std::collections::BTreeMap<String, String> {
        s.runtime_entries(now, v5).into_iter().collect()
    }

    #[test]
    fn rates_are_empty_until_the_broker_ran_a_window_then_count_per_second() {
        let s = BrokerStats::new(T0);
        s.sample(T0);
        let t = table(&s, T0 + 5_000, false);
        assert_eq!(t["putTps"], "  ", "no window has passed");
        for k in 0..=600 {
            s.sample(T0 + 5_000 + k * 1000);
            s.put_stored("T", 2, 200, 1);
        }
        let t = table(&s, T0 + 605_000, false);
        // Two messages a second over every window.
        assert_eq!(t["putTps"], "2.0 2.0 2.0");
        assert_eq!(t["msgPutTotalTodayNow"], (601 * 2).to_string());
        assert_eq!(t["putMessageTimesTotal"], "601");
        assert_eq!(t["putMessageAverageSize"], "200.0");
        assert_eq!(table(&s, T0 + 605_000, true)["putTps"], "2.0 2.0", "5.5.0 reports two windows");
    }

    #[test]
    fn pulls_count_found_missed_and_carried_messages_under_each_line_s_key() {
        let s = BrokerStats::new(T0);
        s.sample(T0);
        s.pulled(3);
        s.pulled(0);
        s.pulled(5);
        let t = table(&s, T0 + 10_000, true);
        assert_eq!(t["msgGetTotalTodayNow"], "8");
        assert_eq!(t["getTransferredTps"], "0.8  ");
        assert_eq!(t["getFoundTps"], "0.2  ");
        assert_eq!(t["getMissTps"], "0.1  ");
        assert!(table(&s, T0 + 10_000, false).contains_key("getTransferedTps"), "4.9.7's spelling");
    }

    #[test]
    fn topic_and_group_rates_are_java_s_minute_view_sampled_every_ten_seconds() {
        let s = BrokerStats::new(T0);
        s.sample(T0);
        s.put_stored("T", 30, 3000, 0);
        s.put_stored("U", 1, 100, 0);
        s.group_got("g", "T", 20);
        assert_eq!(s.topic_put_tps("T"), 0.0, "no sample yet");
        s.sample(T0 + 5_000);
        assert_eq!(s.topic_put_tps("T"), 0.0, "the next sample is 10 s after the last");
        // The first sample of a key counts from zero 10 s before it.
        s.sample(T0 + 10_000);
        assert_eq!((s.topic_put_tps("T"), s.topic_put_tps("U")), (3.0, 0.1));
        assert_eq!((s.group_get_tps("g", "T"), s.group_get_tps("g", "U")), (2.0, 0.0));
        assert_eq!(s.group_get_tps("other", "T"), 0.0);
        // Nothing more: the rate spreads over the samples kept, then falls to 0 once the
        // minute holds only samples after the last put.
        s.sample(T0 + 20_000);
        assert_eq!(s.topic_put_tps("T"), 1.5);
        for k in 3..=8 {
            s.sample(T0 + k * 10_000);
        }
        assert_eq!(s.topic_put_tps("T"), 0.0);
        s.put_stored("T", 60, 6000, 0);
        s.sample(T0 + 90_000);
        assert_eq!(s.topic_put_tps("T"), 1.0, "60 messages over the minute kept");
    }

    #[test]
    fn day_counters_roll_over_at_midnight() {
        let midnight = (T0 / DAY_MS + 1) * DAY_MS;
        let s = BrokerStats::new(midnight - 60_000);
        s.put_stored("T", 4, 10, 0);
        s.sample(midnight - 1_000);
        let t = table(&s, midnight - 500, false);
        assert_eq!((t["msgPutTotalTodayMorning"].as_str(), t["msgPutTotalTodayNow"].as_str()), ("0", "4"));
        s.sample(midnight + 1_000);
        s.put_stored("T", 1, 10, 0);
        s.sample(midnight + DAY_MS + 1_000);
        let t = table(&s, midnight + DAY_MS + 2_000, false);
        assert_eq!(t["msgPutTotalYesterdayMorning"], "4");
        assert_eq!(t["msgPutTotalTodayMorning"], "5");
        assert_eq!(t["runtime"], "[ 1 days, 0 hours, 1 minutes, 2 seconds ]");
    }
}
