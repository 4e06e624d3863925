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
//!
//! Per topic and per `topic@group` it keeps Java's `BrokerStatsManager` items that logship has
//! the figures of ([`KeyedStat`]): each a running count and number of increments, sampled into
//! a minute, an hour and a day view as Java's `StatsItem` is, for `GET_TOPIC_STATS_INFO`'s
//! `topicPutTps`, `GET_CONSUME_STATS`'s `consumeTps` and `VIEW_BROKER_STATS_DATA` (315).

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

/// How often the per-topic and per-group counters are sampled for their minute view (Java's
/// `StatsItemSet` samples every 10 s).
pub const KEYED_SAMPLE_MS: i64 = 10_000;

/// One of Java's `StatsItem` views: how often it is sampled and how many samples it keeps.
#[derive(Clone, Copy, Debug)]
struct View {
    every_ms: i64,
    kept: usize,
}

/// `csListMinute`: every 10 s, 7 kept (a minute).
const MINUTE: View = View { every_ms: KEYED_SAMPLE_MS, kept: 7 };
/// `csListHour`: every 10 min, 7 kept (an hour).
const HOUR: View = View { every_ms: 10 * 60_000, kept: 7 };
/// `csListDay`: every hour, 25 kept (a day).
const DAY: View = View { every_ms: 60 * 60_000, kept: 25 };
/// The views, in the order of [`KeyedItem::views`].
const VIEWS: [View; 3] = [MINUTE, HOUR, DAY];

/// One sample of a keyed counter: `(ms, times, value)`.
type Snap = (i64, u64, u64);

/// One of Java's `StatsSnapshot`s: what a keyed counter did over one view's samples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct StatsSnapshot {
    /// The count between the oldest and the newest sample.
    pub sum: u64,
    /// [`sum`](Self::sum) per second between them.
    pub tps: f64,
    /// [`sum`](Self::sum) per increment between them (messages per put, say); 0 without one.
    pub avgpt: f64,
}

/// The three views of one keyed counter, as `VIEW_BROKER_STATS_DATA` (315) reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct StatsViews {
    /// Over the last minute (samples every 10 s).
    pub minute: StatsSnapshot,
    /// Over the last hour (samples every 10 minutes).
    pub hour: StatsSnapshot,
    /// Over the last day (samples every hour).
    pub day: StatsSnapshot,
}

/// The keyed statistics Java's `BrokerStatsManager` keeps that logship keeps too, by their
/// Java names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyedStat {
    /// `TOPIC_PUT_NUMS`, keyed by topic: messages stored, per put.
    TopicPutNums,
    /// `TOPIC_PUT_SIZE`, keyed by topic: bytes stored, per put.
    TopicPutSize,
    /// `GROUP_GET_NUMS`, keyed `topic@group`: messages pulled, per pull.
    GroupGetNums,
    /// `GROUP_GET_SIZE`, keyed `topic@group`: bytes pulled, per pull.
    GroupGetSize,
}

impl KeyedStat {
    /// The statistic of Java name `name`, if logship keeps it.
    pub fn from_java_name(name: &str) -> Option<Self> {
        Some(match name {
            "TOPIC_PUT_NUMS" => Self::TopicPutNums,
            "TOPIC_PUT_SIZE" => Self::TopicPutSize,
            "GROUP_GET_NUMS" => Self::GroupGetNums,
            "GROUP_GET_SIZE" => Self::GroupGetSize,
            _ => return None,
        })
    }
}

/// Java's `StatsItem` of one key: the running value and increments, and each view's samples.
#[derive(Debug, Default)]
struct StatItem {
    value: u64,
    times: u64,
    /// Per view (minute, hour, day), oldest first; the first sample of a view is preceded by
    /// `(t - period, 0, 0)`, as Java's is.
    views: [VecDeque<Snap>; 3],
}

impl StatItem {
    fn add(&mut self, value: u64) {
        self.value += value;
        self.times += 1;
    }

    fn sample(&mut self, view: usize, now_ms: i64) {
        let View { every_ms, kept } = VIEWS[view];
        let samples = &mut self.views[view];
        if samples.is_empty() {
            samples.push_back((now_ms - every_ms, 0, 0));
        }
        samples.push_back((now_ms, self.times, self.value));
        while samples.len() > kept {
            samples.pop_front();
        }
    }

    /// Java's `computeStatsData` over one view: zeros before its first sample.
    fn snapshot(&self, view: usize) -> StatsSnapshot {
        let samples = &self.views[view];
        match (samples.front(), samples.back()) {
            (Some(&(t0, n0, v0)), Some(&(t1, n1, v1))) if t1 > t0 => {
                let sum = v1.saturating_sub(v0);
                let times = n1.saturating_sub(n0);
                StatsSnapshot {
                    sum,
                    tps: sum as f64 * 1000.0 / (t1 - t0) as f64,
                    avgpt: if times > 0 { sum as f64 / times as f64 } else { 0.0 },
                }
            }
            _ => StatsSnapshot::default(),
        }
    }

    fn views(&self) -> StatsViews {
        StatsViews { minute: self.snapshot(0), hour: self.snapshot(1), day: self.snapshot(2) }
    }
}

/// The counters of one key: messages (`*_NUMS`) and bytes (`*_SIZE`), counted together.
#[derive(Debug, Default)]
struct KeyedItem {
    nums: StatItem,
    size: StatItem,
}

impl KeyedItem {
    fn add(&mut self, messages: u64, bytes: u64) {
        self.nums.add(messages);
        self.size.add(bytes);
    }

    fn sample(&mut self, view: usize, now_ms: i64) {
        self.nums.sample(view, now_ms);
        self.size.sample(view, now_ms);
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
    /// When the keyed counters' views (minute, hour, day) were last sampled.
    keyed_sampled: [Option<i64>; 3],
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
    /// `took_ms` (Java's `incTopicPutNums` and `incTopicPutSize`).
    pub fn put_stored(&self, topic: &str, messages: u64, bytes: u64, took_ms: u64) {
        let mut i = self.inner();
        i.now.put_times += 1;
        i.now.put_messages += messages;
        i.now.put_bytes += bytes;
        i.put_time_max_ms = i.put_time_max_ms.max(took_ms);
        add_keyed(&mut i.topic_puts, topic, messages, bytes);
    }

    /// A pull of `group` from `topic` carried `messages` messages of `bytes` bytes (Java's
    /// `incGroupGetNums` and `incGroupGetSize`, counted for pulls answered `SUCCESS`).
    pub fn group_got(&self, group: &str, topic: &str, messages: u64, bytes: u64) {
        let mut i = self.inner();
        match i.group_gets.get_mut(topic) {
            Some(groups) => add_keyed(groups, group, messages, bytes),
            None => {
                let mut groups = HashMap::new();
                add_keyed(&mut groups, group, messages, bytes);
                i.group_gets.insert(topic.to_string(), groups);
            }
        }
    }

    /// Messages stored to `topic` per second over the last minute of samples (Java's
    /// `tpsTopicPutNums`, `TopicStatsTable.topicPutTps`); 0 for a topic without any.
    pub fn topic_put_tps(&self, topic: &str) -> f64 {
        self.inner().topic_puts.get(topic).map_or(0.0, |item| item.nums.snapshot(0).tps)
    }

    /// Messages `group` pulled from `topic` per second over the last minute of samples (Java's
    /// `tpsGroupGetNums`, what `ConsumeStats.consumeTps` sums).
    pub fn group_get_tps(&self, group: &str, topic: &str) -> f64 {
        self.inner()
            .group_gets
            .get(topic)
            .and_then(|groups| groups.get(group))
            .map_or(0.0, |item| item.nums.snapshot(0).tps)
    }

    /// The minute, hour and day views of `stat` for `key` (a topic, or `topic@group` for the
    /// group statistics), as Java's `BrokerStatsManager.getStatsItem` finds them: `None` for a
    /// key never counted.
    pub fn keyed_views(&self, stat: KeyedStat, key: &str) -> Option<StatsViews> {
        let i = self.inner();
        let item = match stat {
            KeyedStat::TopicPutNums | KeyedStat::TopicPutSize => i.topic_puts.get(key),
            KeyedStat::GroupGetNums | KeyedStat::GroupGetSize => {
                // Neither topic nor group names may hold `@` (Java's name check).
                let (topic, group) = key.split_once('@')?;
                i.group_gets.get(topic).and_then(|groups| groups.get(group))
            }
        }?;
        Some(match stat {
            KeyedStat::TopicPutNums | KeyedStat::GroupGetNums => item.nums.views(),
            KeyedStat::TopicPutSize | KeyedStat::GroupGetSize => item.size.views(),
        })
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
        // Each view from the first sample on, at its own period (Java's `StatsItemSet`
        // schedules from the broker's start); keys counted since are sampled from the next.
        for (view, View { every_ms, .. }) in VIEWS.iter().enumerate() {
            if i.keyed_sampled[view].is_some_and(|t| now_ms - t < *every_ms) {
                continue;
            }
            i.keyed_sampled[view] = Some(now_ms);
            let Inner { topic_puts, group_gets, .. } = &mut *i;
            for item in topic_puts.values_mut().chain(group_gets.values_mut().flat_map(HashMap::values_mut)) {
                item.sample(view, now_ms);
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

fn add_keyed(items: &mut HashMap<String, KeyedItem>, key: &str, messages: u64, bytes: u64) {
    match items.get_mut(key) {
        Some(item) => item.add(messages, bytes),
        None => {
            let mut item = KeyedItem::default();
            item.add(messages, bytes);
            items.insert(key.to_string(), item);
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
        s.group_got("g", "T", 20, 2000);
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
    fn keyed_views_are_java_s_minute_hour_and_day_samples() {
        // Sampled once at boot, as the glue samples.
        let stats = BrokerStats::new(T0);
        stats.sample(T0);
        let view = |k: &str| stats.keyed_views(KeyedStat::TopicPutNums, k);
        stats.put_stored("T", 3, 300, 0);
        assert_eq!(view("T").unwrap(), StatsViews::default(), "counted, not sampled");
        assert_eq!(view("U"), None, "a key never counted does not exist");
        // One put of three a minute for two hours, sampled every second.
        for sec in 1..=7200 {
            if sec % 60 == 0 {
                stats.put_stored("T", 3, 300, 0);
            }
            stats.sample(T0 + sec * 1000);
        }
        let v = view("T").unwrap();
        // The minute: the samples at 7140..7200 s, one put among them.
        assert_eq!(v.minute, StatsSnapshot { sum: 3, tps: 0.05, avgpt: 3.0 });
        // The hour: samples every 10 minutes, the oldest at 3600 s: 60 puts.
        assert_eq!((v.hour.sum, v.hour.avgpt), (180, 3.0));
        assert!((v.hour.tps - 0.05).abs() < 1e-9, "{:?}", v.hour);
        // The day: hourly samples, the first preceded by a zero an hour before it (at 0 s, when
        // the key did not exist yet): everything since.
        assert_eq!((v.day.sum, v.day.avgpt), (363, 3.0));
        let bytes = stats.keyed_views(KeyedStat::TopicPutSize, "T").unwrap();
        assert_eq!(bytes.day.sum, 36_300);
        assert_eq!(KeyedStat::from_java_name("GROUP_GET_NUMS"), Some(KeyedStat::GroupGetNums));
        assert_eq!(KeyedStat::from_java_name("SNDBCK_PUT_NUMS"), None);
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
