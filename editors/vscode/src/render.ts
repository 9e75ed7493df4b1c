//! Plain-text renderings of daemon answers for a person: the context preview document, the
//! explain sentence, the compaction report. Pure: no `vscode`, no I/O.

import { ClaudeContextAt, CompactResult, ContextAtResult, ContextMessage, Diagnostic, ExplainResult, isNothingToCompact, PiContextAt, RetentionProbe, VerifyFinding, VerifyResumeResult } from './protocol';

/** Whether a context is a Claude Code transcript's (the daemon says its `format`). */
export function isClaudeContext(ctx: ContextAtResult): ctx is ClaudeContextAt {
    return 'format' in ctx && ctx.format === 'claude-code';
}

/** Where a context was taken, for the preview's heading. */
export interface ContextHeading {
    path: string;
    name: string | null;
    leafId: string | null;
}

/** The longest text block shown for one content part; longer ones are cut with a note. */
export const MAX_PART_CHARS = 4000;

/**
 * The context at a leaf as a markdown-like document: a heading with model, thinking level and
 * token estimate, then one section per message in the order the model sees them, each naming
 * the entry it came from (`messageEntryIds`).
 */
export function renderContext(ctx: ContextAtResult, heading: ContextHeading): string {
    return isClaudeContext(ctx) ? renderClaudeContext(ctx, heading) : renderPiContext(ctx, heading);
}

/**
 * A Claude Code transcript's context: what Claude Code sends the model at the leaf (the Anthropic
 * Messages API `messages`), one section per message naming the lines it holds, then what Claude
 * adds at send time that the file does not hold.
 */
function renderClaudeContext(ctx: ClaudeContextAt, heading: ContextHeading): string {
    const out: string[] = [];
    out.push(`# Context (Claude Code)${heading.name ? ` — ${heading.name}` : ''}`);
    out.push('');
    out.push(`- file: ${heading.path}`);
    out.push(`- leaf: ${ctx.leafId}`);
    const messages = ctx.messages ?? [];
    const offset = ctx.offset ?? 0;
    out.push(`- model: ${ctx.model ?? '(none)'}; attachments as ${ctx.midConversationSystem ? 'system messages' : '<system-reminder> text'}`);
    out.push(`- messages: ${ctx.messageCount}${ctx.messageCount !== messages.length ? ` (showing ${offset + 1}–${offset + messages.length})` : ''}`);
    out.push(`- lines of the path not sent: ${ctx.dropped.length} (explain says why)`);
    for (const d of ctx.diagnostics ?? []) {
        out.push(`- warning: ${diagnosticText(d)}`);
    }
    messages.forEach((m, i) => {
        out.push('');
        const lines = ctx.messageEntryIds[offset + i] ?? [];
        out.push(`## ${offset + i + 1}. ${m.role}${lines.length ? `  (${lines.length === 1 ? 'line' : 'lines'} ${lines.join(', ')})` : ''}`);
        out.push('');
        out.push(...claudeContent(m.content));
    });
    out.push('');
    out.push('Not in the file: Claude Code adds a userContext reminder and a cache marker when it sends.');
    out.push('');
    return out.join('\n');
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

function renderPiContext(ctx: PiContextAt, heading: ContextHeading): string {
    const out: string[] = [];
    out.push(`# Context${heading.name ? ` — ${heading.name}` : ''}`);
    out.push('');
    out.push(`- file: ${heading.path}`);
    out.push(`- leaf: ${ctx.leafId ?? heading.leafId ?? '(none)'}`);
    const messages = ctx.messages ?? [];
    const count = ctx.messageCount ?? messages.length;
    const offset = ctx.offset ?? 0;
    out.push(`- model: ${ctx.model ? [ctx.model.provider, ctx.model.modelId].filter(Boolean).join('/') : '(none)'}`);
    out.push(`- thinking level: ${ctx.thinkingLevel ?? '(not set)'}`);
    out.push(`- messages: ${count}${count !== messages.length ? ` (showing ${offset + 1}–${offset + messages.length})` : ''}`);
    out.push(`- entries on the path in context: ${ctx.entryIds.length}`);
    if (ctx.tokenEstimate !== undefined) out.push(`- token estimate: ${ctx.tokenEstimate}`);
    for (const d of ctx.diagnostics ?? []) {
        out.push(`- warning: ${diagnosticText(d)}`);
    }
    messages.forEach((m, i) => {
        out.push('');
        const source = ctx.messageEntryIds?.[i];
        out.push(`## ${offset + i + 1}. ${roleTitle(m)}${source ? `  (entry ${source})` : ''}`);
        out.push('');
        out.push(...renderMessage(m));
    });
    out.push('');
    return out.join('\n');
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
