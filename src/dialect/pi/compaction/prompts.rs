//! The summarization request pi 1.6.0 sends: its prompt texts (copied verbatim from
//! compaction/compaction.js and compaction/utils.js, because a client with a model must be
//! able to send exactly what pi sends) and how they are assembled with the serialized
//! conversation, a previous summary and custom instructions (pi `generateSummaryWithUsage`,
//! `generateTurnPrefixSummary` and `compact`).

use serde::Serialize;

/// The system prompt of every summarization request (pi `SUMMARIZATION_SYSTEM_PROMPT`).
pub const SUMMARIZATION_SYSTEM_PROMPT: &str = r##"You are a context summarization assistant. Your task is to read a conversation between a user and an AI assistant, then produce a structured summary following the exact format specified.

Do NOT continue the conversation. Do NOT respond to any questions in the conversation. ONLY output the structured summary."##;

/// The instructions for a first summary (pi `SUMMARIZATION_PROMPT`).
pub const SUMMARIZATION_PROMPT: &str = r##"The messages above are a conversation to summarize. Create a structured context checkpoint summary that another LLM will use to continue the work.

Use this EXACT format:

## Goal
[What is the user trying to accomplish? Can be multiple items if the session covers different tasks.]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned by user]
- [Or "(none)" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Current work]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [Ordered list of what should happen next]

## Critical Context
- [Any data, examples, or references needed to continue]
- [Or "(none)" if not applicable]

Keep each section concise. Preserve exact file paths, function names, and error messages."##;

/// The rules for updating a previous summary (pi `UPDATE_SUMMARIZATION_INSTRUCTIONS`).
pub const UPDATE_SUMMARIZATION_INSTRUCTIONS: &str = r##"Update the existing structured summary with new information. RULES:
- PRESERVE all existing information from the previous summary
- ADD new progress, decisions, and context from the new messages
- UPDATE the Progress section: move items from "In Progress" to "Done" when completed
- UPDATE "Next Steps" based on what was accomplished
- PRESERVE exact file paths, function names, and error messages
- If something is no longer relevant, you may remove it

Use this EXACT format:

## Goal
[Preserve existing goals, add new ones if the task expanded]

## Constraints & Preferences
- [Preserve existing, add new ones discovered]

## Progress
### Done
- [x] [Include previously done items AND newly completed items]

### In Progress
- [ ] [Current work - update based on progress]

### Blocked
- [Current blockers - remove if resolved]

## Key Decisions
- **[Decision]**: [Brief rationale] (preserve all previous, add new)

## Next Steps
1. [Update based on current state]

## Critical Context
- [Preserve important context, add new if needed]

Keep each section concise. Preserve exact file paths, function names, and error messages."##;

/// The first paragraph of pi `UPDATE_SUMMARIZATION_PROMPT`, which continues with a blank line and [`UPDATE_SUMMARIZATION_INSTRUCTIONS`].
pub const UPDATE_SUMMARIZATION_PROMPT_HEAD: &str = r##"The messages above are NEW conversation messages to incorporate into the existing summary provided in <previous-summary> tags."##;

/// The instructions for the prefix of a split turn (pi `TURN_PREFIX_SUMMARIZATION_PROMPT`).
pub const TURN_PREFIX_SUMMARIZATION_PROMPT: &str = r##"The messages above are earlier context from an ongoing conversation. Later messages are stored separately and do not need to be reconstructed.

Create a concise checkpoint of the user's request and the progress shown above. This checkpoint will be placed before the later messages so the conversation can continue with the necessary context.

## Original Request
[What did the user ask for?]

## Progress So Far
- [Key decisions and work completed in these messages]

## Context Needed to Continue
- [Information from these messages needed to understand the later work]

Only summarize information explicitly present above. Do not infer or recreate later messages."##;

/// pi `UPDATE_SUMMARIZATION_PROMPT`.
pub fn update_summarization_prompt() -> String {
    format!("{UPDATE_SUMMARIZATION_PROMPT_HEAD}\n\n{UPDATE_SUMMARIZATION_INSTRUCTIONS}")
}

/// What separates the history summary from the turn-prefix summary of a split turn
/// (pi `compact`: `${history}\n\n---\n\n**Turn Context (split turn):**\n\n${prefix}`).
pub const SPLIT_TURN_SEPARATOR: &str = "\n\n---\n\n**Turn Context (split turn):**\n\n";

/// What pi uses as the history summary of a split turn when nothing precedes the turn.
pub const NO_PRIOR_HISTORY: &str = "No prior history.";

/// The requests pi would send a model for one compaction. Every request has
/// [`SUMMARIZATION_SYSTEM_PROMPT`] as its system prompt and one user message holding the
/// prompt text as a single text block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SummarizationRequest {
    /// pi's summarization system prompt ([`SUMMARIZATION_SYSTEM_PROMPT`]).
    pub system_prompt: String,
    /// The history prompt; `None` for a split turn with nothing before the turn (pi then
    /// uses the previous summary, or [`NO_PRIOR_HISTORY`], as the history text).
    pub prompt: Option<String>,
    /// The turn-prefix prompt of a split turn.
    pub turn_prefix_prompt: Option<String>,
}

/// pi `generateSummaryWithUsage`'s prompt text: the conversation in `<conversation>` tags,
/// the previous summary in `<previous-summary>` tags (then the update prompt), the prompt,
/// and `Additional focus: …` when there are custom instructions.
pub fn history_prompt(
    conversation: &str,
    previous_summary: Option<&str>,
    custom_instructions: Option<&str>,
) -> String {
    let mut base = match previous_summary {
        Some(_) => update_summarization_prompt(),
        None => SUMMARIZATION_PROMPT.to_owned(),
    };
    if let Some(focus) = custom_instructions.filter(|c| !c.is_empty()) {
        base = format!("{base}\n\nAdditional focus: {focus}");
    }
    let mut text = format!("<conversation>\n{conversation}\n</conversation>\n\n");
    if let Some(previous) = previous_summary {
        text.push_str(&format!(
            "<previous-summary>\n{previous}\n</previous-summary>\n\n"
        ));
    }
    text.push_str(&base);
    text
}

/// pi `generateTurnPrefixSummary`'s prompt text.
pub fn turn_prefix_prompt(conversation: &str, custom_instructions: Option<&str>) -> String {
    let mut text = format!(
        "# Conversation\n{conversation}\n\n# Instructions\n{TURN_PREFIX_SUMMARIZATION_PROMPT}"
    );
    if let Some(focus) = custom_instructions.filter(|c| !c.is_empty()) {
        text = format!("{text}\n\nAdditional focus: {focus}");
    }
    text
}

/// Joins summaries the way pi `compact` does: the history text, and for a split turn the
/// separator and the turn-prefix text; then the file-operation blocks.
pub fn assemble_summary(history: &str, turn_prefix: Option<&str>, file_blocks: &str) -> String {
    let mut summary = history.to_owned();
    if let Some(prefix) = turn_prefix {
        summary.push_str(SPLIT_TURN_SEPARATOR);
        summary.push_str(prefix);
    }
    summary.push_str(file_blocks);
    summary
}
