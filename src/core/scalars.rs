//! The `visit_*` methods of a hand-written serde visitor for JSON's scalars (`true`/`false`,
//! numbers, strings, `null`), for the visitors that take every scalar alike: the probes that
//! read only objects or lists and let any other value through.

/// The scalar methods of a [`serde::de::Visitor`] whose `Value` is `$out`:
/// * `visit_scalars!($out, _ => expr)`: each scalar gives `Ok(expr)`, its value skipped;
/// * `visit_scalars!($out, value => f)`: each gives `Ok(f(v))`, `v` the scalar as a
///   `serde_json::Value` (`null` as `Value::Null`).
///
/// Both `visit_unit` (`null` read by `deserialize_any`) and `visit_none` are given.
macro_rules! visit_scalars {
    ($out:ty, _ => $e:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<$out, E> {
            Ok($e)
        }
        fn visit_i64<E>(self, _: i64) -> Result<$out, E> {
            Ok($e)
        }
        fn visit_u64<E>(self, _: u64) -> Result<$out, E> {
            Ok($e)
        }
        fn visit_f64<E>(self, _: f64) -> Result<$out, E> {
            Ok($e)
        }
        fn visit_str<E>(self, _: &str) -> Result<$out, E> {
            Ok($e)
        }
        fn visit_unit<E>(self) -> Result<$out, E> {
            Ok($e)
        }
        fn visit_none<E>(self) -> Result<$out, E> {
            Ok($e)
        }
    };
    ($out:ty, value => $f:expr) => {
        fn visit_bool<E>(self, v: bool) -> Result<$out, E> {
            Ok($f(serde_json::Value::from(v)))
        }
        fn visit_i64<E>(self, v: i64) -> Result<$out, E> {
            Ok($f(serde_json::Value::from(v)))
        }
        fn visit_u64<E>(self, v: u64) -> Result<$out, E> {
            Ok($f(serde_json::Value::from(v)))
        }
        fn visit_f64<E>(self, v: f64) -> Result<$out, E> {
            Ok($f(serde_json::Value::from(v)))
        }
        fn visit_str<E>(self, v: &str) -> Result<$out, E> {
            Ok($f(serde_json::Value::from(v)))
        }
        fn visit_string<E>(self, v: String) -> Result<$out, E> {
            Ok($f(serde_json::Value::from(v)))
        }
        fn visit_unit<E>(self) -> Result<$out, E> {
            Ok($f(serde_json::Value::Null))
        }
        fn visit_none<E>(self) -> Result<$out, E> {
            Ok($f(serde_json::Value::Null))
        }
    };
}
pub(crate) use visit_scalars;
