//! Plain-text renderings of daemon answers for a person: the context preview document, the
//! explain sentence, the compaction report, a summary's audit, the comparison of two leaves. Pure: no `vscode`, no I/O.

import {
    ClaudeContextAt,
    CodexContextAt,
    CompactResult,
    CompareBranchesResult,
    ComparedSide,
    ContextAtResult,
    ContextDifference,
    ContextMessage,
    Diagnostic,
    EntryId,
    ExplainResult,
    isNothingToCompact,
    PiContextAt,
    Retention,
    RetentionProbe,
    RewindResult,
    SummarizedBranch,
    SummarySource,
    VerifyFinding,
    VerifyResumeResult,
} from './protocol';

/** Whether a context is a Claude Code transcript's (the daemon says its `format`). */
export function isClaudeContext(ctx: ContextAtResult): ctx is ClaudeContextAt {
    return 'format' in ctx && ctx.format === 'claude-code';
}

/** Whether a context is a Codex rollout's (the daemon says its `format`). */
export function isCodexContext(ctx: ContextAtResult): ctx is CodexContextAt {
    return 'format' in ctx && ctx.format === 'codex';
}

/** The entries in a context, for views that mark them (a Codex rollout's items name none). */
export function contextEntryIds(ctx: ContextAtResult | undefined): string[] {
    if (!ctx || isCodexContext(ctx)) {
        return [];
    }
    return ctx.entryIds ?? [];
}

/** Where a context was taken, for the preview's heading. */
export interface ContextHeading {
    path: string;
    name: string | null;
    leafId: string | null;
}

/** The longest text block shown for one content part; longer ones are cut with a note. */
export const MAX_PART_CHARS = 4000;

/** One message of a rendered context: its title (without its position) and the lines beneath it. */
interface Block {
    title: string;
    body: string[];
}

/** A context rendered in parts: the heading lines, one block per message, the closing lines. */
interface RenderedContext {
    head: string[];
    blocks: Block[];
    /** The position of the first block (a page of a long context starts later). */
    offset: number;
    tail: string[];
}

/**
 * The context at a leaf as a markdown-like document: a heading with model, thinking level and
 * token estimate, then one section per message in the order the model sees them, each naming
 * the entry it came from (`messageEntryIds`).
 */
export function renderContext(ctx: ContextAtResult, heading: ContextHeading): string {
    const r = contextParts(ctx, heading);
    const out = [...r.head];
    r.blocks.forEach((b, i) => out.push('', `## ${r.offset + i + 1}. ${b.title}`, '', ...b.body));
    out.push(...r.tail);
    return out.join('\n');
}

function contextParts(ctx: ContextAtResult, heading: ContextHeading): RenderedContext {
    if (isClaudeContext(ctx)) {
        return claudeParts(ctx, heading);
    }
    return isCodexContext(ctx) ? codexParts(ctx, heading) : piParts(ctx, heading);
}

/** The text of a Codex input item's content parts (`input_text`, `output_text`, …). */
function codexText(item: Record<string, unknown>): string {
    const content = item.content;
    if (typeof content === 'string') {
        return content;
    }
    if (!Array.isArray(content)) {
        return '';
    }
    return content
        .map((part) => (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : ''))
        .filter((t) => t !== '')
        .join('\n');
}

/**
 * A Codex rollout's context: the Responses API `input` items Codex sends at the leaf, one
 * section per item (messages by role, tool calls with their arguments, their outputs).
 */
function codexParts(ctx: CodexContextAt, heading: ContextHeading): RenderedContext {
    const head: string[] = [];
    head.push(`# Context (Codex)${heading.name ? ` — ${heading.name}` : ''}`);
    head.push('');
    head.push(`- file: ${heading.path}`);
    head.push(`- leaf: ${ctx.leafId ?? '(none)'}`);
    head.push(`- input items: ${ctx.messageCount}`);
    if (ctx.baseInstructions) {
        head.push('- base instructions: sent first, as a developer message Codex builds at send time');
    }
    for (const note of ctx.notes ?? []) {
        head.push(`- ${note}`);
    }
    const blocks = ctx.messages.map((item): Block => {
        const type = typeof item.type === 'string' ? item.type : 'item';
        const role = typeof item.role === 'string' ? ` (${item.role})` : '';
        let body: string;
        if (type === 'function_call' || type === 'custom_tool_call' || type === 'local_shell_call') {
            const name = typeof item.name === 'string' ? item.name : type;
            const args = typeof item.arguments === 'string' ? item.arguments : typeof item.input === 'string' ? item.input : JSON.stringify(item.action ?? {});
            body = `${name}(${cut(args)})`;
        } else if (type === 'function_call_output' || type === 'custom_tool_call_output') {
            const output = item.output;
            body = cut(typeof output === 'string' ? output : JSON.stringify(output));
        } else {
            body = cut(codexText(item));
        }
        return { title: `${type}${role}`, body: [body] };
    });
    return { head, blocks, offset: ctx.offset ?? 0, tail: [''] };
}

/**
 * A Claude Code transcript's context: what Claude Code sends the model at the leaf (the Anthropic
 * Messages API `messages`), one section per message naming the lines it holds, then what Claude
 * adds at send time that the file does not hold.
 */
function claudeParts(ctx: ClaudeContextAt, heading: ContextHeading): RenderedContext {
    const head: string[] = [];
    head.push(`# Context (Claude Code)${heading.name ? ` — ${heading.name}` : ''}`);
    head.push('');
    head.push(`- file: ${heading.path}`);
    head.push(`- leaf: ${ctx.leafId}`);
    const messages = ctx.messages ?? [];
    const offset = ctx.offset ?? 0;
    head.push(`- model: ${ctx.model ?? '(none)'}; attachments as ${ctx.midConversationSystem ? 'system messages' : '<system-reminder> text'}`);
    head.push(`- messages: ${ctx.messageCount}${ctx.messageCount !== messages.length ? ` (showing ${offset + 1}–${offset + messages.length})` : ''}`);
    head.push(`- lines of the path not sent: ${ctx.dropped.length} (explain says why)`);
    for (const d of ctx.diagnostics ?? []) {
        head.push(`- warning: ${diagnosticText(d)}`);
    }
    const blocks = messages.map((m, i): Block => {
        const lines = ctx.messageEntryIds[offset + i] ?? [];
        return { title: `${m.role}${lines.length ? `  (${lines.length === 1 ? 'line' : 'lines'} ${lines.join(', ')})` : ''}`, body: claudeContent(m.content) };
    });
    return { head, blocks, offset, tail: ['', 'Not in the file: Claude Code adds a userContext reminder and a cache marker when it sends.', ''] };
}

/** A Claude message's content: a string, or its blocks each shown by kind. */
function claudeContent(content: unknown): string[] {
    if (typeof content === 'string') return [cut(content)];
    if (!Array.isArray(content)) return [];
    const out: string[] = [];
    for (const b of content as Record<string, unknown>[]) {
        switch (b.type) {
            case 'text':
                out.push(cut(str(b.text)));
                break;
            case 'thinking':
                out.push(`(thinking) ${cut(str(b.thinking))}`);
                break;
            case 'tool_use':
                out.push(`tool call ${str(b.name)} ${cut(JSON.stringify(b.input ?? null))}`);
                break;
            case 'tool_result':
                out.push(`tool result${b.is_error ? ' (error)' : ''}: ${cut(typeof b.content === 'string' ? b.content : JSON.stringify(b.content ?? null))}`);
                break;
            case 'image':
                out.push('[image]');
                break;
            default:
                out.push(`[${str(b.type)}]`);
        }
        out.push('');
    }
    return out;
}

function piParts(ctx: PiContextAt, heading: ContextHeading): RenderedContext {
    const head: string[] = [];
    head.push(`# Context${heading.name ? ` — ${heading.name}` : ''}`);
    head.push('');
    head.push(`- file: ${heading.path}`);
    head.push(`- leaf: ${ctx.leafId ?? heading.leafId ?? '(none)'}`);
    const messages = ctx.messages ?? [];
    const count = ctx.messageCount ?? messages.length;
    const offset = ctx.offset ?? 0;
    head.push(`- model: ${ctx.model ? [ctx.model.provider, ctx.model.modelId].filter(Boolean).join('/') : '(none)'}`);
    head.push(`- thinking level: ${ctx.thinkingLevel ?? '(not set)'}`);
    head.push(`- messages: ${count}${count !== messages.length ? ` (showing ${offset + 1}–${offset + messages.length})` : ''}`);
    head.push(`- entries on the path in context: ${ctx.entryIds.length}`);
    if (ctx.tokenEstimate !== undefined) head.push(`- token estimate: ${ctx.tokenEstimate}`);
    for (const d of ctx.diagnostics ?? []) {
        head.push(`- warning: ${diagnosticText(d)}`);
    }
    const blocks = messages.map((m, i): Block => {
        const source = ctx.messageEntryIds?.[i];
        return { title: `${roleTitle(m)}${source ? `  (entry ${source})` : ''}`, body: renderMessage(m) };
    });
    return { head, blocks, offset, tail: [''] };
}

/**
 * How many characters of messages only one side holds the compared documents show whole, over
 * all the places where the two contexts part (in the model's order); past it such messages are
 * listed one line each. VS Code's diff editor compares a changed stretch's characters with the
 * other side's (Myers: time grows with the square of what differs): this much takes it about
 * half a second; the 312 messages one shipped leaf holds against the other's one summary took
 * it past its 5 s limit (`diffEditor.maxComputationTime`) and 120 s did not suffice either.
 */
export const COMPARE_WHOLE_CHARS = 8_000;

/** The longest preview of a message listed on one line in the compared documents. */
const COMPARE_PREVIEW_CHARS = 100;

/**
 * The contexts at two leaves as the two sides of VS Code's diff editor (A the original, B the
 * modified): each is its context as `renderContext` draws it, message for message in the
 * model's order, with three changes that keep the diff editor's answer whole and quick:
 *
 * * a message's heading omits its position, so a message both contexts hold reads the same on
 *   both sides wherever it sits;
 * * where the two part, the messages only one side holds are shown whole while all such
 *   messages so far stay within `COMPARE_WHOLE_CHARS`; past it they are listed one line each
 *   (`only at LEAF · title: preview`), A's before and B's after a line both sides share (`┄┄ N
 *   messages only at A, M only at B … ┄┄`): the diff editor then sees lines taken away and
 *   lines added, never a long stretch replaced by another (the one line each names its leaf,
 *   so no line of one side's list can pair with one of the other's);
 * * both sides name the two leaves in one shared line after the heading.
 */
export function renderComparedContexts(a: ContextAtResult, headingA: ContextHeading, b: ContextAtResult, headingB: ContextHeading): { a: string; b: string } {
    const ra = contextParts(a, headingA);
    const rb = contextParts(b, headingB);
    const leafA = shortId(headingA.leafId ?? 'none');
    const leafB = shortId(headingB.leafId ?? 'none');
    const keyOf = (x: Block) => `${x.title}\n${x.body.join('\n')}`;
    const keysA = ra.blocks.map(keyOf);
    const keysB = rb.blocks.map(keyOf);
    const outA = [...ra.head, '', `Compared: ${leafA} ↔ ${leafB}`];
    const outB = [...rb.head, '', `Compared: ${leafA} ↔ ${leafB}`];
    const whole = (out: string[], x: Block) => out.push('', `## ${x.title}`, '', ...x.body);
    const listed = (leaf: string, x: Block) => `only at ${leaf} · ${x.title}: ${preview(x.body)}`;
    let wholeLeft = COMPARE_WHOLE_CHARS;
    const gap = (onlyA: Block[], onlyB: Block[]) => {
        if (onlyA.length === 0 && onlyB.length === 0) return;
        const size = [...onlyA, ...onlyB].reduce((n, x) => n + keyOf(x).length, 0);
        if (size <= wholeLeft) {
            wholeLeft -= size;
            for (const x of onlyA) whole(outA, x);
            for (const x of onlyB) whole(outB, x);
            return;
        }
        const shared = `┄┄ ${count(onlyA.length, 'message')} only at ${leafA}, ${onlyB.length} only at ${leafB} (one line each; Show Context shows them whole) ┄┄`;
        outA.push('', ...onlyA.map((x) => listed(leafA, x)), shared);
        outB.push('', shared, ...onlyB.map((x) => listed(leafB, x)));
    };
    let i = 0;
    let j = 0;
    for (const [ci, cj] of commonPairs(keysA, keysB)) {
        gap(ra.blocks.slice(i, ci), rb.blocks.slice(j, cj));
        whole(outA, ra.blocks[ci]);
        whole(outB, rb.blocks[cj]);
        i = ci + 1;
        j = cj + 1;
    }
    gap(ra.blocks.slice(i), rb.blocks.slice(j));
    outA.push(...ra.tail);
    outB.push(...rb.tail);
    return { a: outA.join('\n'), b: outB.join('\n') };
}

/** A message's first non-empty line, cut to `COMPARE_PREVIEW_CHARS`. */
function preview(body: string[]): string {
    const line = body.join('\n').split('\n').find((l) => l.trim() !== '')?.trim() ?? '(empty)';
    return line.length > COMPARE_PREVIEW_CHARS ? `${line.slice(0, COMPARE_PREVIEW_CHARS)}…` : line;
}

/** The largest middle (after the shared start and end) whose longest common subsequence is computed exactly. */
const LCS_CELLS = 4_000_000;

/**
 * The index pairs of a longest common subsequence of two lists of keys, in order: the shared
 * start and end, and between them the dynamic-programming answer (or nothing, past `LCS_CELLS`).
 */
export function commonPairs(a: string[], b: string[]): Array<[number, number]> {
    let start = 0;
    while (start < a.length && start < b.length && a[start] === b[start]) start++;
    let end = 0;
    while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end]) end++;
    const pairs: Array<[number, number]> = [];
    for (let k = 0; k < start; k++) pairs.push([k, k]);
    const n = a.length - start - end;
    const m = b.length - start - end;
    if (n > 0 && m > 0 && n * m <= LCS_CELLS) {
        // len[x][y]: the longest common subsequence of a[start+x..] and b[start+y..] (middle only).
        const width = m + 1;
        const len = new Uint32Array((n + 1) * width);
        for (let x = n - 1; x >= 0; x--) {
            for (let y = m - 1; y >= 0; y--) {
                len[x * width + y] = a[start + x] === b[start + y] ? len[(x + 1) * width + y + 1] + 1 : Math.max(len[(x + 1) * width + y], len[x * width + y + 1]);
            }
        }
        let x = 0;
        let y = 0;
        while (x < n && y < m) {
            if (a[start + x] === b[start + y]) {
                pairs.push([start + x, start + y]);
                x++;
                y++;
            } else if (len[(x + 1) * width + y] >= len[x * width + y + 1]) {
                x++;
            } else {
                y++;
            }
        }
    }
    for (let k = end; k > 0; k--) pairs.push([a.length - k, b.length - k]);
    return pairs;
}

/** One line about a diagnostic: a corrupt line a lenient read skipped, or a dangling tool call. */
export function diagnosticText(d: Diagnostic): string {
    if (d.kind === 'corrupt') {
        const c = d.corruption;
        return `${c.message} (line ${c.line}${c.id ? `, entry ${c.id}` : ''}; ${d.action})`;
    }
    const what = d.kind === 'orphanToolResult' ? 'a tool result without its call' : 'a tool call without its result';
    return `${what} (entry ${d.entryId}, tool call ${d.toolCallId})`;
}

function roleTitle(m: ContextMessage): string {
    switch (m.role) {
        case 'toolResult':
            return `tool result: ${str(m.toolName)}${m.isError ? ' (error)' : ''}`;
        case 'bashExecution':
            return `bash: ${str(m.command)}`;
        case 'custom':
            return `custom: ${str(m.customType)}`;
        case 'compactionSummary':
            return `compaction summary${typeof m.tokensBefore === 'number' ? ` (${m.tokensBefore} tokens before)` : ''}`;
        case 'branchSummary':
            return 'branch summary';
        case 'assistant':
            return `assistant${m.model ? ` (${str(m.model)})` : ''}`;
        default:
            return m.role;
    }
}

function renderMessage(m: ContextMessage): string[] {
    if (m.role === 'compactionSummary' || m.role === 'branchSummary') return [cut(str(m.summary))];
    if (m.role === 'bashExecution') {
        const lines = [cut(str(m.output))];
        if (m.exitCode !== undefined && m.exitCode !== null) lines.push(`(exit code ${String(m.exitCode)})`);
        return lines;
    }
    const lines: string[] = [];
    const content = m.content;
    if (typeof content === 'string') return [cut(content)];
    if (!Array.isArray(content)) return ['(no content)'];
    for (const part of content as Array<Record<string, unknown>>) {
        switch (part?.type) {
            case 'text':
                lines.push(cut(str(part.text)));
                break;
            case 'thinking':
                lines.push(`> thinking: ${cut(str(part.thinking)).replace(/\n/g, '\n> ')}`);
                break;
            case 'toolCall':
                lines.push(`→ ${str(part.name)}(${cut(JSON.stringify(part.arguments ?? {}))})  [${str(part.id)}]`);
                break;
            case 'image':
                lines.push(`[image ${str(part.mimeType)}]`);
                break;
            default:
                lines.push(`[${str(part?.type)}]`);
        }
    }
    if (m.role === 'assistant' && typeof m.errorMessage === 'string') lines.push(`(error: ${m.errorMessage})`);
    return lines.length ? lines : ['(empty)'];
}

function str(v: unknown): string {
    return typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v);
}

function cut(s: string): string {
    return s.length > MAX_PART_CHARS ? `${s.slice(0, MAX_PART_CHARS)}… (${s.length - MAX_PART_CHARS} more characters)` : s;
}

/**
 * Whether the entry reaches the model at the leaf, and why: the daemon's sentence (`text`), so
 * the editor, the daemon and `sessiond explain` use one vocabulary.
 */
export function renderExplain(e: ExplainResult): string {
    const text = e.text.charAt(0).toUpperCase() + e.text.slice(1);
    return text.endsWith('.') ? text : `${text}.`;
}

/**
 * The entry that decides an explanation, when its reason names one: the compaction that
 * summarizes the entry (or supersedes it), the edit that replaced or omitted it, the entry
 * where its branch leaves the leaf's path.
 */
export function explainDecider(e: ExplainResult): EntryId | undefined {
    const r = e.reason as Record<string, unknown>;
    for (const k of ['compactionId', 'byCompactionId', 'editId', 'divergesAt', 'branchEntryId']) {
        if (typeof r[k] === 'string' && r[k] !== e.entryId) return r[k] as string;
    }
    return undefined;
}

/**
 * An explanation as markdown, whole (never cut): the sentence, what the entry adds at the leaf,
 * and a link (from `link`) to the entry that decides it.
 */
export function explainMarkdown(e: ExplainResult, link: (id: EntryId) => string | undefined): string {
    const decider = explainDecider(e);
    const lines = [`**${e.inContext ? 'In the context' : 'Not in the context'}** at leaf \`${e.leafId ?? '(none)'}\`: ${renderExplain(e)}`];
    const adds = (e as { contributes?: string }).contributes;
    if (adds) lines.push(`Adds at the leaf: ${adds === 'message' ? 'its message(s)' : adds === 'setting' ? 'a setting in effect' : 'nothing'}.`);
    if (decider) {
        const url = link(decider);
        lines.push(url ? `Decided by [entry ${decider}](${url}).` : `Decided by entry \`${decider}\`.`);
    }
    return lines.join('\n\n');
}

/** The retention probes split into kept and lost. */
export function retentionOf(c: CompactResult): { kept: RetentionProbe[]; lost: RetentionProbe[] } {
    if (isNothingToCompact(c)) return { kept: [], lost: [] };
    const probes = c.retention?.probes ?? [];
    return { kept: probes.filter((p) => p.status !== 'lost'), lost: probes.filter((p) => p.status === 'lost') };
}

const NOTHING_REASONS: Record<string, string> = {
    emptyPath: 'the path is empty',
    leafIsCompaction: 'the leaf is already a compaction',
    nothingBeforeCut: 'nothing lies before the cut point: what the path holds since its last compaction (or its start) is all recent enough to keep',
};

/** A short report of a compaction (or its dry run): tokens before and after, probes lost. */
export function renderCompact(c: CompactResult, dryRun: boolean): string {
    if (isNothingToCompact(c)) return `Nothing to compact: ${NOTHING_REASONS[c.reason] ?? c.reason}.`;
    const { kept, lost } = retentionOf(c);
    const head = `${dryRun ? 'Compaction would take' : 'Compacted'} the context from ${c.tokensBefore} to ${c.tokensAfter} tokens.`;
    const probes = `Retention: ${kept.length} kept, ${lost.length} lost.`;
    const lostList = lost.length ? ` Lost: ${lost.slice(0, 8).map((p) => `${p.kind} ${p.text}`).join('; ')}${lost.length > 8 ? '; …' : ''}.` : '';
    return `${head} ${probes}${lostList}`;
}

/** One row of the "Verify Before Resuming" list: a finding, what it can open, in a quick pick's terms. */
export interface VerifyItem {
    label: string;
    description: string;
    detail: string;
    finding: VerifyFinding;
}

/** The status words and icons of the findings list, most urgent first. */
const STATUS_ORDER: Record<string, number> = { fail: 0, warn: 1, ok: 2 };
const STATUS_ICON: Record<string, string> = { fail: '$(error)', warn: '$(warning)', ok: '$(pass)' };

/**
 * The findings of `session/verifyResume` as quick-pick rows: fail, then warn, then ok (the
 * daemon's order kept within each), labelled with the status icon and the kind, the file
 * and entry in the description, the sentence as detail.
 */
export function verifyItems(report: VerifyResumeResult): VerifyItem[] {
    const rows = report.findings.map((f, i) => ({ f, i }));
    rows.sort((a, b) => (STATUS_ORDER[a.f.status] ?? 3) - (STATUS_ORDER[b.f.status] ?? 3) || a.i - b.i);
    return rows.map(({ f }) => ({
        label: `${STATUS_ICON[f.status] ?? ''} ${f.kind}`.trim(),
        description: [f.path, f.entryId ? `entry ${f.entryId}` : undefined].filter(Boolean).join(' · '),
        detail: f.message,
        finding: f,
    }));
}

/** The one-line summary shown above the findings, naming the git repository read (if any). */
export function verifySummary(report: VerifyResumeResult): string {
    const { ok, warn, fail } = report.counts;
    const verdict = report.attention ? 'needs attention before resuming' : 'nothing needs attention';
    const repo = report.repository ? ` (git ${report.repository.workTree})` : '';
    return `${report.leafId ?? '(no leaf)'} in ${report.cwd ?? '(no cwd)'}${repo}: ${fail} fail, ${warn} warn, ${ok} ok; ${verdict}`;
}

/** What a summary entry's explanation says of where it came from and what it kept. */
export interface SummaryAudit {
    /** A compaction (or a Claude Code compact boundary): the entries it replaced. */
    source?: SummarySource;
    /** A branch summary: the branch it replaced. */
    branch?: SummarizedBranch;
    audit: Retention;
    /** The explanation's sentence, which names both. */
    text: string;
}

/**
 * The audit in an explanation (`session/explain` on a compaction, a branch summary or a Claude
 * Code compact boundary), or `undefined` when the entry is no summary or the daemon gave none.
 * Read from any format's explanation: the fields are the same wherever the daemon gives them.
 */
export function auditOf(e: ExplainResult): SummaryAudit | undefined {
    const x = e as { source?: SummarySource; branch?: SummarizedBranch; audit?: Retention };
    if (!x.audit) return undefined;
    return { source: x.source ?? undefined, branch: x.branch ?? undefined, audit: x.audit, text: renderExplain(e) };
}

/** A retention probe's kind, in words. */
export const PROBE_KINDS: Record<RetentionProbe['kind'], string> = {
    readFile: 'read file',
    modifiedFile: 'modified file',
    toolError: 'tool error',
    pendingToolCall: 'tool call without a result',
    openTask: 'open task',
    lastUserRequest: 'last request',
};

/** "kept 31 of 43 facts, lost 12": the audit in a few words. */
export function auditHeadline(a: Retention): string {
    const total = a.kept + a.lost;
    return `kept ${a.kept} of ${total} fact${total === 1 ? '' : 's'}, lost ${a.lost}`;
}

/** Where a summary came from, in a few words (`338 entries 00247798…12bbdff5, keeps from 521cf246`). */
export function auditSourceText(s: SummaryAudit): string {
    if (s.source) {
        const span = s.source.firstId ? ` ${shortId(s.source.firstId)}…${shortId(s.source.lastId ?? '')}` : '';
        const kept = s.source.firstKeptEntryId ? `, keeps from ${shortId(s.source.firstKeptEntryId)}` : '';
        return `summarizes ${s.source.count} entries${span}${kept}`;
    }
    if (s.branch) {
        const span = s.branch.firstId ? ` ${shortId(s.branch.firstId)}…${shortId(s.branch.lastId ?? '')}` : '';
        return `summarizes a branch of ${s.branch.count} entries${span}${s.branch.leftAtId ? `, left at ${shortId(s.branch.leftAtId)}` : ''}`;
    }
    return '';
}

/** The probes, lost first (the daemon's order kept within each). */
export function auditProbes(a: Retention): RetentionProbe[] {
    return [...a.probes.filter((p) => p.status === 'lost'), ...a.probes.filter((p) => p.status !== 'lost')];
}

/** One row of the "Show Summary Audit" list: a probe, lost or kept, and the entry it came from. */
export interface AuditItem {
    label: string;
    description: string;
    detail?: string;
    probe: RetentionProbe;
}

/** The probes as quick-pick rows: lost first, each naming its kind and the entry it came from. */
export function auditItems(a: Retention): AuditItem[] {
    return auditProbes(a).map((p) => ({
        label: `${p.status === 'lost' ? '$(error) lost' : '$(pass) kept'}: ${PROBE_KINDS[p.kind] ?? p.kind} ${p.text}`,
        description: [p.entryId ? `from ${p.entryId}` : 'from no entry', p.foundIn ? `kept in ${p.foundIn}` : ''].filter(Boolean).join(' · '),
        probe: p,
    }));
}

/** Escapes text for a markdown tooltip (paths hold `_` and `*`). */
function md(text: string): string {
    return text.replace(/[\\`*_{}[\]()#+\-.!|<>]/g, '\\$&');
}

/** How many probes a tooltip lists before it says how many more there are. */
export const AUDIT_TOOLTIP_PROBES = 12;

/**
 * The audit as a markdown tooltip: the sentence, then the lost facts, each linking (`link`
 * gives the target, a `command:` URI) to the entry it came from.
 */
export function auditTooltip(s: SummaryAudit, link: (p: RetentionProbe) => string | undefined): string {
    const out = [`**${md(auditHeadline(s.audit))}**${auditSourceText(s) ? ` · ${md(auditSourceText(s))}` : ''}`, ''];
    const lost = s.audit.probes.filter((p) => p.status === 'lost');
    for (const p of lost.slice(0, AUDIT_TOOLTIP_PROBES)) {
        const target = link(p);
        const from = p.entryId ? (target ? `[${md(shortId(p.entryId))}](${target})` : md(shortId(p.entryId))) : 'no entry';
        out.push(`- lost ${md(PROBE_KINDS[p.kind] ?? p.kind)} \`${p.text.replace(/`/g, "'")}\` ← ${from}`);
    }
    if (lost.length > AUDIT_TOOLTIP_PROBES) out.push(`- … ${lost.length - AUDIT_TOOLTIP_PROBES} more lost ("Show Summary Audit" lists them all)`);
    if (lost.length === 0) out.push('Nothing the probes look for was lost.');
    return out.join('\n');
}

/** The first characters of a long id (a Claude Code uuid), as rows and titles show it. */
export function shortId(id: string): string {
    return /^[0-9a-f]{8}-[0-9a-f]{4}-/.test(id) ? id.slice(0, 8) : id;
}

/** `1 entry`, `2 entries`. */
function count(n: number, one: string, many = `${one}s`): string {
    return `${n} ${n === 1 ? one : many}`;
}

/** A side's counts in a few words. */
function sideText(s: ComparedSide): string {
    const calls = Object.values(s.toolCalls).reduce((a, b) => a + b, 0);
    return [count(s.entries, 'entry', 'entries'), count(s.userTurns, 'user turn'), count(s.assistantMessages, 'assistant message'), count(calls, 'tool call')].join(', ');
}

/**
 * A `session/compareBranches` result in one line, for a notification: the fork point, what
 * each side did after it, and how the two contexts differ.
 */
export function comparisonSummary(c: CompareBranchesResult): string {
    const fork = c.forkPointId ? `part after ${shortId(c.forkPointId)}` : 'share no entry';
    const parts = [
        `${shortId(c.leafA)} and ${shortId(c.leafB)} ${fork}`,
        `A: ${sideText(c.sideA)}`,
        `B: ${sideText(c.sideB)}`,
        `context: ${c.contextCommon} shared, ${c.contextOnlyA.length} only at A, ${c.contextOnlyB.length} only at B${c.contextChanged.length ? `, ${c.contextChanged.length} reach the model differently` : ''}`,
    ];
    if (c.thinkingLevel) parts.push(`thinking level ${str(c.thinkingLevel.a) || '(none)'} → ${str(c.thinkingLevel.b) || '(none)'}`);
    if (c.model) parts.push(`model ${modelText(c.model.a)} → ${modelText(c.model.b)}`);
    return parts.join('; ');
}

function modelText(v: unknown): string {
    if (v && typeof v === 'object') {
        const m = v as { provider?: unknown; modelId?: unknown };
        return [m.provider, m.modelId].filter((x) => typeof x === 'string').join('/') || JSON.stringify(v);
    }
    return str(v) || '(none)';
}

/** Entries listed per side in the report before it says how many more there are. */
export const REPORT_ENTRIES = 40;

/** Context differences grouped by their reason's words, each with its count and first ids. */
function differenceLines(list: ContextDifference[]): string[] {
    const byText = new Map<string, string[]>();
    for (const d of list) byText.set(d.text, [...(byText.get(d.text) ?? []), d.id]);
    return [...byText].map(([text, ids]) => `- ${ids.length} ${text}: ${ids.slice(0, 6).map(shortId).join(', ')}${ids.length > 6 ? ', …' : ''}`);
}

/**
 * A `session/compareBranches` result as a document: the fork point, each side's counts, the
 * entries only on each path, and the context difference with its reasons.
 */
export function renderComparison(c: CompareBranchesResult, heading: { path: string; name: string | null }): string {
    const out: string[] = [];
    out.push(`# Comparison${heading.name ? ` — ${heading.name}` : ''}`);
    out.push('');
    out.push(`- file: ${heading.path}`);
    out.push(`- A (the active leaf): ${c.leafA}`);
    out.push(`- B: ${c.leafB}`);
    out.push(`- fork point: ${c.forkPointId ?? '(none: the paths share no entry)'}`);
    for (const d of c.diagnostics ?? []) out.push(`- warning: ${diagnosticText(d)}`);
    out.push('');
    out.push('## After the fork point');
    out.push('');
    out.push('| | A | B |');
    out.push('| --- | --- | --- |');
    const row = (what: string, f: (s: ComparedSide) => string) => out.push(`| ${what} | ${f(c.sideA)} | ${f(c.sideB)} |`);
    row('entries', (s) => String(s.entries));
    row('user turns', (s) => String(s.userTurns));
    row('assistant messages', (s) => String(s.assistantMessages));
    row('tool calls', (s) => Object.entries(s.toolCalls).map(([n, k]) => `${n} ${k}`).join(', ') || '–');
    row('files changed', (s) => s.filesChanged.join(', ') || '–');
    row('context tokens at the leaf', (s) => (s.tokenEstimate === null ? '?' : String(s.tokenEstimate)));
    row('setting changes', (s) => s.settingChanges.map((x) => `${x.setting} ${modelText(x.value)}`).join(', ') || '–');
    for (const [side, list] of [['A', c.onlyA], ['B', c.onlyB]] as const) {
        out.push('');
        out.push(`## Only on ${side}'s path (${list.length})`);
        out.push('');
        for (const e of list.slice(0, REPORT_ENTRIES)) out.push(`- ${e.id} · ${e.role ?? e.type}: ${e.preview}`);
        if (list.length > REPORT_ENTRIES) out.push(`- … ${list.length - REPORT_ENTRIES} more`);
    }
    out.push('');
    out.push('## What the model sees');
    out.push('');
    out.push(`- ${count(c.contextCommon, 'context entry', 'context entries')} reach${c.contextCommon === 1 ? 'es' : ''} the model the same way at both leaves`);
    if (c.contextOnlyA.length) out.push(`- ${c.contextOnlyA.length} only at A:`, ...differenceLines(c.contextOnlyA).map((l) => `  ${l}`));
    if (c.contextOnlyB.length) out.push(`- ${c.contextOnlyB.length} only at B:`, ...differenceLines(c.contextOnlyB).map((l) => `  ${l}`));
    for (const d of c.contextChanged) out.push(`- ${d.id} (${d.role ?? d.type}) reaches the model differently: ${d.text}`);
    if (c.thinkingLevel) out.push(`- thinking level: A ${str(c.thinkingLevel.a) || '(none)'}, B ${str(c.thinkingLevel.b) || '(none)'}`);
    if (c.model) out.push(`- model: A ${modelText(c.model.a)}, B ${modelText(c.model.b)}`);
    out.push('');
    return out.join('\n');
}

/** A rewind's refusal in one sentence (`session/rewind`'s `refusal`). */
export function rewindRefusalText(r: NonNullable<RewindResult['refusal']>): string {
    const paths = (r.paths ?? []).join(', ');
    switch (r.kind) {
        case 'drift': {
            const [verb, it] = (r.paths ?? []).length === 1 ? ['is', 'it'] : ['are', 'them'];
            return `${paths} ${verb} not as the session's records leave ${it} (the drift says why: changed or gone since, or records that do not apply); nothing changed (rewind with "Rewind Files (Force)" to overwrite ${it})`;
        }
        case 'unrestorable':
            return `cannot rewind ${paths}: the session does not hold their content at the entry, or they lie outside the working directory; nothing changed (\`sessiond rewind --exclude PATH\` leaves one alone)`;
        case 'relativeCwd':
            return `the session's working directory ${r.cwd ?? '?'} is relative: refused`;
        case 'missingCwd':
            return `the working directory ${r.cwd ?? '?'} does not exist here (a session from another machine, or a moved checkout?): refused`;
        default:
            return 'the session names no working directory: refused';
    }
}

/** How many files a rewind plan restores or removes. */
export function rewindChanges(r: RewindResult): number {
    return r.files.filter((f) => f.status === 'restore' || f.status === 'remove').length;
}

/**
 * A rewind plan as a diff document: one `#` line per file (what is done and why, drift with
 * its diff), the refusal, then the unified diffs of the changes.
 */
export function renderRewind(r: RewindResult): string {
    const lines = [`# Rewind files to ${r.entryId} (leaf ${r.leafId ?? 'none'}, cwd ${r.cwd ?? 'none'})${r.applied ? '' : ' · dry run'}`];
    if (r.files.length === 0) lines.push('# no file was changed by the session after the entry');
    for (const f of r.files) {
        lines.push(`# ${f.status.padEnd(9)} ${f.relative ?? f.path}: ${f.reason}`);
        if (f.drift) {
            lines.push(`#   drift: ${f.drift.message}`);
            for (const l of (f.drift.diff ?? '').split('\n').filter((l) => l !== '')) lines.push(`#   ${l}`);
        }
    }
    if (r.refusal) lines.push(`# REFUSED: ${rewindRefusalText(r.refusal)}`);
    for (const f of r.files) {
        if (f.diff) lines.push(...f.diff.split('\n').filter((l) => l !== ''));
    }
    return `${lines.join('\n')}\n`;
}
