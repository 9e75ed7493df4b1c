//! The stdio transport: `Content-Length` framing on stdin/stdout around tower-lsp-server's
//! `LspService` (which implements the JSON-RPC dispatch and the LSP lifecycle).
//!
//! Why not `tower_lsp_server::Server`: its reader is a tokio-util `FramedRead`, which ends
//! the stream after the first decode error, so one malformed frame or one body that is not
//! JSON stops the whole server. The daemon must answer such input with a JSON-RPC error and
//! keep serving, so this loop decodes frames itself (headers with `httparse`), answers
//! undecodable ones (`-32700` parse error, `-32600` invalid request, id `null` unless the id
//! could be read) and hands everything else to the service exactly as `Server` would: in
//! arrival order, at most [`MAX_CONCURRENCY`] requests in flight, stopping after `exit`.

use std::path::Path;

use futures::{FutureExt, SinkExt, StreamExt, future};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tower::Service;
use tower_lsp_server::jsonrpc::{Error, Id, Request, Response};
use tower_lsp_server::{ClientSocket, LanguageServer, LspService};

use super::error::RpcError;
use super::stdio::{End, Input, Output, PolledInput, PolledOutput};

/// Requests handled concurrently (as `tower_lsp_server::Server`'s default).
pub const MAX_CONCURRENCY: usize = 4;
/// A frame body larger than this is refused (its bytes are skipped), in bytes.
pub const MAX_FRAME_BYTES: usize = 256 << 20;
/// Largest header block, in bytes; longer garbage is skipped.
const MAX_HEADER_BYTES: usize = 8 << 10;

/// Buffers of results already written, kept for the next [`spare_buffer`]: a large result
/// (a `session/contextAt` with every message of a long path, megabytes) is then serialized
/// into memory that is already mapped, instead of a fresh allocation of its full size that
/// the allocator maps, the kernel faults in page by page and unmaps again after the write.
static SPARE_BUFFERS: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
/// Buffers kept in [`SPARE_BUFFERS`]: one per request in flight and one being written.
const SPARE_BUFFER_COUNT: usize = MAX_CONCURRENCY + 1;
/// Most capacity kept in [`SPARE_BUFFERS`] altogether, in bytes; a buffer that would take it
/// past this (a result of tens or hundreds of megabytes) is freed after its write rather than
/// held for the daemon's life.
const SPARE_BUFFER_MAX_BYTES: usize = 64 << 20;

/// An empty buffer to serialize a result into before handing it to [`raw_result`]: one the
/// transport has written before (its capacity kept) when there is one, else a new one.
pub fn spare_buffer() -> Vec<u8> {
    SPARE_BUFFERS
        .lock()
        .ok()
        .and_then(|mut spare| spare.pop())
        .unwrap_or_default()
}

/// Keeps `buf` (written out) for a later [`spare_buffer`], unless enough are kept already or
/// keeping it would hold more than [`SPARE_BUFFER_MAX_BYTES`].
fn recycle(mut buf: Vec<u8>) {
    if buf.capacity() == 0 {
        return;
    }
    buf.clear();
    if let Ok(mut spare) = SPARE_BUFFERS.lock() {
        let kept: usize = spare.iter().map(Vec::capacity).sum();
        if spare.len() < SPARE_BUFFER_COUNT
            && kept.saturating_add(buf.capacity()) <= SPARE_BUFFER_MAX_BYTES
        {
            spare.push(buf);
        }
    }
}

/// A result its handler serialized already: one JSON value as final text (its decoded lone
/// surrogates written back as escapes, as
/// [`ContextJson::write_to`](crate::view::context_json::ContextJson::write_to) writes them). A
/// large result (a `session/contextAt` with every message of a long path, an export) is then
/// serialized once, where it was made, and written from this buffer as it is: not parsed into
/// a `Value` for the framework and serialized again.
#[derive(Debug)]
pub struct Raw(Vec<u8>);

impl Raw {
    /// Wraps JSON text that is final (see the type's docs).
    pub fn new(text: Vec<u8>) -> Raw {
        Raw(text)
    }
}

/// A result serialized where it was made, as the text the transport sends ([`Raw`]; the
/// handler hands it on with [`raw_result`]): for results that can be large (an export, a
/// graph), whose serialization, and the pass that writes lone surrogates back as escapes, must
/// not run on the runtime's thread, where every other session's answer waits for it. Call it
/// off the runtime (in the owner's query, or on the blocking pool).
pub(super) fn to_raw<T: serde::Serialize>(path: &Path, v: &T) -> Result<Raw, RpcError> {
    to_raw_sized(path, v, 0)
}

/// [`to_raw`] into a buffer of at least `expected` bytes to start with: a result whose size is
/// known roughly (an export's document) is written without the buffer doubling up to twice
/// its size on the way.
pub(super) fn to_raw_sized<T: serde::Serialize>(
    path: &Path,
    v: &T,
    expected: usize,
) -> Result<Raw, RpcError> {
    let mut text = spare_buffer();
    text.reserve(expected);
    serde_json::to_writer(&mut text, v).map_err(|e| RpcError::Io {
        path: path.to_owned(),
        source: std::io::Error::other(e),
    })?;
    Ok(Raw::new(super::lossless::restore(text)))
}

/// Where a request's [`Raw`] result waits while the framework answers the request: one slot per
/// request, made by the transport when it hands the request to the service and read when the
/// answer comes back ([`dispatch`]). The handler's future runs inside the request's handling, so
/// [`raw_result`] finds its own request's slot, never another's.
type RawSlot = std::sync::Arc<std::sync::Mutex<Option<Vec<u8>>>>;

tokio::task_local! {
    static RESULT: RawSlot;
}

/// The `Value` a handler returns for a result it serialized already: the text goes into the
/// request's slot and the transport writes it in place of the result (the `Value` is a
/// placeholder). Outside a request's handling (a benchmark calling a handler directly), the
/// text is parsed into the `Value` it stands for.
pub fn raw_result(raw: Raw) -> Value {
    let mut text = Some(raw.0);
    let _ = RESULT.try_with(|slot| {
        if let Ok(mut slot) = slot.lock() {
            *slot = text.take();
        }
    });
    match text {
        None => Value::Null,
        Some(text) => super::lossless::parse(&text).unwrap_or(Value::Null),
    }
}

/// A frame body on its way to stdout: the concatenation of its parts.
enum Outgoing {
    /// A whole body.
    Body(Vec<u8>),
    /// A response whose result was serialized by its handler ([`Raw`]): `head`, then the result's
    /// `text` (written as it is, its buffer recycled afterwards), then `tail`.
    Raw {
        head: &'static [u8],
        text: Vec<u8>,
        tail: Vec<u8>,
    },
}

/// The start of a response with a result, up to the result (as serde writes a `Response`).
const RESULT_HEAD: &[u8] = b"{\"jsonrpc\":\"2.0\",\"result\":";

/// A response's frame body: as serde writes a `Response`, except that a result the handler
/// serialized already (`raw`, taken from the request's slot) is written as its text, and a
/// request id tower-lsp-server cannot hold (`wire_id`, see [`WireId::Big`]) is written back as
/// the client wrote it.
fn response_body(
    res: Response,
    raw: Option<Vec<u8>>,
    wire_id: Option<&RawValue>,
) -> Option<Outgoing> {
    let (id, body) = res.into_parts();
    if let (Ok(_), Some(text)) = (&body, raw) {
        let mut tail = Vec::with_capacity(32);
        tail.extend_from_slice(b",\"id\":");
        match wire_id {
            Some(wire) => tail.extend_from_slice(wire.get().as_bytes()),
            None => serde_json::to_writer(&mut tail, &id).ok()?,
        }
        tail.push(b'}');
        return Some(Outgoing::Raw {
            head: RESULT_HEAD,
            text,
            tail,
        });
    }
    let Some(wire) = wire_id else {
        return serde_json::to_vec(&Response::from_parts(id, body))
            .ok()
            .map(Outgoing::Body);
    };
    // serde writes the id last: the body with a `null` id, its end replaced.
    const NULL_END: &[u8] = b",\"id\":null}";
    let mut text = serde_json::to_vec(&Response::from_parts(Id::Null, body)).ok()?;
    if !text.ends_with(NULL_END) {
        return None;
    }
    text.truncate(text.len() - NULL_END.len());
    text.extend_from_slice(b",\"id\":");
    text.extend_from_slice(wire.get().as_bytes());
    text.push(b'}');
    Some(Outgoing::Body(text))
}

/// One frame on its way out: the `Content-Length` header and `body`'s parts, with every lone
/// surrogate pair restored ([`super::lossless::restore`]; a pair never spans parts: each part
/// holds whole JSON strings), except in a raw result's text, which is final ([`raw_result`]).
struct OutFrame {
    header: String,
    head: &'static [u8],
    text: Vec<u8>,
    tail: Vec<u8>,
}

impl OutFrame {
    fn new(body: Outgoing) -> OutFrame {
        let (head, text, tail) = match body {
            Outgoing::Body(body) => (&[][..], super::lossless::restore(body), Vec::new()),
            Outgoing::Raw { head, text, tail } => (head, text, super::lossless::restore(tail)),
        };
        let header = format!(
            "Content-Length: {}\r\n\r\n",
            head.len() + text.len() + tail.len()
        );
        OutFrame {
            header,
            head,
            text,
            tail,
        }
    }

    /// The frame's parts for vectored writes: the header, a small response's body or a large
    /// result's ends leave in the same system call as the result's first bytes, and a large
    /// result is never copied into a frame buffer.
    fn parts(&self) -> [std::io::IoSlice<'_>; 4] {
        use std::io::IoSlice;
        [
            IoSlice::new(self.header.as_bytes()),
            IoSlice::new(self.head),
            IoSlice::new(&self.text),
            IoSlice::new(&self.tail),
        ]
    }

    /// The frame's size in bytes.
    fn len(&self) -> usize {
        self.header.len() + self.head.len() + self.text.len() + self.tail.len()
    }

    /// The frame is out: its result's buffer goes back to [`spare_buffer`].
    fn written(self) {
        recycle(self.text);
    }
}

/// Writes one frame to a blocking output. Errors: the output's.
fn write_frame(output: &mut impl std::io::Write, body: Outgoing) -> std::io::Result<()> {
    let frame = OutFrame::new(body);
    let mut parts = frame.parts();
    let mut parts = &mut parts[..];
    while !parts.is_empty() {
        match output.write_vectored(parts) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => std::io::IoSlice::advance_slices(&mut parts, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    output.flush()?;
    frame.written();
    Ok(())
}

/// Frames on their way to a polled output, written by the transport's own task as the pipe
/// takes them: a response leaves from the task that produced it, with no hand-off to a writing
/// task (a wake-up of another runtime worker per small request).
struct PolledWriter {
    output: PolledOutput,
    /// Frames in order; the first is partly written.
    queue: std::collections::VecDeque<OutFrame>,
    /// Bytes of the first frame already written.
    written: usize,
}

impl PolledWriter {
    /// Writes part of the first frame, waiting (not blocking) until the pipe takes some;
    /// never ready while there is nothing to write. Errors: the output's.
    async fn write_some(&mut self) -> std::io::Result<()> {
        let Some(frame) = self.queue.front() else {
            return future::pending().await;
        };
        let mut parts = frame.parts();
        let mut parts = &mut parts[..];
        std::io::IoSlice::advance_slices(&mut parts, self.written);
        let n = self.output.write_vectored(parts).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        self.written += n;
        if self.written == frame.len()
            && let Some(frame) = self.queue.pop_front()
        {
            self.written = 0;
            frame.written();
        }
        Ok(())
    }
}

/// Where the transport's frames go.
enum Writer {
    /// Written by the transport's task ([`PolledWriter`]).
    Polled(PolledWriter),
    /// Handed to the thread that writes a blocking output (see [`start_writer`]).
    Thread(mpsc::UnboundedSender<Outgoing>),
    /// The output failed: frames are dropped.
    Closed,
}

impl Writer {
    /// Queues `body` to be written after the frames before it.
    fn send(&mut self, body: Outgoing) {
        match self {
            Writer::Polled(w) => w.queue.push_back(OutFrame::new(body)),
            Writer::Thread(tx) => {
                if tx.send(body).is_err() {
                    *self = Writer::Closed;
                }
            }
            Writer::Closed => {}
        }
    }

    /// Whether the transport's task has frames to write.
    fn has_pending(&self) -> bool {
        matches!(self, Writer::Polled(w) if !w.queue.is_empty())
    }

    /// [`PolledWriter::write_some`]; never ready for the other kinds.
    async fn write_some(&mut self) -> std::io::Result<()> {
        match self {
            Writer::Polled(w) => w.write_some().await,
            _ => future::pending().await,
        }
    }

    /// Writes every queued frame (a polled output) or waits until the writing thread has
    /// (`done`), then drops the output, restoring its flags.
    async fn finish(mut self, done: Option<tokio::sync::oneshot::Receiver<()>>) {
        while self.has_pending() {
            if let Err(e) = self.write_some().await {
                tracing::warn!("cannot write to stdout: {e}");
                break;
            }
        }
        // Closing the channel ends the writing thread once it has written what it holds.
        drop(self);
        if let Some(done) = done {
            let _ = done.await;
        }
    }
}

/// Where the transport's input comes from: chunks read by a thread, or a polled end read by
/// the transport's own task.
enum Reader {
    Thread(mpsc::UnboundedReceiver<Vec<u8>>),
    Polled(PolledInput),
}

impl Reader {
    /// Starts reading `input`: a polled end is read where the frames are decoded, a blocking
    /// stream by a thread of its own. `None` when that thread cannot start.
    fn start<I: std::io::Read + Send + 'static>(input: Input<I>) -> Option<Reader> {
        let input = match input {
            End::Polled(p) => return Some(Reader::Polled(p)),
            End::Blocking(input) => input,
        };
        let (in_tx, in_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let spawned = std::thread::Builder::new()
            .name("sessiond-stdin".into())
            .spawn(move || {
                let mut input = input;
                let mut chunk = vec![0u8; READ_CHUNK_BYTES];
                loop {
                    match input.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(n) => {
                            if in_tx.send(chunk[..n].to_vec()).is_err() {
                                break;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            tracing::warn!("cannot read stdin: {e}");
                            break;
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the stdin thread: {e}");
            return None;
        }
        Some(Reader::Thread(in_rx))
    }

    /// Appends the next bytes of input to `buf`; `false` at the end of input or on an error
    /// (logged).
    async fn read_into(&mut self, buf: &mut Vec<u8>) -> bool {
        match self {
            Reader::Thread(rx) => match rx.recv().await {
                Some(bytes) => {
                    buf.extend_from_slice(&bytes);
                    true
                }
                None => false,
            },
            Reader::Polled(input) => {
                // Into the buffer's spare room: no zeroed chunk, no copy out of it.
                buf.reserve(READ_CHUNK_BYTES);
                match input.read_into(buf).await {
                    Ok(0) => false,
                    Ok(_) => true,
                    Err(e) => {
                        tracing::warn!("cannot read stdin: {e}");
                        false
                    }
                }
            }
        }
    }
}

/// Bytes asked for per read of the input (room reserved in the frame buffer, or the reading
/// thread's chunk).
const READ_CHUNK_BYTES: usize = 64 << 10;

/// The transport's writer for `output`: a polled end is written by the transport's task, a
/// blocking stream by a thread of its own, whose end is signalled on the returned receiver
/// (once its channel closed and it wrote what it held, or a write failed). `None` when that
/// thread cannot start.
fn start_writer<O: std::io::Write + Send + 'static>(
    output: Output<O>,
) -> Option<(Writer, Option<tokio::sync::oneshot::Receiver<()>>)> {
    let output = match output {
        End::Polled(output) => {
            let writer = PolledWriter {
                output,
                queue: std::collections::VecDeque::new(),
                written: 0,
            };
            return Some((Writer::Polled(writer), None));
        }
        End::Blocking(output) => output,
    };
    let (writer_done, done) = tokio::sync::oneshot::channel::<()>();
    let (tx, mut rx) = mpsc::unbounded_channel::<Outgoing>();
    let spawned = std::thread::Builder::new()
        .name("sessiond-stdout".into())
        .spawn(move || {
            let mut output = output;
            while let Some(body) = rx.blocking_recv() {
                if let Err(e) = write_frame(&mut output, body) {
                    tracing::warn!("cannot write to stdout: {e}");
                    break;
                }
            }
            let _ = writer_done.send(());
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the stdout thread: {e}");
        return None;
    }
    Some((Writer::Thread(tx), Some(done)))
}

/// What the reader found in the input.
enum Frame {
    /// A complete body.
    Body(Vec<u8>),
    /// Bytes that are not a frame, or a frame that cannot be accepted.
    Malformed(String),
}

/// One decoding step of [`Deframer`].
enum Step {
    /// A frame to hand on.
    Frame(Frame),
    /// More input is needed.
    Wait,
    /// Bytes were consumed; decode on.
    Again,
}

/// Splits a byte stream into LSP frames, resynchronizing at the next `Content-Length`
/// after garbage.
struct Deframer {
    buf: Vec<u8>,
    /// Largest accepted body ([`MAX_FRAME_BYTES`]).
    max_body: usize,
    /// Body length of the frame whose header was read.
    body: Option<usize>,
    /// Bytes of an oversized body still to skip.
    skip: usize,
    /// Garbage was reported and no header name followed it yet: bytes are dropped silently
    /// until one appears (the same run of garbage is one error however the reads cut it).
    discarding: bool,
}

impl Default for Deframer {
    fn default() -> Self {
        Deframer {
            buf: Vec::new(),
            max_body: MAX_FRAME_BYTES,
            body: None,
            skip: 0,
            discarding: false,
        }
    }
}

impl Deframer {
    /// The next frame, or `None` until more input arrives.
    fn next(&mut self) -> Option<Frame> {
        // A loop, not recursion: a long run of bad headers must not grow the stack.
        loop {
            match self.step() {
                Step::Frame(frame) => return Some(frame),
                Step::Wait => return None,
                Step::Again => {}
            }
        }
    }

    fn step(&mut self) -> Step {
        if self.skip > 0 {
            let n = self.skip.min(self.buf.len());
            self.buf.drain(..n);
            self.skip -= n;
            if self.skip > 0 {
                return Step::Wait;
            }
        }
        if let Some(len) = self.body {
            if self.buf.len() < len {
                return Step::Wait;
            }
            let body: Vec<u8> = self.buf.drain(..len).collect();
            self.body = None;
            return Step::Frame(Frame::Body(body));
        }
        if self.discarding {
            // Still dropping garbage: only a header name ends it.
            match find_header_name(&self.buf) {
                Some(i) => {
                    self.buf.drain(..i);
                    self.discarding = false;
                }
                None => {
                    let drop = self.buf.len() - header_name_start_at_end(&self.buf);
                    self.buf.drain(..drop);
                    return Step::Wait;
                }
            }
        }
        // Leading line breaks between frames are harmless.
        let blank = self
            .buf
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        self.buf.drain(..blank);
        if self.buf.is_empty() {
            return Step::Wait;
        }
        let mut headers = [httparse::EMPTY_HEADER; 8];
        match httparse::parse_headers(&self.buf, &mut headers) {
            Ok(httparse::Status::Partial) => {
                if self.buf.len() > MAX_HEADER_BYTES {
                    return self.resync("header block too long");
                }
                Step::Wait
            }
            Ok(httparse::Status::Complete((used, headers))) => {
                let len = headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("Content-Length"))
                    .map(|h| {
                        std::str::from_utf8(h.value)
                            .ok()
                            .and_then(|v| v.trim().parse::<usize>().ok())
                    });
                match len {
                    None => self.resync("missing Content-Length header"),
                    Some(None) => self.resync("invalid Content-Length header"),
                    Some(Some(n)) if n > self.max_body => {
                        self.buf.drain(..used);
                        self.skip = n;
                        Step::Frame(Frame::Malformed(format!(
                            "frame of {n} bytes exceeds the limit of {}",
                            self.max_body
                        )))
                    }
                    Some(Some(n)) => {
                        self.buf.drain(..used);
                        self.body = Some(n);
                        Step::Again
                    }
                }
            }
            Err(e) => self.resync(&format!("invalid frame header: {e}")),
        }
    }

    /// Drops bytes up to the next `Content-Length` header name (after the first byte, in any
    /// case) and reports them. With no header name in sight, a tail that could be the start of
    /// one is kept and [`Self::step`] goes on dropping what the next reads bring until one
    /// appears, silently: the frames and errors decoded after garbage are the same however the
    /// reads cut the stream.
    fn resync(&mut self, why: &str) -> Step {
        let rest = self.buf.get(1..).unwrap_or(&[]);
        let next = match find_header_name(rest) {
            Some(i) => i + 1,
            None => {
                self.discarding = true;
                self.buf.len() - header_name_start_at_end(rest)
            }
        };
        self.buf.drain(..next.max(1).min(self.buf.len()));
        Step::Frame(Frame::Malformed(why.to_owned()))
    }
}

/// The header name the decoder resynchronizes on, lowercase.
const HEADER_NAME: &[u8] = b"content-length";

/// Where `Content-Length` (in any case) first occurs in `bytes`.
fn find_header_name(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(HEADER_NAME.len())
        .position(|w| w.eq_ignore_ascii_case(HEADER_NAME))
}

/// The length of the longest proper start of `Content-Length` that `bytes` ends with.
fn header_name_start_at_end(bytes: &[u8]) -> usize {
    (1..HEADER_NAME.len())
        .rev()
        .find(|&k| {
            k <= bytes.len() && bytes[bytes.len() - k..].eq_ignore_ascii_case(&HEADER_NAME[..k])
        })
        .unwrap_or(0)
}

/// Splits `chunks`, read one after another, into frames exactly as [`run`] does: `Ok(body)` for
/// a complete frame, `Err(reason)` for bytes that are not one (a frame still incomplete at the
/// end is not returned). The decoder's entry point for the fuzz tests (`tests/fuzz.rs`).
#[doc(hidden)]
pub fn decode_frames<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<Result<Vec<u8>, String>> {
    let mut deframer = Deframer::default();
    let mut out = Vec::new();
    for chunk in chunks {
        deframer.buf.extend_from_slice(chunk);
        while let Some(frame) = deframer.next() {
            out.push(match frame {
                Frame::Body(body) => Ok(body),
                Frame::Malformed(why) => Err(why),
            });
        }
    }
    out
}

/// What [`run`] does with one frame's body, for the fuzz tests (`tests/fuzz.rs`).
#[doc(hidden)]
#[derive(Debug)]
pub enum Taken {
    /// Handed to the service: its method, and the id its answer carries as JSON text (`None`
    /// for a notification).
    Request {
        /// The method.
        method: String,
        /// The answer's id, as written in the answer.
        answer_id: Option<String>,
    },
    /// A response to a request of the daemon's.
    Response,
    /// Answered at once with this error response (JSON text); nothing runs.
    Rejected(String),
}

/// [`run`]'s decision on one frame's body ([`Taken`]). The id handling's entry point for the
/// fuzz tests.
#[doc(hidden)]
pub fn take_body(body: &[u8]) -> Taken {
    match classify(body) {
        Incoming::Request(req, big) => Taken::Request {
            method: req.method().to_owned(),
            answer_id: match big {
                Some(text) => Some(text.get().to_owned()),
                None => req.id().and_then(|id| serde_json::to_string(id).ok()),
            },
        },
        Incoming::Response(_) => Taken::Response,
        Incoming::Reject(body) => Taken::Rejected(String::from_utf8_lossy(&body).into_owned()),
    }
}

/// An error response's body, with `id` as the client wrote it (`None`: `null`).
fn error_response(id: Option<&RawValue>, code: i64, message: &str) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct ErrorObject<'a> {
        code: i64,
        message: &'a str,
    }
    #[derive(serde::Serialize)]
    struct ErrorFrame<'a> {
        jsonrpc: &'static str,
        id: Option<&'a RawValue>,
        error: ErrorObject<'a>,
    }
    serde_json::to_vec(&ErrorFrame {
        jsonrpc: "2.0",
        id,
        error: ErrorObject { code, message },
    })
    .unwrap_or_default()
}

/// A request's id as the transport takes it.
///
/// JSON-RPC 2.0 asks for the response's id to be the same value as the request's. tower-lsp-server
/// holds a numeric id as an `i64`, and the body is parsed into a `Value` that holds a number as an
/// `i64`, a `u64` or a double, so an integer outside `i64` (`-9223372036854775809`, `2^64`) cannot
/// pass through either. Such an id is kept as the client's text and the request goes to the
/// service under a stand-in string id; its answer is written with the text. serde_json's
/// `arbitrary_precision` would keep the text in every `Value` instead, but it changes how every
/// number in the crate is held and compared (session lines included), for the sake of one field.
///
/// An id with a fraction or an exponent (`1.5`, `1e400`: JSON-RPC says numbers SHOULD NOT have
/// fractional parts, and `1e400` has no value a client could match) or of another type is not
/// taken: the request is refused with -32600 and `id: null`, and nothing runs.
enum WireId {
    /// No id (a notification), or one tower-lsp-server holds as it is: an `i64`, a string,
    /// `null`.
    Plain,
    /// An integer beyond `i64`, as the client wrote it.
    Big(Box<RawValue>),
    /// An id the server does not take; the reason.
    Refused(String),
}

/// The top-level `id` member's text, read again from the body (the `Value` lost it). `None`:
/// the body cannot be read so (a key with a lone surrogate, nesting beyond serde_json's limit,
/// `id` twice), or the id is `null`.
fn raw_id(body: &[u8]) -> Option<Box<RawValue>> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        id: Option<Box<RawValue>>,
    }
    serde_json::from_slice::<Envelope>(body).ok()?.id
}

/// Whether `text` is a JSON integer: an optional minus and digits, nothing else.
fn is_integer_text(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// How the transport takes `value`'s id (`body` is its text).
fn wire_id(value: &Value, body: &[u8]) -> WireId {
    let refused = |text: &str| {
        WireId::Refused(format!(
            "the request id {text} is not a string or an integer"
        ))
    };
    match value.get("id") {
        None | Some(Value::String(_)) => WireId::Plain,
        Some(Value::Number(n)) if n.is_i64() => WireId::Plain,
        // A double, or `null` that may stand for a number beyond a double's range.
        Some(v @ (Value::Number(_) | Value::Null)) => match raw_id(body) {
            Some(text) if is_integer_text(text.get()) => WireId::Big(text),
            Some(text) => refused(text.get()),
            None if v.is_null() => WireId::Plain,
            None => refused(&v.to_string()),
        },
        Some(other) => refused(&truncated(&other.to_string())),
    }
}

/// `text` cut to a length fit for an error message.
fn truncated(text: &str) -> String {
    const MAX: usize = 64;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// What to do with one decoded body.
enum Incoming {
    /// A request or notification, with its id as the client wrote it when tower-lsp-server
    /// cannot hold it ([`WireId::Big`]).
    Request(Request, Option<Box<RawValue>>),
    Response(Response),
    /// An error response to send back.
    Reject(Vec<u8>),
}

/// The string id a request goes to the service under when tower-lsp-server cannot hold its own
/// ([`WireId::Big`]): made from the client's text, so that a `$/cancelRequest` naming the same
/// id finds it ([`big_cancel_id`]).
fn stand_in_id(text: &RawValue) -> String {
    format!("sessiond:id:{}", text.get())
}

/// The id a `$/cancelRequest` names, as the client wrote it, when it is an integer beyond `i64`
/// (the service would not read it, and the request it names went under [`stand_in_id`]).
fn big_cancel_id(body: &[u8]) -> Option<Box<RawValue>> {
    #[derive(serde::Deserialize)]
    struct Params {
        id: Box<RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Envelope {
        params: Params,
    }
    let id = serde_json::from_slice::<Envelope>(body).ok()?.params.id;
    (is_integer_text(id.get()) && id.get().parse::<i64>().is_err()).then_some(id)
}

fn classify(body: &[u8]) -> Incoming {
    let value: Value = match super::lossless::parse(body) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Reject(error_response(None, -32700, &format!("parse error: {e}")));
        }
    };
    let is_request = value.get("method").is_some();
    let wire = wire_id(&value, body);
    let echoed: Option<Box<RawValue>> = match (&wire, value.get("id")) {
        (WireId::Big(text), _) => Some(text.clone()),
        (WireId::Plain, Some(id @ (Value::Number(_) | Value::String(_)))) => {
            serde_json::value::to_raw_value(id).ok()
        }
        _ => None,
    };
    let invalid = |detail: String| {
        Incoming::Reject(error_response(
            echoed.as_deref(),
            -32600,
            &format!("invalid request: {detail}"),
        ))
    };
    if let WireId::Refused(why) = &wire {
        return Incoming::Reject(error_response(
            None,
            -32600,
            &format!("invalid request: {why}"),
        ));
    }
    let Value::Object(map) = &value else {
        return invalid("the message is not a JSON object (batches are not supported)".into());
    };
    let is_response = map.contains_key("result") || map.contains_key("error");
    let is_initialize = map.get("method").and_then(Value::as_str) == Some("initialize");
    let mut value = value;
    if is_initialize {
        default_capabilities(&mut value);
    }
    let big = match wire {
        WireId::Big(text) => {
            if let Value::Object(map) = &mut value {
                map.insert("id".into(), Value::String(stand_in_id(&text)));
            }
            Some(text)
        }
        _ => None,
    };
    // A cancel naming an id beyond `i64` names the request by its stand-in.
    if map_method(&value) == Some("$/cancelRequest")
        && let Some(text) = big_cancel_id(body)
        && let Some(params) = value.get_mut("params").and_then(Value::as_object_mut)
    {
        params.insert("id".into(), Value::String(stand_in_id(&text)));
    }
    if is_request {
        match serde_json::from_value::<Request>(value) {
            Ok(r) => Incoming::Request(r, big),
            Err(e) => invalid(e.to_string()),
        }
    } else if is_response {
        // The daemon's own requests carry small integer ids: a response with another id
        // answers nothing it asked.
        match serde_json::from_value::<Response>(value) {
            Ok(r) => Incoming::Response(r),
            Err(e) => invalid(e.to_string()),
        }
    } else {
        invalid("no \"method\", \"result\" or \"error\"".into())
    }
}

/// The `method` of a message, if it has one.
fn map_method(value: &Value) -> Option<&str> {
    value.get("method").and_then(Value::as_str)
}

/// LSP requires `initialize` params to carry `capabilities`, and tower-lsp-server refuses
/// them without it (`missing field capabilities`). sessiond uses no client capability, so an
/// `initialize` whose params are absent, `null`, or an object without `capabilities` is taken
/// as if it had `"capabilities": {}`; a client can send just `initializationOptions`.
fn default_capabilities(request: &mut Value) {
    let Value::Object(map) = request else {
        return;
    };
    match map.get_mut("params") {
        None | Some(Value::Null) => {
            map.insert("params".into(), json!({ "capabilities": {} }));
        }
        Some(Value::Object(params)) => {
            params.entry("capabilities").or_insert_with(|| json!({}));
        }
        Some(_) => {}
    }
}

/// Requests read and waiting for one of the [`MAX_CONCURRENCY`] places; input is not read
/// while this many wait (the frames of one read are all handed on, which may pass it).
const MAX_QUEUED: usize = 64;

/// A request's handling: the service's future, and the answer it gives (`None` for a
/// notification) with the result its handler serialized already, if it did ([`Raw`]), and the
/// request's id as the client wrote it when tower-lsp-server could not hold it ([`WireId::Big`]).
type Handling = std::pin::Pin<Box<dyn std::future::Future<Output = Option<Answer>> + Send>>;

/// What a [`Handling`] gives: the answer, a result serialized already, the client's id text.
type Answer = (Response, Option<Vec<u8>>, Option<Box<RawValue>>);

/// Methods that run alone, in the order they arrived: everything read before one is answered
/// before it is handed on, and nothing read after it is handed on before it is answered. A
/// client that writes `initialize`, `initialized` and its first requests at once (as a script
/// piping frames into the daemon does) then gets each answered as if it had waited, instead of
/// "not initialized"; a `shutdown` behind requests closes the sessions after they are answered.
const ALONE: [&str; 2] = ["initialize", "shutdown"];

/// Serves `service` on `input`/`output` until `exit`, end of input or `stop`.
///
/// One task reads the input, hands requests to the service, polls their handling and writes
/// their answers: a small request (read when `epoll` wakes the runtime's worker, answered by
/// the session's owner task) crosses no other task of the transport.
/// A polled end (a pipe or a socket, see [`super::stdio`]) is read and written by this task,
/// waiting (never blocking) while the input is empty or the output full. A blocking stream is
/// served by a thread of its own (a frame costs one `read` or one `write` system call there
/// and one wake-up of the runtime), not by tokio's stdio, which hands every read, write and
/// flush to its blocking pool.
///
/// Requests are handed over in arrival order, at most [`MAX_CONCURRENCY`] at once; each new
/// one is polled before those after it (as `buffer_unordered` does), so a handler's first step
/// (sending to the session's owner) keeps that order. Server-to-client messages (requests and
/// notifications) are written between answers, in the order they were sent; at the end, once
/// the last handling is answered, `flush` (resolving once every notification sent before it
/// is in the client socket's stream: the event sink's barrier) is awaited and those are
/// written before the output closes.
pub async fn run<S, I, O>(
    input: Input<I>,
    output: Output<O>,
    mut service: LspService<S>,
    socket: ClientSocket,
    flush: impl FnOnce() -> futures::future::BoxFuture<'static, ()>,
    stop: impl std::future::Future<Output = ()> + Send,
) where
    S: LanguageServer,
    I: std::io::Read + Send + 'static,
    O: std::io::Write + Send + 'static,
{
    let Some((mut writer, writer_done)) = start_writer(output) else {
        return;
    };
    let Some(mut input) = Reader::start(input) else {
        return;
    };

    let (mut server_requests, mut client_responses) = socket.split();
    let mut requests_open = true;
    let mut queued: std::collections::VecDeque<Handling> = std::collections::VecDeque::new();
    let mut in_flight = futures::stream::FuturesUnordered::<Handling>::new();
    let mut deframer = Deframer::default();
    // More input may come.
    let mut input_open = true;
    // `exit` was read, or the service is gone: nothing more is handed on.
    let mut stopped = false;
    // A request of [`ALONE`] read while others were unanswered, and whether one is in flight.
    let mut held: Option<(Request, Option<Box<RawValue>>)> = None;
    let mut alone = false;
    let mut stop = std::pin::pin!(stop);
    loop {
        if !stopped && queued.is_empty() && in_flight.is_empty() {
            if let Some((req, big)) = held.take() {
                alone = true;
                stopped = !hand_over(&mut service, req, big, &mut queued).await;
            } else if alone {
                // The lone request is answered: the frames read behind it go on.
                alone = false;
                stopped = !dispatch(
                    &mut deframer,
                    &mut service,
                    &mut client_responses,
                    &mut writer,
                    &mut queued,
                    &mut held,
                )
                .await;
            }
        }
        while in_flight.len() < MAX_CONCURRENCY
            && let Some(handling) = queued.pop_front()
        {
            in_flight.push(handling);
        }
        let waiting = held.is_some() || alone;
        if in_flight.is_empty() && (stopped || (!input_open && !waiting)) {
            break;
        }
        tokio::select! {
            // Output first (an answer leaves as soon as it is made), then what was sent to
            // the client, then answers, then new input.
            biased;
            wrote = writer.write_some(), if writer.has_pending() => {
                if let Err(e) = wrote {
                    tracing::warn!("cannot write to stdout: {e}");
                    writer = Writer::Closed;
                }
            }
            // Server-to-client messages before answers: a notification a handling sent (a
            // write's `didChange`, handed on before its answer is made) leaves first.
            req = server_requests.next(), if requests_open => match req {
                Some(req) => send_request(&mut writer, &req),
                None => requests_open = false,
            },
            Some(answer) = in_flight.next(), if !in_flight.is_empty() => {
                if let Some((res, raw, wire)) = answer
                    && let Some(body) = response_body(res, raw, wire.as_deref())
                {
                    writer.send(body);
                }
            }
            more = input.read_into(&mut deframer.buf),
                if input_open && !stopped && !waiting && queued.len() < MAX_QUEUED =>
            {
                if !more {
                    input_open = false;
                } else {
                    stopped = !dispatch(
                        &mut deframer,
                        &mut service,
                        &mut client_responses,
                        &mut writer,
                        &mut queued,
                        &mut held,
                    )
                    .await;
                }
            }
            // The client process is gone ([`super::parent`]): what was read is answered, the
            // rest is not read.
            () = &mut stop, if !stopped => stopped = true,
            // Not reached: input is read, or a handling is in flight (see the check above).
            else => break,
        }
    }
    // Every notification sent before now reaches the client before the output closes: the
    // flush resolves once the last is in the client socket's stream, which is read meanwhile
    // (it holds one message at a time), then emptied.
    let mut flushed = flush();
    while requests_open {
        tokio::select! {
            biased;
            req = server_requests.next() => match req {
                Some(req) => send_request(&mut writer, &req),
                None => requests_open = false,
            },
            () = &mut flushed => break,
        }
    }
    while requests_open && let Some(Some(req)) = server_requests.next().now_or_never() {
        send_request(&mut writer, &req);
    }
    writer.finish(writer_done).await;
}

/// Queues a server-to-client request or notification.
fn send_request(writer: &mut Writer, req: &Request) {
    if let Ok(body) = serde_json::to_vec(req) {
        writer.send(Outgoing::Body(body));
    }
}

/// Hands every complete frame in `deframer` on: a request to the service (its handling
/// queued), a response to the client socket, anything undecodable answered with an error. A
/// request of [`ALONE`] is put in `held` instead, and decoding stops there (the loop hands it on
/// once everything before it is answered, and calls this again once it is answered).
/// `false` once input must stop: after `exit`, or when the service is gone.
async fn dispatch<S: LanguageServer>(
    deframer: &mut Deframer,
    service: &mut LspService<S>,
    client_responses: &mut (impl futures::Sink<Response> + Unpin),
    writer: &mut Writer,
    queued: &mut std::collections::VecDeque<Handling>,
    held: &mut Option<(Request, Option<Box<RawValue>>)>,
) -> bool {
    while let Some(frame) = deframer.next() {
        let incoming = match frame {
            Frame::Body(body) => classify(&body),
            Frame::Malformed(why) => {
                tracing::warn!("malformed frame: {why}");
                Incoming::Reject(error_response(None, -32700, &format!("parse error: {why}")))
            }
        };
        match incoming {
            Incoming::Reject(body) => writer.send(Outgoing::Body(body)),
            Incoming::Response(res) => {
                let _ = client_responses.send(res).await;
            }
            Incoming::Request(req, big) if req.id().is_some() && ALONE.contains(&req.method()) => {
                *held = Some((req, big));
                return true;
            }
            Incoming::Request(req, big) => {
                if !hand_over(service, req, big, queued).await {
                    return false;
                }
            }
        }
    }
    true
}

/// Hands `req` to the service and queues its handling; `big`: its id as the client wrote it
/// ([`WireId::Big`]). `false` once input must stop: after `exit`, or when the service is gone.
async fn hand_over<S: LanguageServer>(
    service: &mut LspService<S>,
    req: Request,
    big: Option<Box<RawValue>>,
    queued: &mut std::collections::VecDeque<Handling>,
) -> bool {
    if future::poll_fn(|cx| service.poll_ready(cx)).await.is_err() {
        return false;
    }
    let exit = req.method() == "exit";
    // tower-lsp-server answers nothing to an unknown `$/` method (LSP lets a server ignore
    // `$/` notifications); a request still gets -32601.
    let unanswered = match req.id() {
        Some(id) if req.method().starts_with("$/") => Some((id.clone(), req.method().to_owned())),
        _ => None,
    };
    // The handler runs inside this scope: a result it serialized itself lands in this
    // request's slot ([`raw_result`]).
    let slot = RawSlot::default();
    let fut = RESULT.scope(slot.clone(), service.call(req));
    queued.push_back(Box::pin(async move {
        let response = match (fut.await.unwrap_or(None), unanswered) {
            (None, Some((id, method))) => {
                let mut error = Error::method_not_found();
                error.data = Some(Value::String(method));
                Some(Response::from_error(id, error))
            }
            (response, _) => response,
        };
        let raw = slot.lock().ok().and_then(|mut s| s.take());
        response.map(|r| (r, raw, big))
    }));
    !exit
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(d: &mut Deframer) -> Vec<String> {
        std::iter::from_fn(|| d.next())
            .map(|f| match f {
                Frame::Body(b) => String::from_utf8_lossy(&b).into_owned(),
                Frame::Malformed(why) => format!("malformed: {why}"),
            })
            .collect()
    }

    #[test]
    fn splits_frames_across_reads_and_resyncs_after_garbage() {
        let mut d = Deframer::default();
        d.buf
            .extend_from_slice(b"Content-Length: 2\r\n\r\n{}Content-Len");
        assert_eq!(frames(&mut d), ["{}"]);
        d.buf.extend_from_slice(b"gth: 3\r\n\r\n[1]");
        assert_eq!(frames(&mut d), ["[1]"]);
        d.buf
            .extend_from_slice(b"junk junk\r\n\r\nContent-Length: 1\r\n\r\n7");
        let got = frames(&mut d);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].starts_with("malformed"));
        assert_eq!(got[1], "7");
        d.buf
            .extend_from_slice(b"Content-Type: x\r\n\r\nContent-Length: 1\r\n\r\n8");
        let got = frames(&mut d);
        assert_eq!(got, ["malformed: missing Content-Length header", "8"]);
    }

    #[test]
    fn skips_oversized_bodies() {
        let mut d = Deframer {
            max_body: 1000,
            ..Deframer::default()
        };
        let huge = 1001;
        d.buf
            .extend_from_slice(format!("Content-Length: {huge}\r\n\r\n").as_bytes());
        assert_eq!(frames(&mut d).len(), 1);
        d.buf.extend(std::iter::repeat_n(b'x', huge));
        d.buf.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
        assert_eq!(frames(&mut d), ["ok"]);
    }

    #[test]
    fn raw_results_are_framed_as_serde_writes_a_response() {
        use tower_lsp_server::jsonrpc::Id;
        let text = br#"{"messages":[{"role":"user","content":"x\ud83d"}],"n":0.1}"#;
        let value = crate::server::lossless::parse(text).unwrap();
        for id in [Id::Number(7), Id::String("s\u{1}".into()), Id::Null] {
            let mut stashed = spare_buffer();
            serde_json::to_writer(&mut stashed, &value).unwrap();
            // Final text, as `ContextJson::write_to` writes it.
            let stashed = super::super::lossless::restore(stashed);
            let res = Response::from_ok(id.clone(), Value::Null);
            let mut got = Vec::new();
            write_frame(&mut got, response_body(res, Some(stashed), None).unwrap()).unwrap();
            let body = super::super::lossless::restore(
                serde_json::to_vec(&Response::from_ok(id, value.clone())).unwrap(),
            );
            let mut want = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
            want.extend_from_slice(&body);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            );
            assert!(String::from_utf8_lossy(&got).contains(r#""x\ud83d""#));
        }
    }

    /// A raw result is final text: a U+FDD0 pair in it is text, sent as it is (restoring it
    /// would turn it into an escape of a lone surrogate).
    #[test]
    fn raw_results_are_sent_as_they_are() {
        use tower_lsp_server::jsonrpc::Id;
        let text = "{\"content\":\"lit \u{FDD0}\u{E000}\"}";
        let res = Response::from_ok(Id::Number(1), Value::Null);
        let mut got = Vec::new();
        write_frame(
            &mut got,
            response_body(res, Some(text.as_bytes().to_vec()), None).unwrap(),
        )
        .unwrap();
        let got = String::from_utf8(got).unwrap();
        assert!(
            got.ends_with(&format!("\"result\":{text},\"id\":1}}")),
            "{got}"
        );
    }

    /// A handler's [`Raw`] result lands in its own request's slot; outside a request's handling
    /// it is parsed into the value it stands for.
    #[tokio::test]
    async fn a_raw_result_goes_to_its_own_request() {
        let slot = RawSlot::default();
        let other = RawSlot::default();
        let marker = RESULT
            .scope(slot.clone(), async {
                raw_result(Raw::new(b"[1,2]".to_vec()))
            })
            .await;
        assert_eq!(marker, Value::Null);
        assert_eq!(slot.lock().unwrap().take(), Some(b"[1,2]".to_vec()));
        assert_eq!(other.lock().unwrap().take(), None);
        assert_eq!(
            raw_result(Raw::new(b"[3]".to_vec())),
            serde_json::json!([3])
        );
    }

    #[test]
    fn classifies_bodies() {
        assert!(matches!(classify(b"{"), Incoming::Reject(_)));
        assert!(matches!(classify(b"[]"), Incoming::Reject(_)));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":1,"method":"x"}"#),
            Incoming::Request(..)
        ));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":1,"result":null}"#),
            Incoming::Response(_)
        ));
    }

    #[test]
    fn initialize_without_capabilities_gets_empty_ones() {
        for body in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":null}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"initializationOptions":{"roots":["/r"]}}}"#,
        ] {
            let Incoming::Request(req, _) = classify(body) else {
                panic!("not a request: {}", String::from_utf8_lossy(body));
            };
            let params = req.params().cloned().unwrap_or(Value::Null);
            assert_eq!(params["capabilities"], json!({}), "{params}");
        }
        let Incoming::Request(req, _) = classify(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"x":1}}}"#,
        ) else {
            panic!("not a request");
        };
        assert_eq!(
            req.params().cloned().unwrap_or(Value::Null)["capabilities"],
            json!({"x": 1})
        );
    }
}
