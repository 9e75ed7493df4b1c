//! Storage: the only code that touches session files. Reading lives in [`reader`];
//! writing (lock, fencing, atomic publish) builds on it.

pub mod append;
pub mod reader;
