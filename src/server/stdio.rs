//! The daemon's stdin and stdout as the runtime's reactor waits on them.
//!
//! When an end is a pipe or a socket (as an editor starts the daemon), it is duplicated, set
//! non-blocking and registered with tokio's reactor (a [`pipe`] end or a [`UnixStream`]): a
//! request then wakes a runtime worker straight from `epoll`, and the answer is written by a
//! worker, so a small request crosses no thread but the runtime's (a thread per end cost a
//! wake-up each way, about half of a small request's round trip). A client that stops
//! reading makes a write wait for the pipe to drain; it never blocks a worker. A terminal or
//! a file is served as before, by a thread of its own with blocking calls: setting a
//! terminal non-blocking would change it for the shell that shares it, and `epoll` refuses
//! regular files. A polled output's buffer is grown to [`OUTPUT_BUFFER_BYTES`], so that an
//! answer of megabytes crosses in a few turns rather than a hundred.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{FileType, OFlags};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

/// Puts an end's file status flags back as they were when the daemon started, when it is
/// dropped: the open file description may be shared with another process.
#[derive(Debug)]
struct Restore {
    fd: OwnedFd,
    flags: OFlags,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = rustix::fs::fcntl_setfl(&self.fd, self.flags);
    }
}

/// The kind of `fd` when the runtime's reactor can wait on it, with a guard that restores its
/// flags to `flags`; `None` for anything else (a terminal, a file, `/dev/null`), and for a
/// pipe or socket that is also the daemon's stderr (a server started with `2>&1` into its
/// pipe, or on one socket as inetd does): setting it non-blocking would make the log's
/// writes fail when the pipe is full.
fn pollable(fd: BorrowedFd<'_>, flags: OFlags) -> Option<(FileType, OwnedFd, Restore)> {
    let stat = rustix::fs::fstat(fd).ok()?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if !matches!(kind, FileType::Fifo | FileType::Socket) {
        return None;
    }
    if let Ok(err) = rustix::fs::fstat(io::stderr().as_fd())
        && (err.st_dev, err.st_ino) == (stat.st_dev, stat.st_ino)
    {
        return None;
    }
    let owned = fd.try_clone_to_owned().ok()?;
    let restore = Restore {
        fd: fd.try_clone_to_owned().ok()?,
        flags,
    };
    Some((kind, owned, restore))
}

/// Bytes the daemon's output should hold unread before a write waits: 1 MiB, Linux's
/// default `/proc/sys/fs/pipe-max-size` (the most an unprivileged process may ask of a pipe).
/// A pipe holds 64 KiB by default, so a `contextAt` answer of megabytes (6 MB on a 1 GB
/// session) took about a hundred fill-and-drain turns, each a wake-up of the daemon and of
/// the editor; with 1 MiB it takes a few.
pub const OUTPUT_BUFFER_BYTES: usize = 1 << 20;

/// Grows a pipe end's buffer to [`OUTPUT_BUFFER_BYTES`] when it is smaller (never shrinks
/// it: the pipe is shared with the client). Failing (a kernel that refuses, a user over its
/// pipe quota) leaves the pipe as it was: the buffer's size changes speed, not behaviour.
fn grow_pipe(fd: &OwnedFd) {
    if rustix::pipe::fcntl_getpipe_size(fd).is_ok_and(|n| n < OUTPUT_BUFFER_BYTES) {
        let _ = rustix::pipe::fcntl_setpipe_size(fd, OUTPUT_BUFFER_BYTES);
    }
}

/// Grows a socket's send buffer to [`OUTPUT_BUFFER_BYTES`] when it is smaller (editors that
/// start the daemon through libuv, VS Code and Neovim, give it a socket pair, whose send
/// buffer is about 200 KiB by default). The kernel caps the request at
/// `/proc/sys/net/core/wmem_max`; failing leaves the socket as it was.
fn grow_send_buffer(fd: &OwnedFd) {
    // The kernel reports twice what was asked (its bookkeeping overhead included).
    if rustix::net::sockopt::socket_send_buffer_size(fd).is_ok_and(|n| n < 2 * OUTPUT_BUFFER_BYTES)
    {
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(fd, OUTPUT_BUFFER_BYTES);
    }
}

/// A socket end set non-blocking and registered with the runtime's reactor.
fn socket(owned: OwnedFd) -> io::Result<UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(owned);
    stream.set_nonblocking(true)?;
    UnixStream::from_std(stream)
}

/// One end of the daemon's stdio on the runtime's reactor (`S`: a pipe end or a socket, as
/// a reader or a writer), with the guard that restores its flags.
pub struct Polled<S> {
    stream: S,
    _restore: Restore,
}

/// The daemon's input on the runtime's reactor.
pub type PolledInput = Polled<Box<dyn AsyncRead + Unpin + Send>>;
/// The daemon's output on the runtime's reactor.
pub type PolledOutput = Polled<Box<dyn AsyncWrite + Unpin + Send>>;

impl<S> std::fmt::Debug for Polled<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Polled")
    }
}

impl<S> Polled<S> {
    /// `fd` duplicated, set non-blocking and registered by `register` (given the kind of
    /// end), when it is a pipe or a socket; `None` otherwise or when it cannot be
    /// registered. `flags` are restored when it is dropped. Must be called on a Tokio
    /// runtime.
    fn new(
        fd: BorrowedFd<'_>,
        flags: OFlags,
        register: impl FnOnce(FileType, OwnedFd) -> io::Result<S>,
    ) -> Option<Polled<S>> {
        let (kind, owned, restore) = pollable(fd, flags)?;
        Some(Polled {
            stream: register(kind, owned).ok()?,
            _restore: restore,
        })
    }
}

impl PolledInput {
    /// Stdin (`fd`) as a [`pipe::Receiver`] or a [`UnixStream`]; see `Polled::new`.
    pub fn input(fd: BorrowedFd<'_>, flags: OFlags) -> Option<PolledInput> {
        Polled::new(fd, flags, |kind, owned| {
            let stream: Box<dyn AsyncRead + Unpin + Send> = match kind {
                FileType::Fifo => Box::new(pipe::Receiver::from_owned_fd(owned)?),
                _ => Box::new(socket(owned)?),
            };
            Ok(stream)
        })
    }

    /// Appends what is there to `buf`, waiting until something is; `Ok(0)` at the end of
    /// input. Errors: the read's.
    pub async fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        tokio::io::AsyncReadExt::read_buf(&mut self.stream, buf).await
    }
}

impl PolledOutput {
    /// Stdout (`fd`) as a [`pipe::Sender`] or a [`UnixStream`]; see `Polled::new`.
    pub fn output(fd: BorrowedFd<'_>, flags: OFlags) -> Option<PolledOutput> {
        Polled::new(fd, flags, |kind, owned| {
            let stream: Box<dyn AsyncWrite + Unpin + Send> = match kind {
                FileType::Fifo => {
                    grow_pipe(&owned);
                    Box::new(pipe::Sender::from_owned_fd(owned)?)
                }
                _ => {
                    grow_send_buffer(&owned);
                    Box::new(socket(owned)?)
                }
            };
            Ok(stream)
        })
    }

    /// Writes a prefix of `parts`, waiting (not blocking) until the pipe takes some; returns
    /// its length in bytes. Errors: the write's.
    pub async fn write_vectored(&mut self, parts: &[io::IoSlice<'_>]) -> io::Result<usize> {
        tokio::io::AsyncWriteExt::write_vectored(&mut self.stream, parts).await
    }
}

/// One end of the transport: `P` polled by the runtime, or a blocking stream `T` served by a
/// thread.
#[derive(Debug)]
pub enum End<P, T> {
    /// A pipe or a socket on the runtime's reactor.
    Polled(P),
    /// A blocking stream (a terminal, a file, a test's buffer).
    Blocking(T),
}

/// The transport's input.
pub type Input<T> = End<PolledInput, T>;
/// The transport's output.
pub type Output<T> = End<PolledOutput, T>;

/// The daemon's stdin and stdout: each polled when it is a pipe or a socket, else stdin as
/// the blocking stream and stdout as a duplicate of fd 1 written with blocking calls (frames
/// never go through `Stdout`'s line buffer, which scans every body, megabytes for a long
/// `contextAt`, for a line break and splits each frame's writes at its header's).
///
/// Both ends' flags are read before either is changed: stdin and stdout may be one socket,
/// and each end, when dropped, puts back the flags the daemon started with. Must be called on
/// a Tokio runtime.
pub fn ends() -> (Input<io::Stdin>, Output<Box<dyn Write + Send>>) {
    let (stdin, stdout) = (io::stdin(), io::stdout());
    let flags_in = rustix::fs::fcntl_getfl(stdin.as_fd()).ok();
    let flags_out = rustix::fs::fcntl_getfl(stdout.as_fd()).ok();
    let input = match flags_in.and_then(|f| PolledInput::input(stdin.as_fd(), f)) {
        Some(p) => End::Polled(p),
        None => End::Blocking(stdin),
    };
    let output = match flags_out.and_then(|f| PolledOutput::output(stdout.as_fd(), f)) {
        Some(p) => End::Polled(p),
        None => {
            let blocking: Box<dyn Write + Send> = match stdout.as_fd().try_clone_to_owned() {
                Ok(fd) => Box::new(File::from(fd)),
                Err(_) => Box::new(stdout),
            };
            End::Blocking(blocking)
        }
    };
    (input, output)
}
