//! The daemon, `sessiond serve`: JSON-RPC 2.0 over stdio with LSP framing and lifecycle,
//! built on `tower-lsp-server`. The only module that knows JSON-RPC.
//!
//! * [`METHODS`] / [`NOTIFICATIONS`] and the registration chain come from one table
//!   (`method_table!`); `protocol/README.md` and `protocol/schema/` must agree with it
//!   (a test checks).
//! * [`wire`] holds params, results and notifications, [`convert`] turns core, storage and
//!   session types into them (the CLI's `--json` output uses the same shapes), [`context_json`]
//!   is the context document of `session/contextAt` and `sessiond context --json`,
//!   [`error`] assigns every error code in one function, [`handlers`] implements the reading
//!   methods and [`write_handlers`] the writing ones, [`transport`] frames messages on
//!   stdin/stdout, which [`stdio`] puts on the runtime's reactor when they are pipes or
//!   sockets.
//! * Handlers resolve the path against the roots, then send one command to the session's
//!   owner and await its reply; they never touch a tree themselves.

pub mod error;
pub mod export_pages;
pub mod handlers;
pub mod lossless;
pub mod notify;
pub mod params;
pub mod parent;
pub mod stdio;
pub mod transport;
pub mod write_handlers;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tower_lsp_server::jsonrpc::Result as RpcResult;
use tower_lsp_server::ls_types::{
    InitializeParams, InitializeResult, InitializedParams, ServerCapabilities, ServerInfo,
};
use tower_lsp_server::{Client, LanguageServer, LspService, LspServiceBuilder};

use crate::core::diagnostics::Corruption;
use crate::core::tree::NodeIdx;
use crate::server::notify::Outgoing;
use crate::session::owner::{EventSink, ReloadReason, Session};
use crate::session::roots::Roots;
use crate::session::{Current, Registry};
use crate::storage::publish::Reservations;
use crate::watch::WatchBackend;
use error::RpcError;

/// The version of the `session/` protocol, advertised in `initialize`.
pub const PROTOCOL_VERSION: &str = "0.2.0";

/// Declares the request methods once: the [`METHODS`] list and their registration.
macro_rules! method_table {
    ($($name:literal => $handler:path),* $(,)?) => {
        /// Every request method the server answers, as advertised in `initialize`.
        pub const METHODS: &[&str] = &[$($name),*];

        fn register(builder: LspServiceBuilder<Backend>) -> LspServiceBuilder<Backend> {
            builder $(.custom_method($name, $handler))*
        }
    };
}

method_table! {
    "session/open" => Backend::open,
    "session/close" => Backend::close,
    "session/tree" => Backend::tree,
    "session/entry" => Backend::entry,
    "session/contextAt" => Backend::context_at,
    "session/explain" => Backend::explain,
    "session/compareBranches" => Backend::compare_branches,
    "session/graph" => Backend::graph,
    "session/list" => Backend::list,
    "session/verifyResume" => Backend::verify_resume,
    "session/export" => Backend::export,
    "session/search" => Backend::search,
    "session/fork" => Backend::fork,
    "session/salvage" => Backend::salvage,
    "session/label" => Backend::label,
    "session/setName" => Backend::set_name,
    "session/branch" => Backend::branch,
    "session/append" => Backend::append,
    "session/prepareCompaction" => Backend::prepare_compaction,
    "session/compact" => Backend::compact,
    "session/rewind" => Backend::rewind,
}

/// Every notification the server sends.
pub const NOTIFICATIONS: &[&str] = &[
    <notify::DidChange as tower_lsp_server::ls_types::notification::Notification>::METHOD,
    <notify::DidReload as tower_lsp_server::ls_types::notification::Notification>::METHOD,
    <notify::DidCorrupt as tower_lsp_server::ls_types::notification::Notification>::METHOD,
    <notify::FileMissing as tower_lsp_server::ls_types::notification::Notification>::METHOD,
    <notify::FileRestored as tower_lsp_server::ls_types::notification::Notification>::METHOD,
    <notify::DidChangeLiveMode as tower_lsp_server::ls_types::notification::Notification>::METHOD,
    <notify::DidCreate as tower_lsp_server::ls_types::notification::Notification>::METHOD,
    <notify::DidChangeList as tower_lsp_server::ls_types::notification::Notification>::METHOD,
];

/// Notifications the server sends outside `session/`: LSP work-done progress (`session/list`
/// with a `workDoneToken`). Documented and given a schema like the `session/` ones.
pub const LSP_NOTIFICATIONS: &[&str] = &["$/progress"];

/// How `sessiond serve` was started.
#[derive(Clone, Debug, Default)]
pub struct ServeOptions {
    /// `--root` directories.
    pub roots: Vec<PathBuf>,
    /// `--index-dir`: the search index (default [`crate::search::default_dir`]).
    pub index_dir: Option<PathBuf>,
    /// `--archive`: archive the sessions under the roots there, continuously.
    pub archive: Option<PathBuf>,
}

/// The server state shared by all handlers.
pub struct Backend {
    client: Client,
    cli_roots: Vec<PathBuf>,
    roots: RwLock<Roots>,
    /// Set while a root does not exist: each request looks again (one `stat` per missing
    /// root) and resolves the roots again once one appears.
    awaited_roots: Mutex<Option<AwaitedRoots>>,
    registry: Registry,
    /// New session files being created (fork, salvage), shared by every session.
    reservations: Arc<Reservations>,
    shut_down: Arc<AtomicBool>,
    /// The search index directory.
    index_dir: PathBuf,
    /// The search index, opened by the first `session/search`; updated and queried on the
    /// blocking pool, one request at a time.
    search: Arc<Mutex<Option<crate::search::SearchIndex>>>,
    /// Keeps `search` fresh from file-system events under the roots.
    search_live: Arc<crate::search_live::Freshness>,
    /// The archive's view for `session/search` when the daemon archives, kept across
    /// searches so that each reads only the manifests replaced since the last.
    archive_view: Arc<Mutex<Option<crate::archive::view::ViewSync>>>,
    /// `session/list`'s cache of listed sessions ([`crate::listing`]), loaded from
    /// `list_cache_file` by the first listing and saved after each listing that changed it.
    list_cache: Arc<Mutex<Option<crate::listing::ListCache>>>,
    /// Where the listing cache is kept.
    list_cache_file: PathBuf,
    /// Pushes changes of the listing once the client has listed (`session/didChangeList`).
    list_feed: Arc<crate::listing_live::ListFeed>,
    /// `--archive`, which `initializationOptions.archive` overrides.
    cli_archive: Option<PathBuf>,
    /// The continuous archive, when one was asked for ([`crate::archive::live`]).
    archiver: Mutex<Option<crate::archive::live::Archiver>>,
    /// Notified when the process `initialize.processId` named has ended ([`parent`]).
    parent_gone: Arc<tokio::sync::Notify>,
    /// The `session/export` document whose later pages are being asked for.
    export_pages: Arc<export_pages::Kept>,
}

/// Roots that did not exist when they were configured.
struct AwaitedRoots {
    /// Every root as configured, to resolve again.
    configured: Vec<PathBuf>,
    /// The missing ones, as resolved so far (absolute).
    missing: Vec<PathBuf>,
}

/// What [`NotifySink`] queues for [`forward_notifications`].
// Nearly everything queued is a notification; boxing it would cost an allocation per event.
#[allow(clippy::large_enum_variant)]
enum Queued {
    /// A notification for the client, with the open it comes from (path and
    /// [`Session::open_seq`]) when a session sent it: dropped unless that open is still the
    /// path's current one when its turn comes.
    Note(Outgoing, Option<(PathBuf, u64)>),
    /// Answered once everything queued before it was handed to the client.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

/// Turns session events into notifications on a channel (sent by [`forward_notifications`]).
struct NotifySink {
    tx: mpsc::UnboundedSender<Queued>,
}

impl NotifySink {
    /// Queues `n`, sent by `session`.
    fn send(&self, session: &Session, n: Outgoing) {
        let from = (session.path().to_owned(), session.open_seq());
        let _ = self.tx.send(Queued::Note(n, Some(from)));
    }
}

impl EventSink for NotifySink {
    fn appended(&self, session: &Session, added: std::ops::Range<NodeIdx>) {
        self.send(
            session,
            Outgoing::DidChange(notify::did_change(session, added)),
        );
    }
    fn reloaded(&self, session: &Session, reason: ReloadReason) {
        self.send(
            session,
            Outgoing::DidReload(notify::did_reload(session, reason)),
        );
    }
    fn corrupt(&self, session: &Session, corruption: &Corruption) {
        self.send(
            session,
            Outgoing::DidCorrupt(notify::did_corrupt(session, corruption)),
        );
    }
    fn missing(&self, session: &Session) {
        self.send(
            session,
            Outgoing::FileMissing(notify::file_missing(session)),
        );
    }
    fn restored(&self, session: &Session) {
        self.send(
            session,
            Outgoing::FileRestored(notify::file_restored(session)),
        );
    }
    fn live_mode_changed(&self, session: &Session) {
        self.send(
            session,
            Outgoing::DidChangeLiveMode(notify::did_change_live_mode(session)),
        );
    }
    fn created(&self, created: &crate::session::births::Created) {
        let n = Outgoing::DidCreate(notify::did_create(created));
        let _ = self.tx.send(Queued::Note(n, None));
    }
    fn barrier(&self) -> futures::future::BoxFuture<'static, ()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let _ = self.tx.send(Queued::Barrier(tx));
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

/// Sends the queued notifications in order; each is in the transport's outgoing stream (ahead
/// of any answer produced later) before the next is taken. A session's notification goes only
/// if its open is still the path's current one ([`Current`]): a client never hears of a session
/// after it asked to close it, nor of an earlier open of a path it opened again.
async fn forward_notifications(
    client: Client,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    current: Current,
) {
    while let Some(queued) = rx.recv().await {
        let n = match queued {
            Queued::Note(n, None) => n,
            Queued::Note(n, Some((path, open_seq))) => {
                if !current.is_current(&path, open_seq) {
                    tracing::debug!(
                        path = %path.display(),
                        open_seq,
                        "dropped a notification of a closed or earlier open"
                    );
                    continue;
                }
                n
            }
            Queued::Barrier(done) => {
                let _ = done.send(());
                continue;
            }
        };
        match n {
            Outgoing::DidChange(p) => {
                client.send_notification::<notify::DidChange>(p).await;
            }
            Outgoing::DidReload(p) => {
                client.send_notification::<notify::DidReload>(p).await;
            }
            Outgoing::DidCorrupt(p) => {
                client.send_notification::<notify::DidCorrupt>(p).await;
            }
            Outgoing::FileMissing(p) => {
                client.send_notification::<notify::FileMissing>(p).await;
            }
            Outgoing::FileRestored(p) => {
                client.send_notification::<notify::FileRestored>(p).await;
            }
            Outgoing::DidChangeLiveMode(p) => {
                client
                    .send_notification::<notify::DidChangeLiveMode>(p)
                    .await;
            }
            Outgoing::DidCreate(p) => {
                client.send_notification::<notify::DidCreate>(p).await;
            }
            Outgoing::DidChangeList(p) => {
                client.send_notification::<notify::DidChangeList>(p).await;
            }
        }
    }
}

impl Backend {
    fn roots(&self) -> Roots {
        self.resolve_awaited_roots();
        self.roots
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Once a root that did not exist at `initialize` exists, resolves the roots again (its
    /// canonical path may differ from the configured one, through a symlinked ancestor).
    fn resolve_awaited_roots(&self) {
        let mut awaited = self
            .awaited_roots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(wait) = awaited.as_mut() else {
            return;
        };
        if !wait.missing.iter().any(|d| d.is_dir()) {
            return;
        }
        let roots = Roots::new(wait.configured.iter().cloned());
        for d in &wait.missing {
            if d.is_dir() {
                tracing::info!("session root {} exists now", d.display());
            }
        }
        wait.missing.retain(|d| !d.is_dir());
        if wait.missing.is_empty() {
            *awaited = None;
        }
        *self.roots.write().unwrap_or_else(PoisonError::into_inner) = roots;
    }
}

/// The `roots` of `initializationOptions`: absent or `null` options, or options without
/// `roots`, give none. Errors (refused with -32602, and the server stays uninitialized): options
/// that are not an object, `roots` that is not an array of non-empty strings.
fn initialization_roots(options: Option<&Value>) -> Result<Vec<PathBuf>, String> {
    let roots = match options {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(o)) => match o.get("roots") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(r) => r,
        },
        Some(_) => return Err("initializationOptions must be an object".into()),
    };
    let Value::Array(items) = roots else {
        return Err("initializationOptions.roots must be an array of directory paths".into());
    };
    items
        .iter()
        .map(|r| match r {
            Value::String(s) if !s.is_empty() => Ok(PathBuf::from(s)),
            other => Err(format!(
                "initializationOptions.roots: {other} is not a directory path"
            )),
        })
        .collect()
}

impl Backend {
    /// The archive the daemon keeps, when it keeps one.
    pub(crate) fn archive_dir(&self) -> Option<PathBuf> {
        self.archiver
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|a| a.dir().to_owned())
    }

    /// Starts the continuous archive of `roots` when `initializationOptions.archive` (a
    /// directory path) or `--archive` names one. Errors (-32602): an `archive` that is not a
    /// string, or a directory that is not an archive and not empty.
    fn start_archive(&self, options: Option<&Value>, roots: &[PathBuf]) -> Result<(), RpcError> {
        let refused = |detail: String| RpcError::InvalidParams {
            method: "initialize",
            detail,
        };
        let dir = match options.and_then(|o| o.get("archive")) {
            None | Some(Value::Null) => self.cli_archive.clone(),
            Some(Value::String(s)) if !s.is_empty() => Some(PathBuf::from(s)),
            Some(other) => {
                return Err(refused(format!(
                    "initializationOptions.archive: {other} is not a directory path"
                )));
            }
        };
        let Some(dir) = dir else {
            return Ok(());
        };
        let archiver = crate::archive::live::Archiver::start(&dir, roots.to_vec())
            .map_err(|e| refused(format!("initializationOptions.archive: {e}")))?;
        tracing::info!(archive = %dir.display(), "archiving the sessions under the roots");
        *self.archiver.lock().unwrap_or_else(PoisonError::into_inner) = Some(archiver);
        Ok(())
    }
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> RpcResult<InitializeResult> {
        let mut dirs =
            initialization_roots(params.initialization_options.as_ref()).map_err(|detail| {
                RpcError::InvalidParams {
                    method: "initialize",
                    detail,
                }
            })?;
        dirs.extend(self.cli_roots.iter().cloned());
        if dirs.is_empty() {
            dirs = Roots::default_dirs();
        }
        let roots = Roots::new(dirs.iter().cloned());
        tracing::info!(roots = ?roots.dirs(), "initialize");
        let missing: Vec<PathBuf> = roots
            .dirs()
            .iter()
            .filter(|d| !d.is_dir())
            .cloned()
            .collect();
        for d in &missing {
            tracing::warn!(
                "session root {} does not exist; its sessions are found once it is created",
                d.display()
            );
        }
        *self
            .awaited_roots
            .lock()
            .unwrap_or_else(PoisonError::into_inner) =
            (!missing.is_empty()).then_some(AwaitedRoots {
                configured: dirs,
                missing,
            });
        *self.roots.write().unwrap_or_else(PoisonError::into_inner) = roots.clone();
        self.start_archive(params.initialization_options.as_ref(), roots.dirs())?;
        if let Some(pid) = params.process_id {
            parent::follow(pid, self.parent_gone.clone());
        }
        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                experimental: Some(json!({
                    "sessiond": {
                        "protocolVersion": PROTOCOL_VERSION,
                        "methods": METHODS,
                        "notifications": NOTIFICATIONS,
                        "roots": roots.dirs(),
                    }
                })),
                ..ServerCapabilities::default()
            },
            server_info: Some(ServerInfo {
                name: "sessiond".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            offset_encoding: None,
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        tracing::debug!("initialized");
    }

    async fn shutdown(&self) -> RpcResult<()> {
        self.shut_down.store(true, Ordering::SeqCst);
        self.registry.close_all().await;
        Ok(())
    }
}

/// Runs the daemon on stdin/stdout until `exit` or end of input. Returns the process exit
/// code: 0 when `shutdown` came before the end, 1 otherwise (as LSP asks).
pub fn serve(options: ServeOptions) -> std::process::ExitCode {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        // A person who started the daemon by hand: say what it expects (stdout is the
        // protocol's, so this goes to stderr).
        eprintln!(
            "sessiond serve: a JSON-RPC 2.0 daemon with LSP framing (Content-Length headers) on \
             stdin and stdout, for editors and agent front-ends; it answers nothing typed here. \
             Try `python3 scripts/rpc.py --root DIR METHOD PARAMS` from the repository, or read \
             protocol/README.md. \
             Roots: --root DIR or initializationOptions.roots (default: pi's sessions directory, \
             Claude Code's projects directory and Codex's sessions directory). Ctrl-D ends it."
        );
    }
    // One worker: a small request then wakes no sibling worker (on a 2-vCPU machine a fifth
    // of its round trip); a session's long work leaves it through `block_in_place` (see
    // `session::owner::Cost`), and opens and searches run on the blocking pool.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let shut_down = Arc::new(AtomicBool::new(false));
    let watch = WatchBackend::from_env();
    let parent_gone = Arc::new(tokio::sync::Notify::new());
    let stop = parent_gone.clone();
    runtime.block_on(async {
        let (tx, rx) = mpsc::unbounded_channel();
        let list_tx = tx.clone();
        let sink = Arc::new(NotifySink { tx });
        let flush_sink = sink.clone();
        let flag = shut_down.clone();
        let registry = Registry::with_backend(sink, watch);
        let current = registry.current();
        let builder = LspService::build(move |client| {
            tokio::spawn(forward_notifications(client.clone(), rx, current));
            let search = Arc::new(Mutex::new(None));
            let list_cache = Arc::new(Mutex::new(None));
            let list_cache_file = crate::listing::default_cache_file();
            let list_feed = crate::listing_live::ListFeed::start(
                list_cache.clone(),
                list_cache_file.clone(),
                Box::new(move |change| {
                    let _ = list_tx.send(Queued::Note(
                        Outgoing::DidChangeList(notify::did_change_list(change)),
                        None,
                    ));
                }),
            );
            Backend {
                client,
                cli_roots: options.roots.clone(),
                roots: RwLock::new(Roots::new(Vec::new())),
                awaited_roots: Mutex::new(None),
                registry,
                reservations: Arc::new(Reservations::new()),
                shut_down: flag,
                index_dir: options
                    .index_dir
                    .clone()
                    .unwrap_or_else(crate::search::default_dir),
                search: search.clone(),
                search_live: crate::search_live::Freshness::new(search.clone()),
                archive_view: Arc::new(Mutex::new(None)),
                list_cache,
                list_cache_file,
                list_feed,
                cli_archive: options.archive.clone(),
                archiver: Mutex::new(None),
                parent_gone: parent_gone.clone(),
                export_pages: Arc::default(),
            }
        });
        let (service, socket) = register(builder).finish();
        // On a worker, not on this thread: reading, answering and writing then share one thread.
        let (input, output) = stdio::ends();
        let flush = move || flush_sink.barrier();
        let stop = async move { stop.notified().await };
        let served = tokio::spawn(transport::run(input, output, service, socket, flush, stop));
        if let Err(e) = served.await {
            tracing::error!("the transport stopped: {e}");
        }
    });
    // Owner and watcher threads end with the process.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    if shut_down.load(Ordering::SeqCst) {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    }
}

#[cfg(test)]
mod protocol_agreement {
    //! `protocol/` and the method table must agree: every method and notification has a
    //! section in the README and its schemas, and nothing else is documented.

    use std::collections::BTreeSet;
    use std::path::PathBuf;

    use super::{LSP_NOTIFICATIONS, METHODS, NOTIFICATIONS};

    fn protocol_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("protocol")
    }

    #[test]
    fn readme_lists_exactly_the_methods_and_notifications() {
        let readme = std::fs::read_to_string(protocol_dir().join("README.md")).unwrap();
        let documented: BTreeSet<&str> = readme
            .lines()
            .filter_map(|l| l.strip_prefix("### `"))
            .filter_map(|l| l.strip_suffix('`'))
            .collect();
        let served: BTreeSet<&str> = METHODS
            .iter()
            .chain(NOTIFICATIONS)
            .chain(LSP_NOTIFICATIONS)
            .chain(&["initialize"])
            .copied()
            .collect();
        assert_eq!(documented, served);
        assert!(readme.contains(&format!(
            "Protocol version: **{}**",
            super::PROTOCOL_VERSION
        )));
    }

    #[test]
    fn readme_and_error_schema_list_exactly_the_error_codes() {
        let readme = std::fs::read_to_string(protocol_dir().join("README.md")).unwrap();
        // Rows of the error table: `| -33001 | file not found | ...`.
        let documented: Vec<i64> = readme
            .lines()
            .filter_map(|l| l.strip_prefix("| "))
            .filter_map(|l| l.split(" |").next())
            .filter_map(|c| c.trim().parse().ok())
            .collect();
        assert_eq!(documented, super::error::CODES);
        let text = std::fs::read_to_string(protocol_dir().join("schema/error.json")).unwrap();
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        let in_schema: Vec<i64> = schema["properties"]["code"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["const"].as_i64().unwrap())
            .collect();
        assert_eq!(in_schema, super::error::CODES);
    }

    #[test]
    fn schema_files_are_exactly_one_params_and_result_per_method() {
        let mut want: BTreeSet<String> = BTreeSet::new();
        for m in METHODS {
            let base = m.replace('/', ".");
            want.insert(format!("{base}.params.json"));
            want.insert(format!("{base}.result.json"));
        }
        for n in NOTIFICATIONS.iter().chain(LSP_NOTIFICATIONS) {
            want.insert(format!("{}.params.json", n.replace('/', ".")));
        }
        want.insert("initialize.params.json".into());
        want.insert("initialize.result.json".into());
        want.insert("error.json".into());
        let have: BTreeSet<String> = std::fs::read_dir(protocol_dir().join("schema"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(have, want);
        for f in &have {
            let text = std::fs::read_to_string(protocol_dir().join("schema").join(f)).unwrap();
            let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert!(schema.get("$schema").is_some(), "{f} names its dialect");
        }
    }

    /// The schemas are self-contained (a client can read one file alone), so shared
    /// definitions are repeated in each; a definition must be the same wherever it appears.
    #[test]
    fn shared_definitions_are_the_same_in_every_schema() {
        let mut seen: std::collections::BTreeMap<String, (String, serde_json::Value)> =
            Default::default();
        for e in std::fs::read_dir(protocol_dir().join("schema")).unwrap() {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let schema: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let Some(defs) = schema.get("$defs").and_then(|d| d.as_object()) else {
                continue;
            };
            for (key, def) in defs {
                match seen.get(key) {
                    Some((first, same)) => {
                        assert_eq!(def, same, "$defs/{key} differs in {name} and {first}")
                    }
                    None => {
                        seen.insert(key.clone(), (name.clone(), def.clone()));
                    }
                }
            }
        }
        assert!(seen.contains_key("node") && seen.contains_key("revision"));
    }

    /// The extension's method table is generated from the schemas
    /// (`editors/vscode/scripts/gen-protocol.mjs`, checked fresh by its `npm test`), so it
    /// names exactly the served methods and notifications.
    #[test]
    fn the_vscode_extension_names_exactly_the_served_methods() {
        let ts = std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("editors/vscode/src/protocol.generated.ts"),
        )
        .unwrap();
        let used: BTreeSet<&str> = ts
            .split('\'')
            .filter(|s| (s.starts_with("session/") || s.starts_with("$/")) && !s.contains(' '))
            .collect();
        let served: BTreeSet<&str> = METHODS
            .iter()
            .chain(NOTIFICATIONS)
            .chain(LSP_NOTIFICATIONS)
            .copied()
            .collect();
        assert_eq!(used, served);
    }

    #[test]
    fn the_neovim_plugin_uses_only_served_names() {
        /// Methods the plugin calls only when `initialize` lists them (not served yet).
        const OFFERED_LATER: &[&str] = &[];
        /// Notifications the plugin does not handle yet (a client may ignore a notification).
        const HANDLED_LATER: &[&str] = &[];
        fn lua_files(dir: &std::path::Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    lua_files(&p, out);
                } else if p.extension().is_some_and(|x| x == "lua") {
                    out.push(std::fs::read_to_string(&p).unwrap());
                }
            }
        }
        let mut sources = Vec::new();
        lua_files(
            &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("editors/neovim"),
            &mut sources,
        );
        assert!(sources.len() > 3, "the plugin's Lua files were not found");
        let used: BTreeSet<&str> = sources
            .iter()
            .flat_map(|lua| lua.split('"'))
            .filter(|s| s.starts_with("session/") && !s.contains(' '))
            .filter(|s| !OFFERED_LATER.contains(s))
            .collect();
        let served: BTreeSet<&str> = METHODS.iter().chain(NOTIFICATIONS).copied().collect();
        assert!(
            used.is_subset(&served),
            "unknown: {:?}",
            used.difference(&served)
        );
        for n in NOTIFICATIONS.iter().filter(|n| !HANDLED_LATER.contains(n)) {
            assert!(used.contains(n), "the plugin has no handler for {n}");
        }
    }
}
