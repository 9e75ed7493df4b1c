//! Storage: the only code that touches session files. Reading lives in [`reader`]; writing in
//! [`writer`] (appends with lock and fencing, torn-tail repair, fork, salvage), built on
//! [`lock`] (the advisory write lock) and [`publish`] (atomic creation of new files).

pub mod append;
pub mod lock;
pub mod publish;
pub mod reader;
pub mod writer;
