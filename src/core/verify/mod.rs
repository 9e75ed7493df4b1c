//! Resume verification, for every dialect: what the session at a leaf believes about the world,
//! checked against what the world is now. Pure: the world is asked through the [`World`] trait
//! (implemented with real files, `git`, `PATH` and the environment by `crate::verify`); the
//! session's side comes from its dialect, already read ([`Collected`]): its tool calls on the
//! path to the leaf and on other branches, each as an [`Action`] (a write, an edit with the
//! dialect's rule for applying it, a read, a shell command), their results, the newest summary's
//! claims, and the dialect's credential check. Nothing here does I/O or runs anything.
//!
//! `dialect::pi::verify` reads pi's `edit`, `write`, `read` and `bash` calls;
//! `dialect::claude::verify` reads Claude Code's `Write`, `Edit`, `MultiEdit`, `Read` and `Bash`.
//! Tool paths are resolved as pi's tools resolve them ([`resolve_path`]), which also takes the
//! absolute paths Claude Code's tools require as they are.

pub mod shell;

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Files above this size are hashed (streamed) but not held as text: edits on them are
/// checked by hash only.
pub const MAX_TEXT_BYTES: u64 = 4 * 1024 * 1024;

/// How much a finding needs attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    /// As the session believes.
    Ok,
    /// Worth a look before resuming (the world moved on, or the session left it uncertain).
    Warn,
    /// The session's belief is contradicted, or the resume cannot work as is.
    Fail,
}

/// What a finding is about (camelCase on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    /// The working directory.
    Cwd,
    /// The git work tree.
    Git,
    /// A file's last effect on the path, as on disk now.
    FileEffect,
    /// A file changed after the session's last effect on it.
    ChangedSince,
    /// A file the session wrote or edited is gone.
    MissingFile,
    /// A tool call that failed (`isError`).
    FailedTool,
    /// A tool call without a result.
    Interrupted,
    /// A file as an edit or write on another branch left it.
    OtherBranchEffect,
    /// A whole-file read whose file differs now.
    StaleRead,
    /// A path the newest summary lists as modified.
    SummaryClaim,
    /// A process a bash call started.
    Process,
    /// Programs the bash calls ran.
    Tool,
    /// The model provider's credential.
    Credentials,
}

/// One finding.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// `ok`, `warn` or `fail`.
    pub status: Status,
    /// What it is about.
    pub kind: Kind,
    /// One sentence.
    pub message: String,
    /// The entry it comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    /// The tool call it comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The file path involved (absolute).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What was compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Value>,
}

/// Findings per status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// `ok` findings.
    pub ok: usize,
    /// `warn` findings.
    pub warn: usize,
    /// `fail` findings.
    pub fail: usize,
}

/// The verification of one leaf: `{path, leafId, cwd, repository, attention, counts,
/// findings}` (the result of `sessiond verify --json` and `session/verifyResume`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The session file.
    pub path: String,
    /// The leaf verified (`null` for a session without entries).
    pub leaf_id: Option<String>,
    /// The working directory checked (`--cwd`, else the header's; `null` when neither, or
    /// when the header's is relative and so refused).
    pub cwd: Option<String>,
    /// The git repository whose state was read (`null` when none was: no work tree around
    /// the working directory, git unavailable or refusing the directory).
    pub repository: Option<Repository>,
    /// Whether any finding is `warn` or `fail`.
    pub attention: bool,
    /// Findings per status.
    pub counts: Counts,
    /// The findings, in a fixed order: working directory, git, credentials, file effects in
    /// path order, other branches, stale reads, summary claims, processes, programs.
    pub findings: Vec<Finding>,
}

/// The git repository verification read: its work tree and git directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repository {
    /// The work tree's top directory.
    pub work_tree: String,
    /// The git directory (its configuration is the repository's).
    pub git_dir: String,
}

/// A file as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileState {
    /// Nothing at the path.
    Missing,
    /// Something that is not a regular file (a directory, say).
    NotAFile,
    /// It could not be read (the error's text).
    Unreadable(String),
    /// A regular file.
    Present(FileFacts),
}

/// A regular file's size, SHA-256 (hex) and, up to [`MAX_TEXT_BYTES`], its text (decoded as
/// UTF-8 with U+FFFD for invalid bytes, as pi decodes files).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileFacts {
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the bytes, lower-case hex.
    pub sha256: String,
    /// The text, when the file is at most [`MAX_TEXT_BYTES`].
    pub text: Option<String>,
}

/// The git work tree around the working directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GitState {
    /// git could not be run (why).
    Unavailable(String),
    /// The directory is not inside a work tree.
    NotARepo,
    /// Inside a work tree.
    Repo {
        /// The work tree's top directory.
        toplevel: String,
        /// The repository's git directory (absolute).
        git_dir: String,
        /// The current branch (`None`: detached HEAD).
        branch: Option<String>,
        /// HEAD's commit (`None`: no commit yet).
        head: Option<String>,
        /// The asked paths that are modified, added, deleted or untracked.
        dirty_touched: Vec<String>,
        /// How many other paths are dirty.
        dirty_other: usize,
    },
}

/// Whether pi's auth file holds an entry for a provider (never its value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthState {
    /// The auth file's path.
    pub path: String,
    /// Whether it exists.
    pub exists: bool,
    /// Whether it has a key named after the provider.
    pub has_provider: bool,
}

/// The world as verification sees it. Implemented with real I/O by `crate::verify`.
pub trait World {
    /// The home directory, for `~` in tool paths.
    fn home(&self) -> Option<String>;
    /// Whether `path` is an existing directory.
    fn is_dir(&self, path: &str) -> bool;
    /// The file at an absolute path.
    fn file(&self, path: &str) -> FileState;
    /// The work tree around `cwd`, and which of `paths` (absolute) are dirty in it. Executes
    /// nothing the repository's files control (see `crate::verify`).
    fn git(&self, cwd: &str, paths: &[String]) -> GitState;
    /// Whether a program can be run: a name found on `PATH`, or a path (resolved against
    /// `cwd`) to an executable file.
    fn program_exists(&self, program: &str, cwd: &str) -> bool;
    /// Whether an environment variable is set and not empty.
    fn env_set(&self, name: &str) -> bool;
    /// The value of an environment variable that names a directory (`CLAUDE_CONFIG_DIR`);
    /// never asked for one that may hold a credential.
    fn env_path(&self, name: &str) -> Option<String>;
    /// Whether something exists at an absolute path (it is not read).
    fn exists(&self, path: &str) -> bool;
    /// pi's auth file and whether it names `provider`.
    fn auth(&self, provider: &str) -> AuthState;
}

/// What to check.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The working directory to check instead of the header's (`--cwd`).
    pub cwd: Option<String>,
}

/// One replacement of an edit: `old_text` → `new_text` (every occurrence with `replace_all`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replace {
    /// The text to find.
    pub old_text: String,
    /// Its replacement.
    pub new_text: String,
    /// Replace every occurrence (Claude Code's `replace_all`); pi replaces one.
    pub replace_all: bool,
}

/// The content an edit's tool writes for `edits` on a file holding the given text, as the
/// agent's tool applies them; `None` when the tool would refuse the edit.
pub type ApplyEdit = fn(&str, &[Replace]) -> Option<String>;

/// What a tool call does to the world, as its dialect reads its arguments.
#[derive(Clone, Debug)]
pub enum Action {
    /// Writes a whole file.
    Write {
        /// The path as given (`None`: the arguments name none).
        path: Option<String>,
        /// The content (`None`: the arguments are not a write the tool accepts).
        content: Option<String>,
    },
    /// Replaces text in a file.
    Edit {
        /// The path as given.
        path: Option<String>,
        /// The replacements (`None`: the arguments are not an edit the tool accepts).
        edits: Option<Vec<Replace>>,
        /// How the tool applies them.
        apply: ApplyEdit,
    },
    /// Reads a file.
    Read {
        /// The path as given.
        path: Option<String>,
        /// The whole file was read (no offset or limit), so its result is the file's text.
        whole: bool,
    },
    /// Runs a shell command.
    Bash {
        /// The command.
        command: Option<String>,
    },
}

/// A tool call read from the session.
#[derive(Clone, Debug)]
pub struct Call {
    /// The entry holding it.
    pub entry_id: String,
    /// Its tool call id.
    pub id: String,
    /// The tool's name as written (`edit`, `Write`, …), for messages.
    pub name: String,
    /// What it does.
    pub action: Action,
    /// Position on the active path (entry index on the path, block index), or `None` off it.
    pub order: Option<(usize, usize)>,
}

/// A tool result.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The tool failed.
    pub is_error: bool,
    /// Its text (a read's: the file's text).
    pub text: String,
    /// The tool cut its output.
    pub truncated: bool,
    /// It holds an image (a read of an image is no text to compare).
    pub image: bool,
}

/// The session's side: tool calls and results, the newest summary's claims.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The calls on the active path (in path order) and the edits and writes off it.
    pub calls: Vec<Call>,
    /// By tool call id: on-path results for on-path calls.
    pub results_on: HashMap<String, Outcome>,
    /// By tool call id: the other results, for the calls off the path.
    pub results_off: HashMap<String, Outcome>,
    /// The newest summary on the path (its entry) and the paths it says were modified.
    pub summary: Option<(String, Vec<String>)>,
}

/// The credential a resume needs, checked by the dialect (names only, never a value): one
/// finding of kind [`Kind::Credentials`].
#[derive(Clone, Debug)]
pub struct Credential {
    /// The model's provider, when the session names one.
    pub provider: Option<String>,
    /// The check.
    pub check: fn(&dyn World, Option<&str>) -> Finding,
}

/// pi `resolveToCwd` (POSIX): Unicode spaces to spaces, a leading `@` dropped, `~` expanded,
/// then Node's `path.resolve(cwd, path)` (lexical: `.` and `..` folded, no symlinks).
pub fn resolve_path(path: &str, cwd: &str, home: Option<&str>) -> String {
    let mut p: String = path
        .chars()
        .map(|c| match c {
            '\u{A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect();
    if let Some(rest) = p.strip_prefix('@') {
        p = rest.to_owned();
    }
    if let Some(home) = home {
        if p == "~" {
            p = home.to_owned();
        } else if let Some(rest) = p.strip_prefix("~/") {
            p = format!("{}/{rest}", home.trim_end_matches('/'));
        }
    }
    let joined = if p.starts_with('/') {
        p
    } else {
        format!("{cwd}/{p}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in joined.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// What a write of `content` leaves.
fn known(content: &str) -> Expected {
    Expected::Known {
        sha256: sha256_hex(content.as_bytes()),
        size: content.len() as u64,
        text: (content.len() as u64 <= MAX_TEXT_BYTES).then(|| content.to_owned()),
    }
}

/// CRLF, then a lone CR, to LF (pi's `normalizeToLF`; a Claude Code edit is compared the same
/// way).
pub fn normalize_to_lf(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_owned();
    }
    text.replace("\r\n", "\n").replace('\r', "\n")
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A short diff summary of two texts: the first differing line (1-based) and how many lines
/// each side has in the differing middle.
fn diff_summary(expected: &str, actual: &str) -> Value {
    let a: Vec<&str> = expected.split('\n').collect();
    let b: Vec<&str> = actual.split('\n').collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let max_suffix = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    json!({
        "firstChangedLine": prefix + 1,
        "linesRemoved": a.len() - prefix - suffix,
        "linesAdded": b.len() - prefix - suffix,
    })
}

/// "an edit", "a write".
fn article(tool: &str) -> String {
    if tool.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {tool}")
    } else {
        format!("a {tool}")
    }
}

fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    match line.char_indices().nth(160) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

/// What the session last knew of a file's content.
#[derive(Clone, Debug)]
enum Expected {
    /// Exact: its hash, size, and text when small.
    Known {
        sha256: String,
        size: u64,
        text: Option<String>,
    },
    /// Only that these edits were applied.
    Edited(Vec<Replace>),
}

/// Whether an edit is visible in `text`: each `newText` present where its `oldText` was
/// (the `oldText` gone unless the `newText` contains it).
fn edit_applied(text: &str, edits: &[Replace]) -> bool {
    let content = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let content = normalize_to_lf(content);
    edits.iter().all(|e| {
        let new = normalize_to_lf(&e.new_text);
        let old = normalize_to_lf(&e.old_text);
        (new.is_empty() || content.contains(&new))
            && (new.contains(&old) || !content.contains(&old))
    })
}

/// Compares an expectation with a file: `Some(true)` reflected, `Some(false)` not, `None`
/// cannot tell (too large to hold as text).
fn reflected(exp: &Expected, f: &FileFacts) -> Option<bool> {
    match exp {
        Expected::Known { sha256, .. } => Some(*sha256 == f.sha256),
        Expected::Edited(edits) => f.text.as_deref().map(|t| edit_applied(t, edits)),
    }
}

struct Ctx<'a> {
    world: &'a dyn World,
    cwd: String,
    home: Option<String>,
    files: HashMap<String, FileState>,
    findings: Vec<Finding>,
}

impl Ctx<'_> {
    fn file(&mut self, path: &str) -> FileState {
        if let Some(f) = self.files.get(path) {
            return f.clone();
        }
        let f = self.world.file(path);
        self.files.insert(path.to_owned(), f.clone());
        f
    }
    fn resolve(&self, p: &str) -> String {
        resolve_path(p, &self.cwd, self.home.as_deref())
    }
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        status: Status,
        kind: Kind,
        message: String,
        entry_id: Option<&str>,
        tool_call_id: Option<&str>,
        path: Option<&str>,
        evidence: Option<Value>,
    ) {
        self.findings.push(Finding {
            status,
            kind,
            message,
            entry_id: entry_id.map(str::to_owned),
            tool_call_id: tool_call_id.map(str::to_owned),
            path: path.map(str::to_owned),
            evidence,
        });
    }
}

/// The effects on one file along the active path.
struct PathEffects {
    path: String,
    expected: Option<Expected>,
    last_done: Option<usize>,
    /// Indices into the calls of failed and interrupted effects.
    failed: Vec<usize>,
    interrupted: Vec<usize>,
    /// Position of the last effect (done or not), to tell stale reads.
    last_order: (usize, usize),
}

/// What verification needs from the session, read by its dialect from its tree and lines;
/// owned, so it can be checked against the world elsewhere ([`evaluate`]).
#[derive(Clone, Debug)]
pub struct Collected {
    /// Tool calls, results, the summary's claims.
    pub facts: Facts,
    /// The working directory the session names (pi's header `cwd`, a Claude Code line's).
    pub session_cwd: Option<String>,
    /// The leaf verified.
    pub leaf_id: Option<String>,
    /// The credential check.
    pub credential: Credential,
}

/// The tool calls among a message's content `blocks`: each block of type `ty` (pi's
/// `toolCall`, Claude Code's `tool_use`) with a string `id` and `name`, with its position
/// among all the blocks.
pub fn tool_call_blocks<'v>(
    blocks: impl IntoIterator<Item = &'v Value>,
    ty: &'v str,
) -> impl Iterator<Item = (usize, &'v Value, &'v str, &'v str)> {
    blocks
        .into_iter()
        .enumerate()
        .filter_map(move |(b, block)| {
            if block.get("type").and_then(Value::as_str) != Some(ty) {
                return None;
            }
            let id = block.get("id").and_then(Value::as_str)?;
            let name = block.get("name").and_then(Value::as_str)?;
            Some((b, block, id, name))
        })
}

/// Where an agent finds its credential, for a presence check ([`credential_presence`]): some
/// environment variables, or one file in its configuration directory.
pub struct CredentialPlaces<'a> {
    /// The agent, as messages name it (`Claude Code`).
    pub agent: &'a str,
    /// The variables looked at (any one set is a credential), as the evidence lists them.
    pub vars: &'a [&'a str],
    /// The variables a warning names (those holding a key itself).
    pub key_vars: &'a [&'a str],
    /// The variable that moves the configuration directory (`CLAUDE_CONFIG_DIR`).
    pub dir_var: &'a str,
    /// The directory's name under the home directory otherwise (`.claude`).
    pub home_dir: &'a str,
    /// The credentials file's name in that directory.
    pub file: &'a str,
    /// How a warning names the file when there is no directory to name it by.
    pub file_words: &'a str,
    /// What is not looked at, said in the warning's parenthesis.
    pub unchecked: &'a str,
}

/// An agent's credential, by presence only: one of `places.vars` set, or its credentials
/// file existing; none found is a warning (other places are not looked at), not a failure.
pub fn credential_presence(world: &dyn World, places: &CredentialPlaces<'_>) -> Finding {
    let set: Vec<&str> = places
        .vars
        .iter()
        .copied()
        .filter(|n| world.env_set(n))
        .collect();
    let dir = world.env_path(places.dir_var).or_else(|| {
        world
            .home()
            .map(|h| format!("{}/{}", h.trim_end_matches('/'), places.home_dir))
    });
    let file = dir.map(|d| format!("{}/{}", d.trim_end_matches('/'), places.file));
    let file_exists = file.as_deref().is_some_and(|f| world.exists(f));
    let evidence = json!({
        "envVars": places.vars,
        "envVarsSet": set,
        "credentialsFile": file,
        "credentialsFileExists": file_exists,
    });
    let agent = places.agent;
    let (status, message) = match (set.is_empty(), file_exists) {
        (false, _) => (
            Status::Ok,
            format!(
                "A credential for {agent} is configured ({})",
                set.join(", ")
            ),
        ),
        (true, true) => (
            Status::Ok,
            format!(
                "A credential for {agent} is configured ({})",
                file.as_deref().unwrap_or_default()
            ),
        ),
        (true, false) => (
            Status::Warn,
            format!(
                "No credential for {agent} was found: none of {} is set and {} does not exist ({})",
                places.key_vars.join(", "),
                file.as_deref().unwrap_or(places.file_words),
                places.unchecked
            ),
        ),
    };
    finding(status, Kind::Credentials, message, Some(evidence))
}

/// A finding (for the dialects' credential checks).
pub fn finding(status: Status, kind: Kind, message: String, evidence: Option<Value>) -> Finding {
    Finding {
        status,
        kind,
        message,
        entry_id: None,
        tool_call_id: None,
        path: None,
        evidence,
    }
}

/// Checks what a dialect collected against `world`: the [`Report`].
pub fn evaluate(collected: Collected, world: &dyn World, file: &str, options: &Options) -> Report {
    let Collected {
        facts,
        session_cwd: header_cwd,
        leaf_id,
        credential,
    } = collected;
    let named = options.cwd.clone().or_else(|| header_cwd.clone());
    // A relative directory would be taken against sessiond's own working directory, which
    // the session knows nothing of (and which may hold a repository of its own): refused.
    let relative = named
        .clone()
        .filter(|d| !std::path::Path::new(d).is_absolute());
    let cwd = named.filter(|_| relative.is_none());
    let mut ctx = Ctx {
        world,
        cwd: cwd.clone().unwrap_or_else(|| "/".to_owned()),
        home: world.home(),
        files: HashMap::new(),
        findings: Vec::new(),
    };

    // Working directory.
    let cwd_ok = match &cwd {
        None if relative.is_some() => {
            let dir = relative.as_deref().unwrap_or_default();
            ctx.push(
                Status::Fail,
                Kind::Cwd,
                format!(
                    "The working directory {dir} is relative: refused, not taken against sessiond's own directory; relative paths are resolved against /"
                ),
                None,
                None,
                Some(dir),
                None,
            );
            false
        }
        None => {
            ctx.push(
                Status::Warn,
                Kind::Cwd,
                "The session header names no working directory; relative paths are resolved against /".into(),
                None,
                None,
                None,
                None,
            );
            false
        }
        Some(dir) => {
            let ok = world.is_dir(dir);
            if ok {
                ctx.push(
                    Status::Ok,
                    Kind::Cwd,
                    format!("The working directory {dir} exists"),
                    None,
                    None,
                    Some(dir),
                    None,
                );
            } else {
                ctx.push(
                    Status::Fail,
                    Kind::Cwd,
                    format!("The working directory {dir} does not exist or is not a directory"),
                    None,
                    None,
                    Some(dir),
                    None,
                );
            }
            ok
        }
    };
    if let (Some(over), Some(h)) = (&options.cwd, &header_cwd)
        && over != h
    {
        ctx.push(
            Status::Warn,
            Kind::Cwd,
            format!("Checking {over}, not the session's working directory {h}"),
            None,
            None,
            Some(over),
            Some(json!({"sessionCwd": h, "checkedCwd": over})),
        );
    }

    // The file effects on the active path.
    let mut effects: Vec<PathEffects> = Vec::new();
    let mut by_path: HashMap<String, usize> = HashMap::new();
    for (i, call) in facts.calls.iter().enumerate() {
        let Some(order) = call.order else { continue };
        let target = match &call.action {
            Action::Write { path, .. } | Action::Edit { path, .. } => path.clone(),
            _ => continue,
        };
        let Some(target) = target else { continue };
        let abs = ctx.resolve(&target);
        let slot = *by_path.entry(abs.clone()).or_insert_with(|| {
            effects.push(PathEffects {
                path: abs.clone(),
                expected: None,
                last_done: None,
                failed: Vec::new(),
                interrupted: Vec::new(),
                last_order: order,
            });
            effects.len() - 1
        });
        let fx = &mut effects[slot];
        fx.last_order = order;
        match facts.results_on.get(&call.id) {
            None => {
                fx.interrupted.push(i);
                fx.expected = None;
            }
            Some(o) if o.is_error => fx.failed.push(i),
            Some(_) => {
                fx.last_done = Some(i);
                fx.expected = match &call.action {
                    Action::Write { content, .. } => content.as_deref().map(known),
                    Action::Edit {
                        edits: Some(edits),
                        apply,
                        ..
                    } => Some(match &fx.expected {
                        Some(Expected::Known {
                            text: Some(before), ..
                        }) => match apply(before, edits) {
                            Some(after) => Expected::Known {
                                sha256: sha256_hex(after.as_bytes()),
                                size: after.len() as u64,
                                text: Some(after),
                            },
                            None => Expected::Edited(edits.clone()),
                        },
                        _ => Expected::Edited(edits.clone()),
                    }),
                    _ => None,
                };
            }
        }
    }

    // Credentials and git come before the effects in the report; git needs the paths.
    let mut touched: Vec<String> = effects.iter().map(|e| e.path.clone()).collect();
    let claims: Vec<String> = facts
        .summary
        .as_ref()
        .map(|(_, claims)| claims.clone())
        .unwrap_or_default();
    let claims_abs: Vec<String> = claims.iter().map(|c| ctx.resolve(c)).collect();
    touched.extend(claims_abs.iter().cloned());
    let mut dirty: HashSet<String> = HashSet::new();
    let mut repository = None;
    if cwd_ok {
        let git = world.git(&ctx.cwd, &touched);
        match git {
            GitState::Unavailable(why) => ctx.push(
                Status::Warn,
                Kind::Git,
                format!("git not available: {why}"),
                None,
                None,
                None,
                None,
            ),
            GitState::NotARepo => ctx.push(
                Status::Ok,
                Kind::Git,
                "The working directory is not inside a git work tree".into(),
                None,
                None,
                None,
                None,
            ),
            GitState::Repo {
                toplevel,
                git_dir,
                branch,
                head,
                dirty_touched,
                dirty_other,
            } => {
                let message = format!(
                    "On {} at {}; {} of the paths this branch touched have uncommitted changes",
                    branch
                        .as_deref()
                        .map_or("a detached HEAD".to_owned(), |b| format!("branch {b}")),
                    head.as_deref()
                        .map_or("no commit yet".to_owned(), |h| h.chars().take(12).collect()),
                    dirty_touched.len()
                );
                let evidence = json!({
                    "toplevel": toplevel,
                    "gitDir": git_dir,
                    "branch": branch,
                    "head": head,
                    "dirtyTouched": dirty_touched,
                    "dirtyOther": dirty_other,
                });
                dirty.extend(dirty_touched);
                repository = Some(Repository {
                    work_tree: toplevel.clone(),
                    git_dir,
                });
                ctx.push(
                    Status::Ok,
                    Kind::Git,
                    message,
                    None,
                    None,
                    Some(&toplevel),
                    Some(evidence),
                );
            }
        }
    }
    ctx.findings
        .push((credential.check)(world, credential.provider.as_deref()));

    // Each file's effects, in path order of their last effect.
    let mut reflected_on_path: HashMap<String, bool> = HashMap::new();
    effects.sort_by_key(|e| e.last_order);
    for fx in &effects {
        let later_done = |i: usize| fx.last_done.is_some_and(|d| d > i);
        for &i in &fx.failed {
            let c = &facts.calls[i];
            let error = facts
                .results_on
                .get(&c.id)
                .map(|o| short(&o.text))
                .unwrap_or_default();
            let (status, tail) = if later_done(i) {
                (Status::Ok, "; a later call succeeded")
            } else {
                (Status::Warn, "")
            };
            ctx.push(
                status,
                Kind::FailedTool,
                format!("The {} of {} failed: {error}{tail}", c.name, fx.path),
                Some(&c.entry_id),
                Some(&c.id),
                Some(&fx.path),
                Some(json!({"tool": c.name, "error": error})),
            );
        }
        for &i in &fx.interrupted {
            let c = &facts.calls[i];
            let disk = ctx.file(&fx.path);
            let applied = match (&disk, &c.action) {
                (FileState::Present(f), Action::Write { content, .. }) => content
                    .as_deref()
                    .map(|content| sha256_hex(content.as_bytes()) == f.sha256),
                (FileState::Present(f), Action::Edit { edits, .. }) => match (edits, &f.text) {
                    (Some(edits), Some(t)) => Some(edit_applied(t, edits)),
                    _ => None,
                },
                _ => Some(false),
            };
            let (status, tail) = if later_done(i) {
                (Status::Ok, "; a later call completed")
            } else {
                (Status::Warn, "")
            };
            ctx.push(
                status,
                Kind::Interrupted,
                format!(
                    "The {} of {} has no result: it was interrupted and the file may be half-changed ({}){tail}",
                    c.name,
                    fx.path,
                    match applied {
                        Some(true) => "its change is on disk now",
                        Some(false) => "its change is not on disk now",
                        None => "cannot tell whether its change is on disk",
                    }
                ),
                Some(&c.entry_id),
                Some(&c.id),
                Some(&fx.path),
                Some(json!({"tool": c.name, "appliedNow": applied})),
            );
        }
        let (Some(done), Some(exp)) = (fx.last_done, &fx.expected) else {
            continue;
        };
        if fx.interrupted.iter().any(|&i| i > done) {
            // Interrupted after the last completed effect: its finding says it all.
            continue;
        }
        let c = &facts.calls[done];
        let disk = ctx.file(&fx.path);
        match disk {
            FileState::Missing | FileState::NotAFile | FileState::Unreadable(_) => {
                reflected_on_path.insert(fx.path.clone(), false);
                let what = match &disk {
                    FileState::Missing => "is missing now".to_owned(),
                    FileState::NotAFile => "is not a regular file now".to_owned(),
                    FileState::Unreadable(e) => format!("cannot be read now ({e})"),
                    FileState::Present(_) => String::new(),
                };
                ctx.push(
                    Status::Fail,
                    Kind::MissingFile,
                    format!(
                        "{} was last changed by {} at entry {}, and {what}",
                        fx.path,
                        article(&c.name),
                        c.entry_id
                    ),
                    Some(&c.entry_id),
                    Some(&c.id),
                    Some(&fx.path),
                    None,
                );
            }
            FileState::Present(f) => {
                let r = reflected(exp, &f);
                reflected_on_path.insert(fx.path.clone(), r == Some(true));
                let mut evidence = json!({
                    "tool": c.name,
                    "actualSha256": f.sha256,
                    "actualSize": f.size,
                });
                if let Expected::Known { sha256, size, text } = exp {
                    evidence["expectedSha256"] = json!(sha256);
                    evidence["expectedSize"] = json!(size);
                    if let (Some(a), Some(b)) = (text, &f.text)
                        && r == Some(false)
                    {
                        evidence["diff"] = diff_summary(a, b);
                    }
                }
                match r {
                    Some(true) => ctx.push(
                        Status::Ok,
                        Kind::FileEffect,
                        format!(
                            "{} is as the {} at entry {} left it",
                            fx.path, c.name, c.entry_id
                        ),
                        Some(&c.entry_id),
                        Some(&c.id),
                        Some(&fx.path),
                        Some(evidence),
                    ),
                    Some(false) => {
                        let detail = match evidence.get("diff") {
                            Some(d) => format!(
                                " (from line {}: {} lines replaced by {})",
                                d["firstChangedLine"], d["linesRemoved"], d["linesAdded"]
                            ),
                            None => match exp {
                                Expected::Edited(_) => {
                                    " (the edit's new text is not where its old text was)".into()
                                }
                                Expected::Known { size, .. } => {
                                    format!(" ({size} bytes expected, {} now)", f.size)
                                }
                            },
                        };
                        ctx.push(
                            Status::Warn,
                            Kind::ChangedSince,
                            format!(
                                "{} changed after the {} at entry {}{detail}",
                                fx.path, c.name, c.entry_id
                            ),
                            Some(&c.entry_id),
                            Some(&c.id),
                            Some(&fx.path),
                            Some(evidence),
                        );
                    }
                    None => ctx.push(
                        Status::Warn,
                        Kind::FileEffect,
                        format!(
                            "{} is too large ({} bytes) to check the edit at entry {}",
                            fx.path, f.size, c.entry_id
                        ),
                        Some(&c.entry_id),
                        Some(&c.id),
                        Some(&fx.path),
                        Some(evidence),
                    ),
                }
            }
        }
    }

    other_branches(&mut ctx, &facts, &effects, &reflected_on_path);
    stale_reads(&mut ctx, &facts, &effects);
    if let Some((entry, _)) = &facts.summary {
        let with_effect: HashSet<&str> = effects
            .iter()
            .filter(|e| e.last_done.is_some())
            .map(|e| e.path.as_str())
            .collect();
        for (claim, abs) in claims.iter().zip(&claims_abs) {
            let (status, message) = if with_effect.contains(abs.as_str()) {
                (
                    Status::Ok,
                    format!(
                        "The summary's claim that {claim} was modified is backed by an edit or write on this path"
                    ),
                )
            } else {
                match ctx.file(abs) {
                    FileState::Present(_) if dirty.contains(abs) => (
                        Status::Ok,
                        format!(
                            "The summary says {claim} was modified; no effect on this path shows it, but git shows it changed"
                        ),
                    ),
                    FileState::Present(_) => (
                        Status::Warn,
                        format!(
                            "The summary says {claim} was modified, but no edit or write on this path shows it and nothing on disk confirms it"
                        ),
                    ),
                    _ => (
                        Status::Warn,
                        format!("The summary says {claim} was modified, but it does not exist now"),
                    ),
                }
            };
            ctx.push(
                status,
                Kind::SummaryClaim,
                message,
                Some(entry),
                None,
                Some(abs),
                Some(json!({"claimed": claim})),
            );
        }
    }
    processes_and_tools(&mut ctx, &facts, cwd_ok);
    if let Some(dir) = cwd.as_deref().filter(|_| !cwd_ok) {
        fold_under_missing_cwd(&mut ctx.findings, dir);
    }

    let mut counts = Counts::default();
    for f in &ctx.findings {
        match f.status {
            Status::Ok => counts.ok += 1,
            Status::Warn => counts.warn += 1,
            Status::Fail => counts.fail += 1,
        }
    }
    Report {
        path: file.to_owned(),
        leaf_id,
        cwd,
        repository,
        attention: counts.warn + counts.fail > 0,
        counts,
        findings: ctx.findings,
    }
}

/// A working directory that is missing (a session from another machine, a moved checkout)
/// is said once, first: the findings about files under it (each would be a `missingFile` or a
/// file gone since it was read) are folded into the `cwd` finding, which counts them by kind
/// and lists their paths in `evidence.filesUnder`.
fn fold_under_missing_cwd(findings: &mut Vec<Finding>, dir: &str) {
    let under = |f: &Finding| {
        matches!(
            f.kind,
            Kind::FileEffect
                | Kind::ChangedSince
                | Kind::MissingFile
                | Kind::OtherBranchEffect
                | Kind::StaleRead
                | Kind::SummaryClaim
        ) && f.path.as_deref().is_some_and(|p| {
            p.strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/') || dir.ends_with('/'))
        })
    };
    let (folded, kept): (Vec<Finding>, Vec<Finding>) = findings.drain(..).partition(under);
    *findings = kept;
    let Some(cwd) = findings
        .iter_mut()
        .find(|f| f.kind == Kind::Cwd && f.status == Status::Fail)
    else {
        findings.extend(folded);
        return;
    };
    if folded.is_empty() {
        return;
    }
    let mut kinds: Vec<(Kind, usize)> = Vec::new();
    let mut paths: Vec<&str> = Vec::new();
    for f in &folded {
        match kinds.iter_mut().find(|(k, _)| *k == f.kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((f.kind, 1)),
        }
        if let Some(p) = f.path.as_deref().filter(|p| !paths.contains(p)) {
            paths.push(p);
        }
    }
    let by_kind: Vec<String> = kinds
        .iter()
        .map(|(k, n)| {
            let name = serde_json::to_value(k)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            format!("{n} {name}")
        })
        .collect();
    cwd.message = format!(
        "{} (a session from another machine, or a moved checkout?): the {} files the session \
         used under it are not checked one by one ({} {}: {}); --cwd DIR checks them in \
         another directory",
        cwd.message,
        paths.len(),
        folded.len(),
        if folded.len() == 1 {
            "finding"
        } else {
            "findings"
        },
        by_kind.join(", ")
    );
    cwd.evidence = Some(json!({ "filesUnder": paths }));
}

fn other_branches(
    ctx: &mut Ctx<'_>,
    facts: &Facts,
    effects: &[PathEffects],
    reflected_on_path: &HashMap<String, bool>,
) {
    let mut reported: HashSet<String> = HashSet::new();
    // Newest first: the latest effect elsewhere is the likeliest to be on disk.
    for c in facts.calls.iter().rev() {
        if c.order.is_some() {
            continue;
        }
        match facts.results_off.get(&c.id) {
            Some(o) if !o.is_error => {}
            _ => continue,
        }
        let (target, exp) = match &c.action {
            Action::Write {
                path: Some(p),
                content: Some(content),
            } => (
                p.clone(),
                Expected::Known {
                    sha256: sha256_hex(content.as_bytes()),
                    size: content.len() as u64,
                    text: None,
                },
            ),
            Action::Edit {
                path: Some(p),
                edits: Some(edits),
                ..
            } => (p.clone(), Expected::Edited(edits.clone())),
            _ => continue,
        };
        let abs = ctx.resolve(&target);
        if reported.contains(&abs) || reflected_on_path.get(&abs) == Some(&true) {
            continue;
        }
        // The same content written on this path is not another branch's effect.
        if let Expected::Known { sha256, .. } = &exp
            && effects.iter().any(|e| {
                e.path == abs
                    && matches!(&e.expected, Some(Expected::Known { sha256: s, .. }) if s == sha256)
            })
        {
            continue;
        }
        let FileState::Present(f) = ctx.file(&abs) else {
            continue;
        };
        if reflected(&exp, &f) == Some(true) {
            reported.insert(abs.clone());
            ctx.push(
                Status::Warn,
                Kind::OtherBranchEffect,
                format!(
                    "{abs} holds the {} made at entry {} on another branch, which this path does not contain; the resumed agent will not know",
                    c.name, c.entry_id
                ),
                Some(&c.entry_id),
                Some(&c.id),
                Some(&abs),
                Some(json!({"tool": c.name, "actualSha256": f.sha256})),
            );
        }
    }
}

fn stale_reads(ctx: &mut Ctx<'_>, facts: &Facts, effects: &[PathEffects]) {
    let mut last: HashMap<String, usize> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for (i, c) in facts.calls.iter().enumerate() {
        let Action::Read {
            path: Some(p),
            whole: true,
        } = &c.action
        else {
            continue;
        };
        if c.order.is_none() {
            continue;
        }
        let Some(o) = facts.results_on.get(&c.id) else {
            continue;
        };
        if o.is_error || o.truncated || o.image {
            continue;
        }
        let abs = ctx.resolve(p);
        if !last.contains_key(&abs) {
            order.push(abs.clone());
        }
        last.insert(abs, i);
    }
    for abs in order {
        let i = last[&abs];
        let c = &facts.calls[i];
        // An effect after the read is checked as an effect.
        if effects
            .iter()
            .any(|e| e.path == abs && Some(e.last_order) > c.order)
        {
            continue;
        }
        let text = &facts.results_on[&c.id].text;
        let (status, message, evidence) = match ctx.file(&abs) {
            FileState::Present(f) => {
                let same = sha256_hex(text.as_bytes()) == f.sha256
                    || sha256_hex(format!("{text}\n").as_bytes()) == f.sha256;
                if same {
                    (
                        Status::Ok,
                        format!("{abs} is as the read at entry {} saw it", c.entry_id),
                        None,
                    )
                } else {
                    let diff = f.text.as_deref().map(|t| diff_summary(text, t));
                    (
                        Status::Warn,
                        format!(
                            "{abs} changed after the read at entry {}: the session holds an outdated copy",
                            c.entry_id
                        ),
                        Some(json!({"actualSha256": f.sha256, "actualSize": f.size, "diff": diff})),
                    )
                }
            }
            _ => (
                Status::Warn,
                format!("{abs} was read at entry {} and is gone now", c.entry_id),
                None,
            ),
        };
        ctx.push(
            status,
            Kind::StaleRead,
            message,
            Some(&c.entry_id),
            Some(&c.id),
            Some(&abs),
            evidence,
        );
    }
}

fn processes_and_tools(ctx: &mut Ctx<'_>, facts: &Facts, cwd_ok: bool) {
    let mut programs: Vec<(String, String, String)> = Vec::new();
    for c in &facts.calls {
        let Action::Bash {
            command: Some(command),
        } = &c.action
        else {
            continue;
        };
        if c.order.is_none() {
            continue;
        }
        if let Some(reason) = shell::background_reason(command) {
            ctx.push(
                Status::Warn,
                Kind::Process,
                format!(
                    "A bash call at entry {} {reason} (`{}`); it is not running any more",
                    c.entry_id,
                    short(command)
                ),
                Some(&c.entry_id),
                Some(&c.id),
                None,
                Some(json!({"command": command})),
            );
        }
        for p in shell::programs(command) {
            if !programs.iter().any(|(q, _, _)| *q == p) {
                programs.push((p, c.entry_id.clone(), c.id.clone()));
            }
        }
    }
    if programs.is_empty() {
        return;
    }
    let world = ctx.world;
    let cwd = ctx.cwd.clone();
    let mut found = Vec::new();
    for (p, entry, call) in &programs {
        // A relative path to a script means nothing when the working directory is gone.
        if p.contains('/') && !p.starts_with('/') && !cwd_ok {
            continue;
        }
        if world.program_exists(p, &cwd) {
            found.push(p.clone());
        } else {
            ctx.push(
                Status::Warn,
                Kind::Tool,
                format!("{p}, run by a bash call at entry {entry}, is not on PATH now"),
                Some(entry),
                Some(call),
                None,
                Some(json!({"program": p})),
            );
        }
    }
    if !found.is_empty() {
        ctx.push(
            Status::Ok,
            Kind::Tool,
            format!(
                "{} programs the path's bash calls ran are available",
                found.len()
            ),
            None,
            None,
            None,
            Some(json!({"programs": found})),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_as_pi_resolves_them() {
        assert_eq!(resolve_path("a/../b/./c", "/w", None), "/w/b/c");
        assert_eq!(resolve_path("@/x/y", "/w", None), "/x/y");
        assert_eq!(resolve_path("~/f", "/w", Some("/home/u")), "/home/u/f");
        assert_eq!(resolve_path("a\u{A0}b", "/w/", None), "/w/a b");
    }

    #[test]
    fn diff_summaries() {
        assert_eq!(
            diff_summary("a\nb\nc\n", "a\nX\nY\nc\n"),
            json!({"firstChangedLine": 2, "linesRemoved": 1, "linesAdded": 2})
        );
    }
}
