//! Storage: the only code that touches session files. Reading lives in [`reader`],
//! reading what was appended to an open file in [`tail`], headers for listings in [`list`];
//! writing (lock, fencing, atomic publish) builds on it.

pub mod list;
pub mod reader;
pub mod tail;
