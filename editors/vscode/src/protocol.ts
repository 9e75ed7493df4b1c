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

/** Where an unparsable, unterminated final line starts; `len` is its length in bytes. */
export interface TornTail {
    line: number;
    offset: number;
    len: number;
}

/** Where an open session stands; equal revisions mean equal state. */
export interface Revision {
    entryCount: number;
    appliedBytes: number;
    /** How many times the session was read again from the start. */
    generation: number;
}

export interface OpenParams {
    path: string;
    allowCorrupt?: boolean;
}

export interface OpenResult {
    /** The session file, canonical: notifications name it by this path. */
    path: string;
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
    revision: Revision;
    /** How the daemon follows the file; changes come as `session/didChangeLiveMode`. */
    liveMode: LiveMode;
}

/** `events`: live file-system events; `polling`: checked every second; `requests`: not followed. */
export type LiveMode = 'events' | 'polling' | 'requests';

export interface TreeParams {
    path: string;
    /** Start at this entry (included); the roots when left out. */
    fromId?: EntryId;
    /** How many levels below the start to include (daemon default 64). */
    depth?: number;
    /** At most this many nodes (daemon default 1000, at most 10 000). */
    limit?: number;
}

/**
 * A page of the tree, breadth-first. A node without `children` has children outside the page:
 * ask again with `fromId` = its id. Only `nodes` is required here, so hand-made pages work.
 */
export interface TreeResult {
    nodes: TreeNode[];
    /** Only on a page without `fromId`. */
    roots?: EntryId[];
    /** No node of the page has children left out. */
    complete?: boolean;
    leaves?: EntryId[];
    leafId?: EntryId | null;
    entryCount?: number;
    revision?: Revision;
}

export interface EntryParams {
    path: string;
    id: EntryId;
}

export interface EntryResult {
    id: EntryId;
    /** 1-based line of the entry in the file, and its byte offset. */
    line: number;
    offset: number;
    /** The line parsed. */
    entry: Record<string, unknown>;
    /** The line exactly as stored, without its newline. */
    raw: string;
    revision: Revision;
}

export interface ContextAtParams {
    path: string;
    leafId?: EntryId;
    /** First message of the window (default 0). */
    offset?: number;
    /** How many messages (default all). */
    limit?: number;
    /** `full` (default), `previews` (`{role, preview}` per message) or `ids` (no `messages`). */
    fields?: 'full' | 'previews' | 'ids';
}

/** A message as pi's `buildSessionContext` returns it. */
export interface ContextMessage {
    role: string;
    content?: unknown;
    [key: string]: unknown;
}

export interface ContextAtResult {
    /** Absent with `fields: "ids"`. */
    messages?: ContextMessage[];
    /** Omitted exactly when pi omits it. */
    thinkingLevel?: string;
    model: { provider?: string; modelId?: string } | null;
    /** The context entries (compaction-aware path). */
    entryIds: EntryId[];
    /** The entry that produced each message of the window. */
    messageEntryIds: EntryId[];
    leafId: EntryId | null;
    diagnostics: Diagnostic[];
    tornTail?: TornTail | null;
    /** How many messages the whole context has. */
    messageCount: number;
    /** Index of the window's first message. */
    offset: number;
    /** pi's estimateTokens (characters / 4) summed over all messages. */
    tokenEstimate: number;
    revision?: Revision;
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
    /** One of the context entries at the leaf (`contextAt`'s `entryIds`). */
    contextEntry: boolean;
    /** What the entry adds at the leaf. */
    contributes: 'message' | 'setting' | 'nothing';
    reason: ExplainReason;
    messageIndexes?: number[];
    /** The answer in one sentence, the words of `sessiond explain`. */
    text: string;
    revision?: Revision;
}

export interface ListParams {
    root?: string;
}

/** One session file found under a root, from its header line. */
export interface SessionSummary {
    path: string;
    /** The header's `id`. */
    id?: string;
    cwd?: string | null;
    /** The header's `timestamp`. */
    created?: unknown;
    /** The file's mtime, ISO 8601 UTC. */
    modified?: string | null;
    size?: number;
    /** Only for sessions the daemon has open. */
    name?: string;
}

export interface ListResult {
    root: string;
    /** Newest `modified` first. */
    sessions: SessionSummary[];
    /** `.jsonl` files without a readable header. */
    skipped: string[];
}

export interface DidChangeParams {
    path: string;
    added: TreeNode[];
    leafId: EntryId | null;
    leaves: EntryId[];
    entryCount: number;
    revision?: Revision;
}

export interface DidReloadParams {
    path: string;
    /** `shrank`, `replaced` or `rewritten`. */
    reason: string;
    leafId: EntryId | null;
    leaves: EntryId[];
    entryCount: number;
    revision?: Revision;
}

/** The session's path no longer names a file; the session keeps its last good state. */
export interface FileMissingParams {
    path: string;
    /** When the daemon found the file missing (ISO 8601, UTC). */
    since: string;
    revision: Revision;
}

/** The path names a file again; a `didReload` or `didChange` follows if it differs. */
export interface FileRestoredParams {
    path: string;
    revision: Revision;
}

export interface DidChangeLiveModeParams {
    path: string;
    liveMode: LiveMode;
}

export interface DidCorruptParams {
    path: string;
    kind: string;
    line: number;
    offset: number;
    id?: string;
    message: string;
    revision?: Revision;
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
    entryCount: number;
    droppedLabels: EntryId[];
    newLabels: EntryId[];
    rewritten: EntryId[];
}

/** The result of every append (`label`, `setName`, `branch`, `append`). */
export interface WriteResult {
    written: boolean;
    /** The new entry (null when nothing was written: a branch without summary). */
    id: EntryId | null;
    parentId: EntryId | null;
    /** The session's last entry after the write: the next `expectedLeafId`. */
    leafId: EntryId | null;
    offset?: number;
    added?: EntryId[];
    addedAfter?: EntryId[];
    repaired?: { sidecar: string; offset: number; len: number } | null;
    revision: Revision;
}

/** Data of a conflict error (-33010): the write was refused, nothing written. */
export interface ConflictData {
    path: string;
    expectedLeafId: EntryId | null;
    currentLeafId: EntryId | null;
    /** Entries after the expected leaf, in file order. */
    added: EntryId[];
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
    /** Required unless `dryRun`. */
    expectedLeafId: EntryId | null;
    keepRecentTokens?: number;
    /** The client's summary, stored verbatim (default: the embedded summarizer). */
    summary?: string;
    customInstructions?: string;
    /** Refuse (-33014, nothing written) when a retention probe would be lost. */
    requireRetention?: boolean;
    dryRun?: boolean;
}

/** A retention probe: something from the summarized span looked up in the new context. */
export interface RetentionProbe {
    kind: 'readFile' | 'modifiedFile' | 'toolError' | 'pendingToolCall' | 'openTask' | 'lastUserRequest' | string;
    text: string;
    entryId: EntryId | null;
    toolCallId?: string;
    status: 'kept' | 'lost';
    foundIn?: EntryId;
}

export interface Retention {
    kept: number;
    lost: number;
    probes: RetentionProbe[];
}

/** pi's "nothing to compact", answered as a result. */
export interface NothingToCompact {
    nothingToCompact: true;
    reason: 'emptyPath' | 'leafIsCompaction' | 'nothingBeforeCut';
    revision: Revision;
}

export interface CompactReport {
    dryRun: boolean;
    written: boolean;
    /** The compaction entry's id (the id it would get, on a dry run). */
    entryId: EntryId;
    /** The leaf whose path is compacted (the entry's parent). */
    leafId: EntryId;
    firstKeptEntryId: EntryId;
    tokensBefore: number | null;
    tokensAfter: number | null;
    isSplitTurn: boolean;
    readFiles: string[];
    modifiedFiles: string[];
    summarySource: 'client' | 'embedded';
    summary: string;
    retention: Retention;
    entry: Record<string, unknown>;
    revision: Revision;
    [key: string]: unknown;
}

export type CompactResult = CompactReport | NothingToCompact;

export function isNothingToCompact(c: CompactResult): c is NothingToCompact {
    return (c as NothingToCompact).nothingToCompact === true;
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
    fileMissing: 'session/fileMissing',
    fileRestored: 'session/fileRestored',
    didChangeLiveMode: 'session/didChangeLiveMode',
} as const;
