//! `BrokerStatsData`: the answer to `VIEW_BROKER_STATS_DATA` (315).

use serde::{Deserialize, Serialize};

use super::JsonBody;

/// `BrokerStatsItem`: one view of a broker statistic (Java's `StatsSnapshot` without its
/// `times`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct BrokerStatsItem {
    /// `avgpt`: the count per increment over the view (messages per put, say).
    #[serde(default)]
    pub avgpt: f64,
    /// `sum`: the count over the view.
    #[serde(default, deserialize_with = "super::lenient::number")]
    pub sum: u64,
    /// `tps`: the count per second over the view.
    #[serde(default)]
    pub tps: f64,
}

impl BrokerStatsItem {
    /// An item of `sum`, `tps` and `avgpt`.
    pub fn new(sum: u64, tps: f64, avgpt: f64) -> Self {
        Self { avgpt, sum, tps }
    }
}

/// `BrokerStatsData`: a statistic over the last minute, hour and day. Fields in fastjson's
/// (alphabetical) order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct BrokerStatsData {
    /// `statsDay`: over the last day.
    #[serde(default)]
    pub stats_day: BrokerStatsItem,
    /// `statsHour`: over the last hour.
    #[serde(default)]
    pub stats_hour: BrokerStatsItem,
    /// `statsMinute`: over the last minute.
    #[serde(default)]
    pub stats_minute: BrokerStatsItem,
}

impl BrokerStatsData {
    /// The views of one statistic.
    pub fn new(
        stats_minute: BrokerStatsItem,
        stats_hour: BrokerStatsItem,
        stats_day: BrokerStatsItem,
    ) -> Self {
        Self { stats_day, stats_hour, stats_minute }
    }
}

impl JsonBody for BrokerStatsData {
    const JAVA_CLASS: &'static str = "BrokerStatsData";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_stats_data_is_written_with_java_s_field_names_in_fastjson_s_order() {
        let d = BrokerStatsData::new(
            BrokerStatsItem::new(41, 0.6833333333333333, 1.0),
            BrokerStatsItem::new(0, 0.0, 0.0),
            BrokerStatsItem::new(7, 0.5, 3.5),
        );
        let text = String::from_utf8(d.encode()).unwrap();
        assert_eq!(
            text,
            "{\"statsDay\":{\"avgpt\":3.5,\"sum\":7,\"tps\":0.5},\
             \"statsHour\":{\"avgpt\":0.0,\"sum\":0,\"tps\":0.0},\
             \"statsMinute\":{\"avgpt\":1.0,\"sum\":41,\"tps\":0.6833333333333333}}"
        );
        assert_eq!(BrokerStatsData::decode(text.as_bytes()).unwrap(), d);
    }

    #[test]
    fn broker_stats_data_reads_what_fastjson_writes() {
        // fastjson leaves zeros in and quotes nothing; a browser-compatible writer quotes longs.
        let java = br#"{"statsDay":{"avgpt":0.0,"sum":0,"tps":0.0},"statsHour":{"avgpt":2.0,"sum":"12","tps":0.02},"statsMinute":{"avgpt":2.0,"sum":12,"tps":0.2}}"#;
        let d = BrokerStatsData::decode(java).unwrap();
        assert_eq!(d.stats_minute, BrokerStatsItem::new(12, 0.2, 2.0));
        assert_eq!(d.stats_hour.sum, 12);
        assert_eq!(d.stats_day, BrokerStatsItem::default());
    }
}
