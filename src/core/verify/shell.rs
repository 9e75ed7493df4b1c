//! What a `bash` tool call's command ran, read without running anything: the programs that
//! start each simple command (after pipes, `&&`, `||`, `;`, `&`, newlines, subshell
//! parentheses, environment assignments and wrappers such as `sudo`, `env`, `nohup`,
//! `time`), and whether it left a process running in the background (`&`, `nohup`,
//! `setsid`, `disown`, or a development server / watcher started in the foreground).
//!
//! A deliberately small reading of POSIX shell: quotes and backslashes are honoured, here
//! documents are skipped, the commands of a `$(...)` or backtick substitution outside double
//! quotes are read as commands of their own (the substitution stays part of its word).
//! Heuristic by nature; the findings say "appears to".

/// One simple command: its words (quotes removed) and whether `&` ended it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Simple {
    /// The words, quotes removed; assignments and wrappers still in place.
    pub words: Vec<String>,
    /// Ended by a lone `&` (run in the background).
    pub background: bool,
}

/// Splits a command line into simple commands.
// The word-flushing macro resets state that the last flush never reads again.
#[allow(unused_assignments)]
pub fn simple_commands(command: &str) -> Vec<Simple> {
    let mut out = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut heredocs: Vec<String> = Vec::new();
    let mut pending_heredoc = false;
    let chars: Vec<char> = command.chars().collect();
    let mut i = 0;
    let end = |words: &mut Vec<String>, bg: bool, out: &mut Vec<Simple>| {
        if !words.is_empty() {
            out.push(Simple {
                words: std::mem::take(words),
                background: bg,
            });
        }
    };
    macro_rules! flush_word {
        () => {
            if in_word {
                if pending_heredoc {
                    heredocs.push(word.trim_start_matches('-').to_owned());
                    pending_heredoc = false;
                } else {
                    words.push(std::mem::take(&mut word));
                }
                word.clear();
                in_word = false;
            }
        };
    }
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if i + 1 < chars.len() => {
                if chars[i + 1] != '\n' {
                    word.push(chars[i + 1]);
                    in_word = true;
                }
                i += 2;
                continue;
            }
            '\'' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    word.push(chars[i]);
                    i += 1;
                }
            }
            '"' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
            }
            // A command substitution is part of the word it stands in; the commands inside
            // it run too, so they are read as commands of their own. `$((...))` is arithmetic.
            '$' | '`' if c == '`' || chars.get(i + 1) == Some(&'(') => {
                let (body, close) = if c == '`' {
                    let mut close = i + 1;
                    while close < chars.len() && chars[close] != '`' {
                        close += if chars[close] == '\\' { 2 } else { 1 };
                    }
                    (i + 1, close)
                } else {
                    (i + 2, closing_paren(&chars, i + 2))
                };
                if chars.get(body) != Some(&'(') || c == '`' {
                    let inner: String = chars[body..close.min(chars.len())].iter().collect();
                    out.extend(simple_commands(&inner));
                }
                word.push_str("$(…)");
                in_word = true;
                i = close + 1;
                continue;
            }
            '#' if !in_word => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            ' ' | '\t' => flush_word!(),
            '\n' => {
                flush_word!();
                end(&mut words, false, &mut out);
                // Skip the bodies of here documents opened on this line.
                for tag in std::mem::take(&mut heredocs) {
                    loop {
                        let start = i + 1;
                        let mut j = start;
                        while j < chars.len() && chars[j] != '\n' {
                            j += 1;
                        }
                        let line: String = chars[start..j].iter().collect();
                        i = j;
                        if line.trim() == tag || j >= chars.len() {
                            break;
                        }
                    }
                }
            }
            ';' | '|' | '(' | ')' | '{' | '}' if !in_word || c != '{' && c != '}' => {
                flush_word!();
                end(&mut words, false, &mut out);
                if c == '|' && chars.get(i + 1) == Some(&'|') {
                    i += 1;
                }
            }
            '&' => {
                flush_word!();
                if chars.get(i + 1) == Some(&'&') {
                    end(&mut words, false, &mut out);
                    i += 1;
                } else if chars.get(i + 1) == Some(&'>') || i > 0 && chars[i - 1] == '>' {
                    // `&>file` or `2>&1`: a redirection, not a background job.
                    while i + 1 < chars.len() && !matches!(chars[i + 1], ' ' | '\t' | '\n' | ';') {
                        i += 1;
                    }
                } else {
                    end(&mut words, true, &mut out);
                }
            }
            '<' if chars.get(i + 1) == Some(&'<') && chars.get(i + 2) != Some(&'<') => {
                flush_word!();
                pending_heredoc = true;
                i += 2;
                continue;
            }
            '>' | '<' => {
                // A redirection: drop it and its target.
                flush_word!();
                while i + 1 < chars.len() && matches!(chars[i + 1], '>' | '&' | '|') {
                    i += 1;
                }
                i += 1;
                while i < chars.len() && matches!(chars[i], ' ' | '\t') {
                    i += 1;
                }
                while i < chars.len() && !matches!(chars[i], ' ' | '\t' | '\n' | ';' | '|' | '&') {
                    i += 1;
                }
                continue;
            }
            _ => {
                // A file-descriptor number right before a redirection belongs to it.
                if c.is_ascii_digit() && !in_word && matches!(chars.get(i + 1), Some('>' | '<')) {
                    i += 1;
                    continue;
                }
                word.push(c);
                in_word = true;
            }
        }
        i += 1;
    }
    flush_word!();
    end(&mut words, false, &mut out);
    out
}

/// The index of the `)` that closes the parenthesis opened just before `from` (quotes and
/// backslashes honoured, nested parentheses counted), or `chars.len()` when none does.
fn closing_paren(chars: &[char], from: usize) -> usize {
    let mut depth = 1;
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            q @ ('\'' | '"') => {
                i += 1;
                while i < chars.len() && chars[i] != q {
                    if q == '"' && chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

/// Shell words that are no program: builtins and reserved words.
const BUILTINS: &[&str] = &[
    "!", ".", ":", "[", "[[", "]]", "alias", "bg", "break", "case", "cd", "command", "continue",
    "declare", "do", "done", "echo", "elif", "else", "esac", "eval", "exec", "exit", "export",
    "false", "fg", "fi", "for", "function", "if", "in", "jobs", "let", "local", "popd", "printf",
    "pushd", "pwd", "read", "readonly", "return", "select", "set", "shift", "source", "test",
    "then", "time", "trap", "true", "type", "typeset", "ulimit", "umask", "unalias", "unset",
    "until", "wait", "while", "disown", "shopt", "hash", "builtin", "getopts",
];

/// Wrappers whose first non-option argument is the program they run.
const WRAPPERS: &[&str] = &[
    "sudo", "env", "nohup", "time", "nice", "setsid", "exec", "command", "timeout", "stdbuf",
    "xargs", "doas",
];

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// The program a simple command runs, past assignments and wrappers; `None` for a builtin,
/// a reserved word, or a word built at run time (`$VAR`, `$(...)`).
pub fn program(words: &[String]) -> Option<&str> {
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        if is_assignment(w) {
            i += 1;
            continue;
        }
        if WRAPPERS.contains(&w) {
            i += 1;
            // Options of the wrapper (and `timeout`'s duration) are skipped.
            while i < words.len()
                && (words[i].starts_with('-')
                    || is_assignment(&words[i])
                    || (w == "timeout" && words[i].starts_with(|c: char| c.is_ascii_digit())))
            {
                i += 1;
            }
            continue;
        }
        if BUILTINS.contains(&w) || w.contains('$') || w.contains('`') || w.is_empty() {
            return None;
        }
        return Some(w);
    }
    None
}

/// Programs that keep running until stopped when started in the foreground: servers,
/// watchers, development servers.
fn long_running(words: &[String]) -> bool {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let has = |s: &str| w.contains(&s);
    let Some(first) = program(words) else {
        return false;
    };
    let first = first.rsplit('/').next().unwrap_or(first);
    match first {
        "npm" | "pnpm" | "yarn" | "bun" => {
            ["dev", "start", "serve", "watch", "preview"]
                .iter()
                .any(|s| has(s))
                && !has("test")
        }
        "npx" => has("vite") || has("next") || has("nodemon") || has("serve"),
        "vite" | "nodemon" | "http-server" | "live-server" | "uvicorn" | "gunicorn" | "flask"
        | "jupyter" | "webpack-dev-server" | "redis-server" | "mongod" | "postgres" | "ngrok"
        | "watchman" => !has("--version") && !has("--help"),
        "python" | "python3" => has("http.server") || has("runserver") || has("uvicorn"),
        "rails" => has("s") || has("server"),
        "cargo" => has("watch") || (has("run") && has("serve")),
        "docker" | "docker-compose" => has("up") && !has("-d") && !has("--detach"),
        "tail" => has("-f") || has("-F"),
        "watch" => true,
        _ => false,
    }
}

/// Why a command appears to have started a process that outlives the call, or `None`.
pub fn background_reason(command: &str) -> Option<&'static str> {
    let cmds = simple_commands(command);
    for c in &cmds {
        let first = c
            .words
            .iter()
            .find(|w| !is_assignment(w))
            .map(String::as_str);
        if matches!(first, Some("nohup" | "setsid" | "disown")) {
            return Some("detached with nohup/setsid/disown");
        }
        if c.background {
            return Some("started in the background with `&`");
        }
    }
    cmds.iter()
        .any(|c| long_running(&c.words))
        .then_some("runs a server or watcher that keeps running until stopped")
}

/// The programs the command invokes (each once, in first-use order).
pub fn programs(command: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for c in simple_commands(command) {
        if let Some(p) = program(&c.words)
            && !seen.iter().any(|s| s == p)
        {
            seen.push(p.to_owned());
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_after_operators_assignments_and_wrappers() {
        assert_eq!(
            programs("FOO=1 sudo -E make -j4 && cat x | grep -v y; (cd a && ls) || echo no"),
            vec!["make", "cat", "grep", "ls"]
        );
        assert_eq!(
            programs("rg 'a|b' \"c;d\" 2>&1 | head > out.txt"),
            vec!["rg", "head"]
        );
        assert_eq!(
            programs("cat <<EOF > f\nnot a command\nEOF\nwc -l f"),
            vec!["cat", "wc"]
        );
        assert_eq!(programs("env X=1 timeout 5 node app.js"), vec!["node"]);
        // `$(...)` runs its command too.
        assert_eq!(programs("$EDITOR file; echo $(date)"), vec!["date"]);
        // ... and is part of the word it stands in, which is no program of its own.
        assert_eq!(
            programs("cp $(npm root -g)/x/theme.json ./t.json && ls"),
            vec!["npm", "cp", "ls"]
        );
        assert_eq!(programs("$(which node) app.js"), vec!["which"]);
        assert_eq!(
            programs("echo \"$(git rev-parse HEAD)\" `uname -s`/bin x$((1 + 2))"),
            vec!["uname"]
        );
        assert_eq!(
            programs("a=$(cat f | wc -l); make"),
            vec!["cat", "wc", "make"]
        );
    }

    #[test]
    fn background_and_long_running() {
        assert!(background_reason("python3 -m http.server 8000 &").is_some());
        assert!(background_reason("nohup ./run.sh > log 2>&1").is_some());
        assert!(background_reason("npm run dev").is_some());
        assert!(background_reason("ls -la 2>&1 && echo ok").is_none());
        assert!(background_reason("npm test").is_none());
        assert!(background_reason("cargo build &> log").is_none());
    }
}
