//! Wire types of sessiond's JSON-RPC protocol (`protocol/README.md` and `protocol/schema/`).
//! Field names are the protocol's (camelCase like pi's). Pure types: no runtime code.

/** An entry id as written in the session file (8 hex digits in pi 1.6.0 files). */
export type EntryId = string;

/** One entry of the session tree as `session/tree` and `session/didChange` send it. */
export interface TreeNode {
    id: EntryId;
    /** `null` for a root. */
    parentId: EntryId | null;
    /** pi's entry type: `message`, `compaction`, `label`, `branch_summary`, ... */
    type: string;
    /** For `message` entries: `user`, `assistant`, `toolResult`, `bashExecution`, ... */
    role?: string;
    /** The label set on this entry by the latest `label` entry that targets it. */
    label?: string;
    /** One line, at most 80 characters. */
    preview: string;
    /** The entry's ISO timestamp as written. */
    timestamp: string | null;
    /** How many children the entry has in the file (also when `children` is left out). */
    childCount: number;
    /** Present when the page reaches this node's children: their ids, or the child nodes. */
    children?: Array<EntryId | TreeNode>;
}

/** A diagnostic about the file (a corruption that `allowCorrupt` let through, a dangling tool call). */
export interface Diagnostic {
    kind: string;
    message?: string;
    line?: number;
    offset?: number;
    id?: string;
    [key: string]: unknown;
}

/** Where an unparsable, unterminated final line starts. */
export interface TornTail {
    line: number;
    offset: number;
    [key: string]: unknown;
}

export interface OpenParams {
    path: string;
    allowCorrupt?: boolean;
}

export interface OpenResult {
    sessionId: string;
    /** The session header line, as JSON. */
    header: Record<string, unknown>;
    /** pi's default leaf: the last entry in the file. `null` for a session with no entries. */
    leafId: EntryId | null;
    leaves: EntryId[];
    entryCount: number;
    /** The name set by the latest `session_info` entry. */
    name: string | null;
    tornTail: TornTail | null;
    diagnostics: Diagnostic[];
}

export interface TreeParams {
    path: string;
    /** Start below this entry (its subtree); the roots when left out. */
    fromId?: EntryId;
    /** How many levels to include. */
    depth?: number;
}

/** A page of the tree. Fields other than `nodes` are optional so that a bare page still works. */
export interface TreeResult {
    nodes: TreeNode[];
    roots?: EntryId[];
    leaves?: EntryId[];
    leafId?: EntryId | null;
    defaultLeafId?: EntryId | null;
    entryCount?: number;
    [key: string]: unknown;
}

export interface EntryParams {
    path: string;
    id: EntryId;
}

export interface ContextAtParams {
    path: string;
    leafId?: EntryId;
    offset?: number;
    limit?: number;
    fields?: string[];
}

/** A message as pi's `buildSessionContext` returns it. */
export interface ContextMessage {
    role: string;
    content?: unknown;
    [key: string]: unknown;
}

export interface ContextAtResult {
    messages: ContextMessage[];
    thinkingLevel: string;
    model: { provider: string; modelId: string } | null;
    entryIds: EntryId[];
    messageEntryIds?: EntryId[];
    leafId?: EntryId | null;
    diagnostics: Diagnostic[];
    tokenEstimate?: number;
    /** How many messages the whole context has, when paged with `offset`/`limit`. */
    total?: number;
    [key: string]: unknown;
}

export interface ExplainParams {
    path: string;
    entryId: EntryId;
    leafId?: EntryId;
}

/** Why an entry is or is not in the context; `kind` names the case, other fields its ids. */
export interface ExplainReason {
    kind: string;
    [key: string]: unknown;
}

export interface ExplainResult {
    entryId: EntryId;
    leafId: EntryId | null;
    type: string;
    inContext: boolean;
    reason: ExplainReason;
    messageIndexes?: number[];
}

export interface ListParams {
    root?: string;
}

/** One session file found under the roots. */
export interface SessionSummary {
    path: string;
    sessionId?: string;
    name?: string | null;
    cwd?: string;
    timestamp?: string;
    entryCount?: number;
    [key: string]: unknown;
}

export interface ListResult {
    sessions: SessionSummary[];
    [key: string]: unknown;
}

export interface DidChangeParams {
    path: string;
    added: TreeNode[];
    leafId: EntryId | null;
    leaves: EntryId[];
    entryCount: number;
}

export interface DidReloadParams {
    path: string;
    /** `shrank`, `replaced` or `rewritten`. */
    reason: string;
}

export interface DidCorruptParams {
    path: string;
    kind: string;
    line: number;
    offset: number;
    [key: string]: unknown;
}

export interface ForkParams {
    path: string;
    entryId: EntryId;
    /** `at`: the new session ends at the entry; `before`: at its parent (to re-ask a question). */
    position: 'at' | 'before';
    targetDir?: string;
}

export interface ForkResult {
    path: string;
    sessionId: string;
    leafId: EntryId | null;
}

export interface LabelParams {
    path: string;
    targetId: EntryId;
    /** `null` removes the label. */
    label: string | null;
    /** The leaf the client saw; the write is refused when the file's leaf moved on. */
    expectedLeafId: EntryId | null;
}

export interface CompactParams {
    path: string;
    leafId?: EntryId;
    expectedLeafId: EntryId | null;
    keepRecentTokens?: number;
    dryRun?: boolean;
    [key: string]: unknown;
}

/** A retention probe: something from the summarized span looked up in the new context. */
export interface RetentionProbe {
    kind: string;
    value?: string;
    kept?: boolean;
    [key: string]: unknown;
}

export interface CompactResult {
    /** The compaction entry's id (the id it would get, on a dry run). */
    entryId: EntryId | null;
    leafId: EntryId | null;
    tokensBefore: number;
    tokensAfter: number;
    retention: {
        kept?: RetentionProbe[];
        lost?: RetentionProbe[];
        [key: string]: unknown;
    } | RetentionProbe[] | null;
    [key: string]: unknown;
}

/** Method and notification names, in one place. */
export const Methods = {
    open: 'session/open',
    close: 'session/close',
    tree: 'session/tree',
    entry: 'session/entry',
    contextAt: 'session/contextAt',
    explain: 'session/explain',
    list: 'session/list',
    fork: 'session/fork',
    label: 'session/label',
    compact: 'session/compact',
    didChange: 'session/didChange',
    didReload: 'session/didReload',
    didCorrupt: 'session/didCorrupt',
} as const;
