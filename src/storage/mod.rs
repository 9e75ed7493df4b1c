//! Storage: the only code that touches session files. Reading lives in [`reader`], reading
//! what was appended to an open file in [`tail`], headers for listings in [`list`]; writing in
//! [`writer`] (appends with lock and fencing, torn-tail repair, fork, salvage), built on
//! [`lock`] (the advisory write lock) and [`publish`] (atomic creation of new files).

pub mod list;
pub mod lock;
pub mod publish;
pub mod reader;
pub mod tail;
pub mod writer;
