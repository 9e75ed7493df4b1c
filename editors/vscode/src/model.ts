//! The session tree as the "Sessions" view shows it. Pure: no `vscode`, no I/O; pages come in
//! from `session/tree`, changes from `session/didChange`, and the view asks for rows.
//!
//! The view follows pi's /tree: a chain of entries with one child each is shown as one flat
//! list of rows; where an entry has several children the list ends at that entry, which
//! expands into one "branch" row per child, and each branch expands into its own flat list.
//! A session with 1000 entries and two forks is then three short levels deep, not 1000.
//!
//! Pages may be partial: a node whose `childCount` is known but whose children are not all in
//! the model yet ends its list with a `more` row naming the entry to fetch below
//! (`session/tree {childrenOf}`, then `{after}` the last child that arrived, while a wide node's
//! children come in several pages). {@link loadChildren} fetches until no `more` rows are left.
//! A node's children are complete when a page lists them (`children`) or when as many as its
//! `childCount` have arrived, so the model never depends on which page brought them.

import { DidChangeParams, DidReloadParams, EntryId, OpenResult, TreeNode, TreeParams, TreeResult } from './protocol';

/** A row of the view. `more` rows stand for children not fetched yet (`id: null`: the roots). */
export type ViewItem =
    | { kind: 'entry'; id: EntryId }
    | { kind: 'branch'; id: EntryId }
    | { kind: 'fold'; id: EntryId }
    | { kind: 'more'; id: EntryId | null };

/**
 * A flat run folds its plain stretches: at least this many entries in a row that are none of
 * the run's first entry, its last {@link FOLD_KEEP_TAIL}, a leaf, a labelled entry, a
 * compaction, a branch summary or a session name become one `fold` row (their id is the first
 * folded entry's) that expands into them, as `sessiond tree` folds long runs.
 */
export const FOLD_MIN = 8;
/** Entries at the end of a run that never fold (the latest turns, next to the fork or leaf). */
export const FOLD_KEEP_TAIL = 3;
/** A row's preview text is cut to this many code points (the daemon's are up to 80). */
export const PREVIEW_CHARS = 48;
/** The first 8 characters of a uuid (Claude Code's line ids); other ids as they are. */
function shortRowId(id: EntryId): string {
    return /^[0-9a-f]{8}-[0-9a-f]{4}-/.test(id) ? id.slice(0, 8) : id;
}

/** Entry types that never fold. */
const NOTABLE_TYPES = new Set(['compaction', 'branch_summary', 'session_info']);

/** A node as the model keeps it: the wire node without its child list, plus its child ids. */
interface StoredNode {
    node: TreeNode;
    /** `undefined` while the children are not all loaded. */
    childIds: EntryId[] | undefined;
    /** The session's entry count when the page that brought the node was read. */
    seenAt: number;
}

/** Where a page starts: the roots (`{}`), an entry's children, or the siblings after an entry. */
export type TreeStart = Pick<TreeParams, 'childrenOf' | 'after'>;

/** What a `didChange` did to the model, for the view to refresh just that. */
export interface ChangeSummary {
    /** Ids of the added entries that the model now holds. */
    added: EntryId[];
    /** Entries whose children changed (a new child was linked); `null` stands for the roots. */
    parents: Array<EntryId | null>;
    /** Added `label` and `session_info` entries: fetch them (`session/entry`) and apply them with {@link SessionModel.applyEntry}. */
    needEntry: EntryId[];
    /** The default leaf moved. */
    leafMoved: boolean;
}

/** How an entry is marked in the view. */
export interface EntryMarks {
    leaf: boolean;
    defaultLeaf: boolean;
    activeLeaf: boolean;
    onActivePath: boolean;
    label: string | undefined;
}

/** How a row reads: `label` is the main text, `description` the dimmed text after it. */
export interface ItemText {
    label: string;
    description: string;
    tooltip: string;
}

export class SessionModel {
    private nodes = new Map<EntryId, StoredNode>();
    private rootIds: EntryId[] | undefined;
    /** Child id → parent id, for children known by id before their node is loaded. */
    private parentIndex = new Map<EntryId, EntryId>();
    /** Children that arrived for a parent whose child list is not complete yet, in pi's order. */
    private arrivals = new Map<EntryId, EntryId[]>();
    private activePathCache: Set<EntryId> | undefined;

    sessionId: string | undefined;
    name: string | null = null;
    entryCount = 0;
    leaves = new Set<EntryId>();
    /** pi's default leaf: the last entry appended (what pi resumes at). */
    defaultLeafId: EntryId | null = null;
    /** The leaf the user picked; `undefined` means the default leaf. */
    private chosenLeafId: EntryId | undefined;
    /** Set by `didReload`: the model is empty until refetched. */
    stale = false;
    /**
     * The header's format version (pi writes 3; a header without one is version 1); `undefined`
     * until opened or while the file has no header yet.
     */
    version: number | undefined;
    /** The file's format (`session/open`): a pi session or a Claude Code transcript; `undefined` until opened. */
    format: OpenResult['format'] | undefined;
    /** The working directory the header (pi) or the first line with one (Claude Code) records. */
    cwd: string | null = null;

    constructor(readonly path: string) {}

    /**
     * Whether the daemon appends to this file (label, compact, name, branch): pi's version-3
     * files only (-33015 for older ones). A Claude Code transcript takes no append at all
     * (-33021 `unsupportedForFormat`): its only write is a fork, a new file.
     */
    get appendable(): boolean {
        return this.format === 'pi' && this.version === 3;
    }

    /** Whether the daemon forks this file (every format it reads). */
    get forkable(): boolean {
        return this.format !== undefined;
    }

    /** Takes the header facts of `session/open`. Does not touch loaded nodes. */
    applyOpen(open: OpenResult): void {
        this.sessionId = open.sessionId ?? undefined;
        this.name = open.name;
        this.entryCount = open.entryCount;
        this.leaves = new Set(open.leaves);
        this.defaultLeafId = open.leafId;
        this.format = open.format;
        const header = open.header as { version?: unknown; cwd?: unknown } | null;
        const version = header?.version;
        // A Claude Code transcript has no header version: its lines are not pi's entries.
        this.version = open.format === 'pi' && header ? (typeof version === 'number' ? version : 1) : undefined;
        if (typeof header?.cwd === 'string') this.cwd = header.cwd;
        this.stale = false;
        this.activePathCache = undefined;
    }

    /**
     * Merges a `session/tree` page (from any start). A node's children become known when the
     * page lists them or when all `childCount` of them have arrived, over any number of pages.
     * Returns how many nodes were new.
     */
    addPage(page: TreeResult): number {
        let fresh = 0;
        for (const n of page.nodes) {
            if (!this.nodes.has(n.id)) fresh++;
            const previous = this.nodes.get(n.id);
            const { children, ...flat } = n;
            let childIds = children ?? (n.childCount === 0 ? [] : previous?.childIds);
            if (childIds === undefined) {
                const arrived = this.arrivals.get(n.id);
                if (arrived && arrived.length >= n.childCount) childIds = arrived;
            }
            if (childIds !== undefined) this.arrivals.delete(n.id);
            this.nodes.set(n.id, { node: flat, childIds, seenAt: page.revision?.entryCount ?? 0 });
            for (const c of childIds ?? []) this.parentIndex.set(c, n.id);
            if (n.parentId) this.arrive(n.parentId, n.id);
        }
        if (page.roots) {
            this.rootIds = page.roots;
        } else if (this.rootIds === undefined) {
            // A page without `roots` (made by hand): its root nodes are the roots.
            const roots = page.nodes.filter((n) => n.parentId === null).map((n) => n.id);
            if (roots.length > 0) this.rootIds = roots;
        }
        if (page.leafId !== undefined) this.defaultLeafId = page.leafId;
        if (page.entryCount !== undefined) this.entryCount = page.entryCount;
        this.activePathCache = undefined;
        return fresh;
    }

    /** Records that `child` arrived under `parentId`; completes the parent's child list. */
    private arrive(parentId: EntryId, child: EntryId): void {
        this.parentIndex.set(child, parentId);
        const parent = this.nodes.get(parentId);
        if (parent?.childIds !== undefined) return;
        const arrived = this.arrivals.get(parentId) ?? [];
        if (!arrived.includes(child)) arrived.push(child);
        if (parent && arrived.length >= parent.node.childCount) {
            parent.childIds = arrived;
            this.arrivals.delete(parentId);
        } else {
            this.arrivals.set(parentId, arrived);
        }
    }

    /**
     * Where the next page for the `more` row of `id` starts (`null`: the roots): after the last
     * child (or root) that arrived, else at the entry's children (or the roots).
     */
    nextStart(id: EntryId | null): TreeStart {
        if (id === null) {
            const missing = this.rootIds?.findIndex((r) => !this.nodes.has(r)) ?? -1;
            return this.rootIds && missing > 0 ? { after: this.rootIds[missing - 1] } : {};
        }
        const arrived = this.arrivals.get(id);
        return arrived && arrived.length > 0 ? { after: arrived[arrived.length - 1] } : { childrenOf: id };
    }

    /** Applies `session/didChange`: links the added entries under their parents, takes the new leaves. */
    applyDidChange(change: DidChangeParams): ChangeSummary {
        const summary: ChangeSummary = { added: [], parents: [], needEntry: [], leafMoved: change.leafId !== this.defaultLeafId };
        // The added entries are the file's last ones: the first is entry number `base + 1`.
        const base = (change.revision?.entryCount ?? change.entryCount) - change.added.length;
        for (const [i, n] of change.added.entries()) {
            const { children: _children, ...flat } = n;
            // A just-appended entry has no children yet other than later entries of this batch.
            if (!this.nodes.has(n.id)) this.nodes.set(n.id, { node: { ...flat, childCount: 0 }, childIds: [], seenAt: base + i + 1 });
            summary.added.push(n.id);
            if (n.type === 'label' || n.type === 'session_info') summary.needEntry.push(n.id);
            const parentId = n.parentId ?? null;
            if (parentId === null) {
                if (this.rootIds && !this.rootIds.includes(n.id)) {
                    this.rootIds.push(n.id);
                    summary.parents.push(null);
                }
                continue;
            }
            const parent = this.nodes.get(parentId);
            if (!parent) continue;
            if (parent.childIds === undefined) {
                // Its children are not all fetched: the next fetch brings this one too. The
                // parent's childCount counts it already when its page was read after it.
                if (parent.seenAt < base + i + 1) parent.node = { ...parent.node, childCount: parent.node.childCount + 1 };
                summary.parents.push(parentId);
                continue;
            }
            if (!parent.childIds.includes(n.id)) {
                parent.childIds.push(n.id);
                parent.node = { ...parent.node, childCount: parent.childIds.length };
                summary.parents.push(parentId);
            }
        }
        this.leaves = new Set(change.leaves);
        this.defaultLeafId = change.leafId;
        this.entryCount = change.entryCount;
        this.activePathCache = undefined;
        return summary;
    }

    /**
     * Applies an entry read with `session/entry`: a `label` entry sets or clears its target's
     * label (pi: the latest label entry for a target wins; an empty or missing label clears it),
     * a `session_info` entry sets the session name.
     */
    applyEntry(entry: Record<string, unknown>): boolean {
        if (entry.type === 'label' && typeof entry.targetId === 'string') {
            const target = this.nodes.get(entry.targetId);
            if (!target) return false;
            const text = typeof entry.label === 'string' && entry.label.trim() !== '' ? entry.label.trim() : undefined;
            target.node = { ...target.node, label: text };
            return true;
        }
        if (entry.type === 'session_info') {
            const name = typeof entry.name === 'string' && entry.name.trim() !== '' ? entry.name.trim() : null;
            this.name = name;
            return true;
        }
        return false;
    }

    /** Applies `session/didReload`: forgets every node and takes the new leaves; the view refetches the tree. */
    applyDidReload(reload: DidReloadParams): void {
        this.reset();
        this.leaves = new Set(reload.leaves);
        this.defaultLeafId = reload.leafId;
        this.entryCount = reload.entryCount;
        // A chosen leaf may be gone from the reloaded file.
        this.chosenLeafId = undefined;
        this.stale = false;
    }

    /** Forgets every node (the daemon restarted, or the file was reloaded). */
    reset(): void {
        this.nodes.clear();
        this.parentIndex.clear();
        this.arrivals.clear();
        this.rootIds = undefined;
        this.activePathCache = undefined;
        this.stale = true;
    }

    /** The leaf that context and explain use: the one the user chose, else the default leaf. */
    get activeLeafId(): EntryId | null {
        return this.chosenLeafId ?? this.defaultLeafId;
    }

    /** Chooses the active leaf (any entry can serve as a leaf); `undefined` goes back to the default. */
    setActiveLeaf(id: EntryId | undefined): void {
        this.chosenLeafId = id;
        this.activePathCache = undefined;
    }

    /** Whether the user chose a leaf other than the default. */
    get hasChosenLeaf(): boolean {
        return this.chosenLeafId !== undefined;
    }

    /** Every node loaded so far, in no particular order. */
    allNodes(): TreeNode[] {
        return [...this.nodes.values()].map((n) => n.node);
    }

    /** Loaded nodes whose children are not all loaded yet (fetch below them with {@link nextStart}). */
    incomplete(): EntryId[] {
        return [...this.nodes.values()].filter((n) => n.childIds === undefined && n.node.childCount > 0).map((n) => n.node.id);
    }

    node(id: EntryId): TreeNode | undefined {
        return this.nodes.get(id)?.node;
    }

    /** Child ids, or `undefined` when not loaded yet. */
    childIds(id: EntryId): EntryId[] | undefined {
        return this.nodes.get(id)?.childIds;
    }

    get roots(): EntryId[] | undefined {
        return this.rootIds;
    }

    get size(): number {
        return this.nodes.size;
    }

    /** Ids from the root down to `id`, as far as the parents are loaded. */
    pathTo(id: EntryId): EntryId[] {
        const path: EntryId[] = [];
        const seen = new Set<EntryId>();
        let cur: EntryId | null | undefined = id;
        while (cur && !seen.has(cur)) {
            const n = this.nodes.get(cur);
            if (!n) break;
            seen.add(cur);
            path.push(cur);
            cur = n.node.parentId;
        }
        return path.reverse();
    }

    private activePath(): Set<EntryId> {
        if (!this.activePathCache) {
            const leaf = this.activeLeafId;
            this.activePathCache = new Set(leaf ? this.pathTo(leaf) : []);
        }
        return this.activePathCache;
    }

    marks(id: EntryId): EntryMarks {
        const leaf = this.activeLeafId;
        return {
            leaf: this.leaves.has(id),
            defaultLeaf: id === this.defaultLeafId,
            activeLeaf: id === leaf,
            onActivePath: this.activePath().has(id),
            label: this.nodes.get(id)?.node.label,
        };
    }

    /**
     * Whether an entry is a summary whose audit `session/explain` gives (where it came from,
     * what it kept): a pi compaction or branch summary, a Claude Code compact boundary or the
     * compaction summary line after it, a Codex `compacted` line.
     */
    isSummary(id: EntryId): boolean {
        const n = this.nodes.get(id)?.node;
        if (!n) return false;
        if (this.format === 'claude-code') {
            return (n.type === 'system' && n.preview.startsWith('compact boundary')) || (n.type === 'user' && n.preview.startsWith('[compact summary]'));
        }
        if (this.format === 'codex') return n.type === 'compacted';
        return n.type === 'compaction' || n.type === 'branch_summary';
    }

    /**
     * Whether an entry starts a branch: its parent has several children, or it is one of
     * several roots. Such an entry is shown by its branch row, never again beneath it.
     */
    isBranchStart(id: EntryId): boolean {
        const parentId = this.nodes.get(id)?.node.parentId ?? this.parentIndex.get(id);
        if (!parentId) return (this.rootIds?.length ?? 0) > 1;
        const parent = this.nodes.get(parentId);
        return (parent?.childIds?.length ?? parent?.node.childCount ?? 0) >= 2;
    }

    /** The rows under a row (`undefined`: the session's top level). */
    children(item?: ViewItem): ViewItem[] {
        if (item === undefined) {
            if (this.rootIds === undefined) return [{ kind: 'more', id: null }];
            if (this.rootIds.length === 1) return this.segment(this.rootIds[0]);
            return this.rootIds.map((id) => ({ kind: 'branch', id }));
        }
        switch (item.kind) {
            case 'branch': {
                // The branch row shows its first entry: the rows beneath start after it.
                const rows = this.segment(item.id);
                return rows[0]?.kind === 'entry' && rows[0].id === item.id ? rows.slice(1) : rows;
            }
            case 'fold':
                return (this.foldAt(item.id) ?? []).map((id) => ({ kind: 'entry', id }));
            case 'entry': {
                const kids = this.childIds(item.id);
                if (kids === undefined) return (this.nodes.get(item.id)?.node.childCount ?? 0) >= 2 ? [{ kind: 'more', id: item.id }] : [];
                return kids.length >= 2 ? kids.map((id) => ({ kind: 'branch', id })) : [];
            }
            case 'more':
                return [];
        }
    }

    /** Whether a row can expand. */
    expandable(item: ViewItem): boolean {
        if (item.kind === 'fold') return true;
        if (item.kind === 'branch') return this.children(item).length > 0;
        if (item.kind === 'more') return false;
        const kids = this.childIds(item.id);
        return (kids?.length ?? this.nodes.get(item.id)?.node.childCount ?? 0) >= 2;
    }

    /** The rows of the flat run from `start`, its plain stretches folded ({@link FOLD_MIN}). */
    private segment(start: EntryId): ViewItem[] {
        return this.folded(this.run(start)).rows;
    }

    /** Folds the plain stretches of a run's rows; `folds` maps each fold's id to its entries. */
    private folded(run: ViewItem[]): { rows: ViewItem[]; folds: Map<EntryId, EntryId[]> } {
        const rows: ViewItem[] = [];
        const folds = new Map<EntryId, EntryId[]>();
        const entries = run.filter((r) => r.kind === 'entry').length;
        let plain: EntryId[] = [];
        const flush = () => {
            if (plain.length >= FOLD_MIN) {
                folds.set(plain[0], plain);
                rows.push({ kind: 'fold', id: plain[0] });
            } else {
                for (const id of plain) rows.push({ kind: 'entry', id });
            }
            plain = [];
        };
        run.forEach((r, i) => {
            if (r.kind === 'entry' && i > 0 && i < entries - FOLD_KEEP_TAIL && !this.notable(r.id)) {
                plain.push(r.id);
                return;
            }
            flush();
            rows.push(r);
        });
        flush();
        return { rows, folds };
    }

    /** Whether an entry always shows as a row of its own. */
    private notable(id: EntryId): boolean {
        const n = this.nodes.get(id)?.node;
        return !n || this.leaves.has(id) || id === this.defaultLeafId || !!n.label || NOTABLE_TYPES.has(n.type);
    }

    /** The entries of the fold whose first entry is `id`, or `undefined` when there is none now. */
    foldAt(id: EntryId): EntryId[] | undefined {
        return this.folded(this.run(this.runStart(id))).folds.get(id);
    }

    /** The fold that holds an entry now, if any. */
    private foldOf(id: EntryId): EntryId | undefined {
        for (const [foldId, ids] of this.folded(this.run(this.runStart(id))).folds) {
            if (ids.includes(id)) return foldId;
        }
        return undefined;
    }

    /** The first entry of the flat run that holds `id`: walk up while the parent has one child. */
    private runStart(id: EntryId): EntryId {
        const seen = new Set<EntryId>();
        let start = id;
        while (!seen.has(start)) {
            seen.add(start);
            const parentId = this.nodes.get(start)?.node.parentId ?? this.parentIndex.get(start);
            if (!parentId) break;
            if (this.childIds(parentId)?.length !== 1) break;
            start = parentId;
        }
        return start;
    }

    /** The flat run of rows from `start` down while each entry has exactly one child. */
    private run(start: EntryId): ViewItem[] {
        const rows: ViewItem[] = [];
        const seen = new Set<EntryId>();
        let cur: EntryId | undefined = start;
        while (cur !== undefined && !seen.has(cur)) {
            seen.add(cur);
            const stored = this.nodes.get(cur);
            if (!stored) {
                // Known as a child id only: fetch below its parent.
                rows.push({ kind: 'more', id: this.parentIndex.get(cur) ?? null });
                break;
            }
            rows.push({ kind: 'entry', id: cur });
            if (stored.childIds === undefined) {
                // One child continues this run; several make a fork that loads when expanded.
                if (stored.node.childCount === 1) rows.push({ kind: 'more', id: cur });
                break;
            }
            cur = stored.childIds.length === 1 ? stored.childIds[0] : undefined;
        }
        return rows;
    }

    /**
     * The row that lists `item` (`undefined`: the session's top level). An entry is listed by
     * the branch its run starts at; a branch by the entry it forks from.
     */
    parentOf(item: ViewItem): ViewItem | undefined {
        if (item.kind === 'more') return item.id === null ? undefined : this.parentOf({ kind: 'entry', id: item.id });
        if (item.kind === 'branch') {
            const parentId = this.nodes.get(item.id)?.node.parentId ?? this.parentIndex.get(item.id);
            return parentId ? { kind: 'entry', id: parentId } : undefined;
        }
        // An entry that starts a branch is drawn as its branch row.
        if (item.kind === 'entry' && this.isBranchStart(item.id)) return this.parentOf({ kind: 'branch', id: item.id });
        // An entry in a fold is listed by the fold; a fold (and any other entry) by its run's start.
        if (item.kind === 'entry') {
            const fold = this.foldOf(item.id);
            if (fold !== undefined) return { kind: 'fold', id: fold };
        }
        const start = this.runStart(item.id);
        const startParent = this.nodes.get(start)?.node.parentId ?? this.parentIndex.get(start);
        if (!startParent && this.rootIds?.length === 1 && this.rootIds[0] === start) return undefined;
        return { kind: 'branch', id: start };
    }

    /** The entries that `more` rows under `item` stand for (`null`: the roots). */
    missing(item?: ViewItem): Array<EntryId | null> {
        return this.children(item).filter((r) => r.kind === 'more').map((r) => r.id);
    }

    /** The text of an entry or branch row. */
    text(item: ViewItem): ItemText {
        if (item.kind === 'more') return { label: 'Loading…', description: '', tooltip: '' };
        if (item.kind === 'fold') {
            const ids = this.foldAt(item.id) ?? [];
            const kinds = new Map<string, number>();
            for (const id of ids) {
                const n = this.nodes.get(id)?.node;
                const k = n ? n.role ?? n.type : '?';
                kinds.set(k, (kinds.get(k) ?? 0) + 1);
            }
            const top = [...kinds].sort((a, b) => b[1] - a[1]);
            const parts = top.slice(0, 3).map(([k, c]) => `${c} ${k}`);
            if (top.length > 3) parts.push('…');
            const last = ids[ids.length - 1];
            return {
                label: `┆ ${ids.length} entries folded`,
                description: parts.join(', '),
                tooltip: `${ids.length} entries with one child each, ${item.id} to ${last ?? item.id}: ${top.map(([k, c]) => `${c} ${k}`).join(', ')}`,
            };
        }
        const n = this.nodes.get(item.id)?.node;
        if (!n) return { label: item.id, description: '', tooltip: item.id };
        const m = this.marks(item.id);
        const kind = n.role ?? n.type;
        // Short enough that the id, label and leaf marks after it stay visible in a side bar.
        const full = [...(n.preview || `(${n.type})`)];
        const preview = full.length > PREVIEW_CHARS ? `${full.slice(0, PREVIEW_CHARS - 1).join('')}…` : full.join('');
        // The id and the marks come first: a narrow side bar cuts the end of a row, and the
        // preview is what can be spared. A Claude Code uuid shows its first 8 characters.
        const head: string[] = [this.format === 'claude-code' ? shortRowId(n.id) : n.id];
        if (m.label) head.push(`[${m.label}]`);
        if (m.activeLeaf) head.push('● active leaf');
        else if (m.defaultLeaf) head.push('◀ resume leaf');
        else if (m.leaf) head.push('◀ leaf');
        const label = `${head.join(' ')} · ${kind}: ${preview}`;
        if (item.kind === 'branch') {
            return {
                label,
                description: ['branch', m.onActivePath ? 'on active path' : ''].filter(Boolean).join(' · '),
                tooltip: `branch starting at ${n.id} (${kind}): ${full.join('')}`,
            };
        }
        return {
            label,
            description: '',
            tooltip: `${n.type}${n.role ? ` (${n.role})` : ''} ${n.id}${n.timestamp ? ` at ${n.timestamp}` : ''}: ${full.join('')}`,
        };
    }
}

/**
 * Loads the whole tree into the model (for the branch graph): the roots, then below every node
 * whose children are missing, until none is or a fetch brings nothing new. At most `maxPages`.
 */
export async function loadAll(model: SessionModel, fetch: FetchPage, maxPages = 256): Promise<void> {
    await loadChildren(model, undefined, fetch);
    let pages = 0;
    for (;;) {
        const todo = model.incomplete();
        if (todo.length === 0 || pages >= maxPages) return;
        let fresh = 0;
        for (const id of todo) {
            if (pages++ >= maxPages) return;
            const before = model.childIds(id);
            fresh += model.addPage(await fetch(model.nextStart(id)));
            if (before === undefined && model.childIds(id) !== undefined) fresh++;
        }
        if (fresh === 0) return;
    }
}

/** Fetches a page of the tree from a start ({@link SessionModel.nextStart}). */
export type FetchPage = (start: TreeStart) => Promise<TreeResult>;

/**
 * The rows under `item`, fetching pages until none is `more`. Stops after `maxPages` fetches
 * or when a fetch brings nothing new (then the `more` row stays, so the view shows it).
 */
export async function loadChildren(model: SessionModel, item: ViewItem | undefined, fetch: FetchPage, maxPages = 64): Promise<ViewItem[]> {
    let pages = 0;
    while (pages < maxPages) {
        const missing = model.missing(item);
        if (missing.length === 0) break;
        let progressed = false;
        for (const id of missing) {
            if (pages >= maxPages) break;
            pages++;
            const hadRoots = model.roots !== undefined;
            const before = id === null ? undefined : model.childIds(id);
            const fresh = model.addPage(await fetch(model.nextStart(id)));
            if (fresh > 0 || (id !== null && before === undefined && model.childIds(id) !== undefined) || (id === null && !hadRoots && model.roots !== undefined)) {
                progressed = true;
            }
        }
        if (!progressed) break;
    }
    return model.children(item);
}
