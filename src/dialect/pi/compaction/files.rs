//! Files a summarized span read and modified: collected from `read`/`write`/`edit` tool
//! calls (and calls nested in a tool result), plus the previous compaction's details.
//! Matches pi 1.6.0 `createFileOps`, `extractFileOpsFromMessage`, `computeFileLists` and
//! `formatFileOperations` (compaction/utils.js).

use indexmap::IndexSet;
use serde_json::Value;

use crate::js::value as js;

/// Paths seen per operation, in first-seen order (pi's `Set`s).
#[derive(Clone, Debug, Default)]
pub struct FileOps {
    /// Paths of `read` tool calls.
    pub read: IndexSet<String>,
    /// Paths of `write` tool calls.
    pub written: IndexSet<String>,
    /// Paths of `edit` tool calls.
    pub edited: IndexSet<String>,
}

/// The lists pi stores in `details` and appends to the summary: files only read, and files
/// written or edited, each sorted by UTF-16 code units (JavaScript's default sort).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileLists {
    /// Files read and not modified (pi's `readFiles`).
    pub read_files: Vec<String>,
    /// Files written or edited (pi's `modifiedFiles`).
    pub modified_files: Vec<String>,
}

impl FileOps {
    /// Adds the file operations of one message: tool calls of an assistant message, or the
    /// `nestedCalls.calls` of a tool result.
    pub fn add_message(&mut self, message: &Value) {
        match message.get("role").and_then(Value::as_str) {
            Some("toolResult") => {
                let calls = message
                    .get("nestedCalls")
                    .and_then(|n| n.get("calls"))
                    .and_then(Value::as_array);
                for call in calls.into_iter().flatten() {
                    self.add(call.get("name"), call.get("arguments"));
                }
            }
            Some("assistant") => {
                let Some(Value::Array(blocks)) = message.get("content") else {
                    return;
                };
                for block in blocks {
                    let Value::Object(b) = block else { continue };
                    if !js::is_str(b.get("type"), "toolCall")
                        || !b.contains_key("arguments")
                        || !b.contains_key("name")
                    {
                        continue;
                    }
                    self.add(b.get("name"), b.get("arguments"));
                }
            }
            _ => {}
        }
    }

    fn add(&mut self, name: Option<&Value>, args: Option<&Value>) {
        let Some(Value::String(path)) = args.and_then(|a| a.get("path")) else {
            return;
        };
        if path.is_empty() {
            return;
        }
        let set = match name.and_then(Value::as_str) {
            Some("read") => &mut self.read,
            Some("write") => &mut self.written,
            Some("edit") => &mut self.edited,
            _ => return,
        };
        set.insert(path.clone());
    }

    /// Adds a previous compaction's `details.readFiles` / `details.modifiedFiles` (pi reads
    /// them only when the compaction was not written by a hook).
    pub fn add_details(&mut self, details: &Value) {
        let list = |key: &str| -> Vec<String> {
            match details.get(key) {
                Some(Value::Array(items)) => {
                    items.iter().map(|v| js::join_string(Some(v))).collect()
                }
                _ => Vec::new(),
            }
        };
        self.read.extend(list("readFiles"));
        self.edited.extend(list("modifiedFiles"));
    }

    /// pi `computeFileLists` (paths sorted by UTF-16 code units, as JavaScript sorts).
    pub fn lists(&self) -> FileLists {
        let modified: IndexSet<&String> = self.edited.iter().chain(&self.written).collect();
        let mut read_files: Vec<String> = self
            .read
            .iter()
            .filter(|f| !modified.contains(f))
            .cloned()
            .collect();
        let mut modified_files: Vec<String> = modified.into_iter().cloned().collect();
        read_files.sort_by(|a, b| js::cmp_utf16(a, b));
        modified_files.sort_by(|a, b| js::cmp_utf16(a, b));
        FileLists {
            read_files,
            modified_files,
        }
    }
}

impl FileLists {
    /// pi `formatFileOperations`: `\n\n<read-files>…</read-files>\n\n<modified-files>…</modified-files>`,
    /// each block only when its list is non-empty; "" when both are empty.
    pub fn format(&self) -> String {
        let mut sections = Vec::new();
        if !self.read_files.is_empty() {
            sections.push(format!(
                "<read-files>\n{}\n</read-files>",
                self.read_files.join("\n")
            ));
        }
        if !self.modified_files.is_empty() {
            sections.push(format!(
                "<modified-files>\n{}\n</modified-files>",
                self.modified_files.join("\n")
            ));
        }
        if sections.is_empty() {
            return String::new();
        }
        format!("\n\n{}", sections.join("\n\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn modified_wins_over_read_and_lists_are_sorted() {
        let mut ops = FileOps::default();
        ops.add_message(&json!({"role": "assistant", "content": [
            {"type": "toolCall", "name": "read", "arguments": {"path": "b.rs"}},
            {"type": "toolCall", "name": "read", "arguments": {"path": "a.rs"}},
            {"type": "toolCall", "name": "edit", "arguments": {"path": "b.rs"}},
            {"type": "toolCall", "name": "bash", "arguments": {"path": "c.rs"}},
            {"type": "toolCall", "name": "write", "arguments": {"path": ""}}]}));
        ops.add_details(&json!({"readFiles": ["z.md"], "modifiedFiles": ["y.md"]}));
        let lists = ops.lists();
        assert_eq!(lists.read_files, ["a.rs", "z.md"]);
        assert_eq!(lists.modified_files, ["b.rs", "y.md"]);
        assert_eq!(
            lists.format(),
            "\n\n<read-files>\na.rs\nz.md\n</read-files>\n\n<modified-files>\nb.rs\ny.md\n</modified-files>"
        );
        assert_eq!(FileLists::default().format(), "");
    }
}
