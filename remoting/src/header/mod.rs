//! Typed custom headers: Java's `CommandCustomHeader` classes, read from and written to a
//! command's [`ExtFields`].
//!
//! Each header names its fields as Java does; [`CommandHeader::schema`] lists them with their
//! Java types and whether Java requires them (`@CFNotNull`), and `tests/java_vectors.rs`
//! checks that list against the classes of rocketmq-client 4.9.7 and 5.5.0. A field only one
//! line has is optional here, and its doc says which line; 5.x adds, for instance, the
//! [`RpcFields`] every RPC header inherits (`ns`, `nsd`, `bname`, `oway`) and `lo` on topic
//! headers.
//!
//! Reading follows Java's `RemotingCommand.decodeCommandCustomHeader`: a required field that is
//! absent is [`HeaderError::MissingField`]; text is parsed as Java parses it (`Integer.parseInt`,
//! `Long.parseLong`, and `Boolean.parseBoolean`, which takes `true` in any case and anything
//! else as false). Where Java logs an unparsable number and leaves the field `null`, this crate
//! returns [`HeaderError::InvalidField`] naming it, required or not. Writing puts every present
//! field as Java's `toString()` would.
//!
//! Java adds fields to its headers from release to release, and so will these types: build
//! one with its `new` where it has one, or with `..Default::default()`.

mod admin;
mod client;
mod namesrv;
mod offset;
mod pull;
mod query;
mod send;

use std::fmt;

pub use admin::{
    GetBrokerConfigResponseHeader, GetConsumeStatsRequestHeader, GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader, QueryTopicConsumeByWhoRequestHeader, ViewBrokerStatsDataRequestHeader,
};
pub use client::{
    ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader, UnregisterClientRequestHeader,
};
pub use namesrv::{
    GetRouteInfoRequestHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader, body_crc32,
};
pub use offset::{
    GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader, GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader, GetMinOffsetRequestHeader, GetMinOffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader, SearchOffsetRequestHeader,
    SearchOffsetResponseHeader, UpdateConsumerOffsetRequestHeader,
};
pub use pull::{PullMessageRequestHeader, PullMessageResponseHeader};
pub use query::{QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader};
pub use send::{SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader};

use std::collections::BTreeMap;

use crate::error::HeaderError;

/// A command's `extFields`: the custom header as text, by Java field name.
///
/// Ordered, so an encoding is deterministic; Java keeps a `HashMap` and no peer depends on the
/// order.
pub type ExtFields = BTreeMap<String, String>;

/// A typed custom header: Java's `CommandCustomHeader`.
pub trait CommandHeader: Sized {
    /// Reads the header from `fields`, checking the fields Java requires.
    fn from_ext_fields(fields: &ExtFields) -> Result<Self, HeaderError>;

    /// Writes every present field into `fields`, over any of the same name.
    fn write_ext_fields(&self, fields: &mut ExtFields);

    /// The fields this header reads and writes.
    fn schema() -> Vec<FieldSpec>;
}

/// One field of a header: its Java name and type, and whether Java requires it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldSpec {
    /// The field's Java name: its extFields key.
    pub name: &'static str,
    /// Its Java type: `String`, `Integer`, `Long`, `Boolean` or an enum's name (Java declares
    /// some as primitives, `int`, `long`, `boolean`, which read and write the same).
    pub java_type: &'static str,
    /// Whether Java requires it (`@CFNotNull`).
    pub required: bool,
}

/// A value of a header field: parsed from and written as extFields text.
pub trait FieldValue: Sized {
    /// The Java type's name, for [`FieldSpec::java_type`] and errors.
    const JAVA_TYPE: &'static str;

    /// Parses `text` as Java does; `field` names the field in the error.
    fn parse(field: &'static str, text: &str) -> Result<Self, HeaderError>;

    /// The text Java's `toString()` gives.
    fn to_text(&self) -> String;
}

fn invalid(field: &'static str, expected: &'static str, text: &str) -> HeaderError {
    HeaderError::InvalidField { field, expected, value: text.to_owned() }
}

impl FieldValue for String {
    const JAVA_TYPE: &'static str = "String";
    fn parse(_field: &'static str, text: &str) -> Result<Self, HeaderError> {
        Ok(text.to_owned())
    }
    fn to_text(&self) -> String {
        self.clone()
    }
}

impl FieldValue for i32 {
    const JAVA_TYPE: &'static str = "Integer";
    fn parse(field: &'static str, text: &str) -> Result<Self, HeaderError> {
        text.parse().map_err(|_| invalid(field, Self::JAVA_TYPE, text))
    }
    fn to_text(&self) -> String {
        self.to_string()
    }
}

impl FieldValue for i64 {
    const JAVA_TYPE: &'static str = "Long";
    fn parse(field: &'static str, text: &str) -> Result<Self, HeaderError> {
        text.parse().map_err(|_| invalid(field, Self::JAVA_TYPE, text))
    }
    fn to_text(&self) -> String {
        self.to_string()
    }
}

impl FieldValue for bool {
    const JAVA_TYPE: &'static str = "Boolean";
    /// `Boolean.parseBoolean`: `true` in any case; anything else is false, never an error.
    fn parse(_field: &'static str, text: &str) -> Result<Self, HeaderError> {
        Ok(text.eq_ignore_ascii_case("true"))
    }
    fn to_text(&self) -> String {
        self.to_string()
    }
}

/// Which offset a timestamp search returns when several messages match (5.x
/// `SearchOffsetRequestHeader.boundaryType`; 4.9.x always searches the lower one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BoundaryType {
    /// The first matching offset (Java's default).
    #[default]
    Lower,
    /// The last matching offset.
    Upper,
}

impl FieldValue for BoundaryType {
    const JAVA_TYPE: &'static str = "BoundaryType";
    /// `BoundaryType.getType`: `upper` in any case is [`Upper`](Self::Upper), anything else
    /// [`Lower`](Self::Lower).
    fn parse(_field: &'static str, text: &str) -> Result<Self, HeaderError> {
        Ok(if text.eq_ignore_ascii_case("upper") { Self::Upper } else { Self::Lower })
    }
    /// The enum's name, as Java's `toString()` writes it.
    fn to_text(&self) -> String {
        match self {
            Self::Lower => "LOWER",
            Self::Upper => "UPPER",
        }
        .to_owned()
    }
}

/// A group of fields several headers share (Java's superclasses), read and written as part of
/// each.
pub trait HeaderFields: Sized {
    /// Reads the group from `fields`.
    fn read(fields: &ExtFields) -> Result<Self, HeaderError>;
    /// Writes the group's present fields.
    fn write(&self, fields: &mut ExtFields);
    /// The group's fields.
    fn schema(out: &mut Vec<FieldSpec>);
}

/// An optional field's type: `Option` of a [`FieldValue`].
pub(crate) trait OptionalField {
    /// The Java type's name.
    const JAVA_TYPE: &'static str;
}

impl<T: FieldValue> OptionalField for Option<T> {
    const JAVA_TYPE: &'static str = T::JAVA_TYPE;
}

/// Reads a required field.
pub(crate) fn required<T: FieldValue>(fields: &ExtFields, name: &'static str) -> Result<T, HeaderError> {
    match fields.get(name) {
        Some(text) => T::parse(name, text),
        None => Err(HeaderError::MissingField { field: name }),
    }
}

/// Reads an optional field.
pub(crate) fn optional<T: FieldValue>(
    fields: &ExtFields,
    name: &'static str,
) -> Result<Option<T>, HeaderError> {
    fields.get(name).map(|text| T::parse(name, text)).transpose()
}

/// Writes a header's fields (generated by `command_header!`).
macro_rules! command_header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $ty:ty => $kind:ident $($jname:literal)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::header::CommandHeader for $name {
            fn from_ext_fields(
                fields: &$crate::header::ExtFields,
            ) -> ::std::result::Result<Self, $crate::error::HeaderError> {
                Ok(Self { $( $field: command_header!(@read $kind, $ty, fields $(, $jname)?), )* })
            }

            fn write_ext_fields(&self, fields: &mut $crate::header::ExtFields) {
                $( command_header!(@write $kind, $ty, self.$field, fields $(, $jname)?); )*
            }

            #[allow(clippy::vec_init_then_push)]
            fn schema() -> ::std::vec::Vec<$crate::header::FieldSpec> {
                #[allow(unused_mut)]
                let mut out = ::std::vec::Vec::new();
                $( command_header!(@schema $kind, $ty, out $(, $jname)?); )*
                out
            }
        }
    };
    (@read required, $ty:ty, $fields:ident, $jname:literal) => {
        $crate::header::required::<$ty>($fields, $jname)?
    };
    (@read optional, $ty:ty, $fields:ident, $jname:literal) => {
        $crate::header::optional($fields, $jname)?
    };
    (@read defaulted, $ty:ty, $fields:ident, $jname:literal) => {
        $crate::header::optional::<$ty>($fields, $jname)?.unwrap_or_default()
    };
    (@read flatten, $ty:ty, $fields:ident) => {
        <$ty as $crate::header::HeaderFields>::read($fields)?
    };
    (@write required, $ty:ty, $value:expr, $fields:ident, $jname:literal) => {
        $fields.insert($jname.to_owned(), $crate::header::FieldValue::to_text(&$value))
    };
    (@write defaulted, $ty:ty, $value:expr, $fields:ident, $jname:literal) => {
        $fields.insert($jname.to_owned(), $crate::header::FieldValue::to_text(&$value))
    };
    (@write optional, $ty:ty, $value:expr, $fields:ident, $jname:literal) => {
        if let Some(v) = &$value {
            $fields.insert($jname.to_owned(), $crate::header::FieldValue::to_text(v));
        }
    };
    (@write flatten, $ty:ty, $value:expr, $fields:ident) => {
        $crate::header::HeaderFields::write(&$value, $fields)
    };
    (@schema required, $ty:ty, $out:ident, $jname:literal) => {
        $out.push($crate::header::FieldSpec {
            name: $jname,
            java_type: <$ty as $crate::header::FieldValue>::JAVA_TYPE,
            required: true,
        })
    };
    (@schema optional, $ty:ty, $out:ident, $jname:literal) => {
        $out.push($crate::header::FieldSpec {
            name: $jname,
            java_type: <$ty as $crate::header::OptionalField>::JAVA_TYPE,
            required: false,
        })
    };
    (@schema defaulted, $ty:ty, $out:ident, $jname:literal) => {
        $out.push($crate::header::FieldSpec {
            name: $jname,
            java_type: <$ty as $crate::header::FieldValue>::JAVA_TYPE,
            required: false,
        })
    };
    (@schema flatten, $ty:ty, $out:ident) => {
        <$ty as $crate::header::HeaderFields>::schema(&mut $out)
    };
}
pub(crate) use command_header;

/// The fields of Java 5.x's `RpcRequestHeader`, which most request headers extend (4.9.x's has
/// only `bname`, and fewer headers extend it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RpcFields {
    /// `ns`: the namespace (5.x).
    pub namespace: Option<String>,
    /// `nsd`: whether the resource names already carry the namespace (5.x).
    pub namespaced: Option<bool>,
    /// `bname`: the broker the request is for, when a proxy or a static topic routes it.
    pub broker_name: Option<String>,
    /// `oway`: whether the request is one-way (5.x).
    pub oneway: Option<bool>,
}

impl HeaderFields for RpcFields {
    fn read(fields: &ExtFields) -> Result<Self, HeaderError> {
        Ok(Self {
            namespace: optional(fields, "ns")?,
            namespaced: optional(fields, "nsd")?,
            broker_name: optional(fields, "bname")?,
            oneway: optional(fields, "oway")?,
        })
    }

    fn write(&self, fields: &mut ExtFields) {
        let mut put = |name: &str, text: Option<String>| {
            if let Some(text) = text {
                fields.insert(name.to_owned(), text);
            }
        };
        put("ns", self.namespace.clone());
        put("nsd", self.namespaced.map(|v| v.to_string()));
        put("bname", self.broker_name.clone());
        put("oway", self.oneway.map(|v| v.to_string()));
    }

    fn schema(out: &mut Vec<FieldSpec>) {
        for (name, java_type) in
            [("ns", "String"), ("nsd", "Boolean"), ("bname", "String"), ("oway", "Boolean")]
        {
            out.push(FieldSpec { name, java_type, required: false });
        }
    }
}

impl fmt::Display for FieldSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}{}", self.name, self.java_type, if self.required { " (required)" } else { "" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    command_header! {
        #[allow(unreachable_pub)]
        /// A header for the tests of the macro.
        pub struct Sample {
            /// Required text.
            pub topic: String => required "topic",
            /// Required number.
            pub queue_id: i32 => required "queueId",
            /// Optional long.
            pub offset: Option<i64> => optional "offset",
            /// Defaulted boolean.
            pub compressed: bool => defaulted "compressed",
            /// The RPC fields.
            pub rpc: RpcFields => flatten,
        }
    }

    fn fields(pairs: &[(&str, &str)]) -> ExtFields {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_header_round_trips_through_ext_fields() {
        let h = Sample {
            topic: "T".into(),
            queue_id: -3,
            offset: Some(i64::MAX),
            compressed: true,
            rpc: RpcFields { broker_name: Some("b".into()), oneway: Some(false), ..RpcFields::default() },
        };
        let mut ext = ExtFields::new();
        h.write_ext_fields(&mut ext);
        assert_eq!(
            ext,
            fields(&[
                ("topic", "T"),
                ("queueId", "-3"),
                ("offset", "9223372036854775807"),
                ("compressed", "true"),
                ("bname", "b"),
                ("oway", "false")
            ])
        );
        assert_eq!(Sample::from_ext_fields(&ext), Ok(h));
    }

    #[test]
    fn a_missing_required_field_is_named() {
        assert_eq!(
            Sample::from_ext_fields(&fields(&[("topic", "T")])),
            Err(HeaderError::MissingField { field: "queueId" })
        );
    }

    #[test]
    fn unparsable_numbers_are_named_required_or_not() {
        assert_eq!(
            Sample::from_ext_fields(&fields(&[("topic", "T"), ("queueId", "x")])),
            Err(HeaderError::InvalidField { field: "queueId", expected: "Integer", value: "x".into() })
        );
        assert_eq!(
            Sample::from_ext_fields(&fields(&[("topic", "T"), ("queueId", "2147483648")])),
            Err(HeaderError::InvalidField {
                field: "queueId",
                expected: "Integer",
                value: "2147483648".into()
            })
        );
        assert_eq!(
            Sample::from_ext_fields(&fields(&[("topic", "T"), ("queueId", "1"), ("offset", "1.0")])),
            Err(HeaderError::InvalidField { field: "offset", expected: "Long", value: "1.0".into() })
        );
    }

    #[test]
    fn numbers_parse_as_java_s_parse_int() {
        let h = Sample::from_ext_fields(&fields(&[("topic", "T"), ("queueId", "+7")])).unwrap();
        assert_eq!(h.queue_id, 7);
        for bad in [" 7", "7 ", "", "0x7", "٣"] {
            assert!(
                Sample::from_ext_fields(&fields(&[("topic", "T"), ("queueId", bad)])).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn booleans_parse_as_java_s_parse_boolean() {
        for (text, value) in
            [("true", true), ("TRUE", true), ("True", true), ("false", false), ("yes", false), ("1", false)]
        {
            let h =
                Sample::from_ext_fields(&fields(&[("topic", "T"), ("queueId", "1"), ("compressed", text)]))
                    .unwrap();
            assert_eq!(h.compressed, value, "{text}");
        }
        let h = Sample::from_ext_fields(&fields(&[("topic", "T"), ("queueId", "1")])).unwrap();
        assert!(!h.compressed, "a defaulted field takes its default");
    }

    #[test]
    fn the_schema_lists_java_names_types_and_requiredness() {
        let names: Vec<String> = Sample::schema().iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "topic: String (required)",
                "queueId: Integer (required)",
                "offset: Long",
                "compressed: Boolean",
                "ns: String",
                "nsd: Boolean",
                "bname: String",
                "oway: Boolean"
            ]
        );
    }

    #[test]
    fn boundary_types_parse_as_java_s_get_type() {
        assert_eq!(BoundaryType::parse("b", "upper"), Ok(BoundaryType::Upper));
        assert_eq!(BoundaryType::parse("b", "UPPER"), Ok(BoundaryType::Upper));
        assert_eq!(BoundaryType::parse("b", "LOWER"), Ok(BoundaryType::Lower));
        assert_eq!(BoundaryType::parse("b", "sideways"), Ok(BoundaryType::Lower));
        assert_eq!(BoundaryType::Upper.to_text(), "UPPER");
    }
}
