//! JavaScript semantics that the Node-written session formats share (pi and Claude Code both
//! write their files with `JSON.stringify` and read them with `JSON.parse`): strings as UTF-16
//! code units with lone surrogates ([`jsstr`]), V8's `Array.prototype.sort` ([`v8sort`]),
//! `new Date(s).getTime()` ([`timestamp`]), and `JSON.stringify`, `String(x)` and truthiness of
//! JSON values ([`value`]). Pure: no I/O.

pub mod jsstr;
pub mod timestamp;
pub mod v8sort;
pub mod value;
