//! Carrying JSON that `serde_json::Value` cannot hold through the Value-based responses of
//! tower-lsp-server, unchanged: the daemon's side of [`crate::js::jsstr`].
//!
//! pi writes lone UTF-16 surrogate escapes (`"\ud83d"`) when it cuts text inside an emoji, and
//! JavaScript clients read them back as they were. [`parse`] reads JSON text as `JSON.parse`
//! does, holding each lone surrogate as the two-character pair of [`jsstr::MARK`]; the transport
//! writes every frame through [`restore`], which turns each pair back into its `\udXXX` escape.
//! Strings decoded anywhere else in sessiond (names, labels, previews, timestamps) use the same
//! pairs, so they reach the client as pi holds them too. Numbers round-trip exactly (serde_json's
//! `float_roundtrip`).

use serde::de::Error as _;
use serde_json::Value;

use crate::js::jsstr;

/// Parses JSON text into a `Value` as `JSON.parse` does ([`jsstr::parse_value`]).
/// Errors: text that is not JSON, as a serde_json error so it composes with serialization
/// errors. A part nested deeper than [`jsstr::VALUE_DEPTH`] is held as its text.
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    jsstr::parse_value(bytes).map_err(serde_json::Error::custom)
}

/// A serialized frame body with every lone surrogate pair written back as its `\udXXX` escape.
pub fn restore(body: Vec<u8>) -> Vec<u8> {
    jsstr::restore_bytes(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_survive_a_round_trip() {
        let line = br#"{"a":"x\ud83d","b":"\ude80 pair \ud83d\ude80 escaped \\ud83d","n":0.000021000000000000002}"#;
        let value = parse(line).unwrap();
        let body = restore(serde_json::to_vec(&value).unwrap());
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "{\"a\":\"x\\ud83d\",\"b\":\"\\ude80 pair 🚀 escaped \\\\ud83d\",\"n\":0.000021000000000000002}"
        );
    }

    #[test]
    fn plain_json_is_untouched() {
        let body = br#"{"a":"caf\u00e9"}"#.to_vec();
        assert_eq!(restore(body.clone()), body);
        assert!(parse(b"{").is_err());
    }
}
