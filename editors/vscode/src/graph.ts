//! The branch graph: a session's tree as a commit-graph-like picture. Pure: no `vscode`, no
//! I/O. What is drawn is what the daemon says (`session/graph`): its nodes and folds, which
//! entries reach the model at the selected leaf, the path, the leaves, each compaction's range
//! and the entry its kept part starts at. Nothing of that is worked out here; this module only
//! lays the nodes out with d3-hierarchy's tidy tree (Reingold–Tilford: the root at the top,
//! time downwards, each branch in its own column) and opens folds the user asks to see into:
//! one level per click, a fold's user messages as landmarks with the runs between them folded
//! again (the entries a fold holds come from `session/tree`; they share the fold's context
//! membership, which the daemon never mixes within a fold). A Claude Code sidechain written in
//! the file hangs below the tool call that started it (dotted); a tool call that started a
//! subagent's own transcript names it, and a subagent's graph names what started it.

import { hierarchy, HierarchyPointNode, tree } from 'd3-hierarchy';
import { EntryId, GraphNode as WireNode, GraphResult, TreeNode } from './protocol';

/** Horizontal distance between columns and vertical distance between rows, in SVG units. */
export const GRAPH_DX = 250;
export const GRAPH_DY = 64;
/** An opened fold's run between two user messages is folded again from this many entries. */
export const SUBFOLD_MIN = 3;
/** An opened fold without user messages opens into runs of at most this many entries. */
export const CHUNK = 20;

/** A summary's audit as the graph shows it: the sentence, the counts, every probe with the entry it came from. */
export interface GraphAudit {
    /** `kept 0 of 46 facts, lost 46` */
    headline: string;
    /** Where the summary came from, in a few words. */
    source: string;
    kept: number;
    lost: number;
    /** Lost first. */
    probes: Array<{ kind: string; text: string; entryId: string | null; status: 'kept' | 'lost' }>;
}

/** The whole `session/graph` answer: its pages' nodes in row order. */
export interface DaemonGraph {
    name: string | null;
    entryCount: number;
    leafCount: number;
    defaultLeafId: EntryId | null;
    selectedLeafId: EntryId | null;
    contextEntryIds: EntryId[];
    nodes: WireNode[];
    /** A Claude Code subagent's own transcript: the transcript and tool call that started it. */
    parent: GraphParent | null;
}

/** What started a subagent's own transcript (`session/graph`'s `parent`). */
export type GraphParent = NonNullable<GraphResult['parent']>;

/** Asks for every page of `session/graph` (`fetch(offset)`) and joins them. */
export async function loadDaemonGraph(fetch: (offset: number) => Promise<GraphResult>): Promise<DaemonGraph> {
    const first = await fetch(0);
    const nodes = [...first.nodes];
    for (let next = first.nextOffset; next !== null; ) {
        const page = await fetch(next);
        nodes.push(...page.nodes);
        next = page.nextOffset;
    }
    return {
        name: first.name,
        entryCount: first.entryCount,
        leafCount: first.leafCount,
        defaultLeafId: first.defaultLeafId,
        selectedLeafId: first.selectedLeafId,
        contextEntryIds: first.contextEntryIds ?? [],
        nodes,
        parent: first.parent ?? null,
    };
}

/** What the graph is drawn from. */
export interface GraphInput {
    daemon: DaemonGraph;
    /** The tree's entries (`session/tree`): what a fold holds, when it is opened. */
    entries: TreeNode[];
    /** The folds opened, by {@link foldKey}. */
    open?: ReadonlySet<string>;
    /** Each summary's audit (`session/explain`'s `audit` on a compaction, branch summary or compact boundary). */
    audits?: Record<EntryId, GraphAudit>;
}

/** A fold's key: its first and last entries. */
export function foldKey(firstId: EntryId, lastId: EntryId): string {
    return `${firstId}…${lastId}`;
}

/** One node of the picture: an entry, or a fold of plain entries. */
export interface GraphNode {
    /** Unique in the picture: the entry's id, a fold's {@link foldKey}. */
    key: string;
    /** The entry's id; for a fold, its first entry's id. */
    id: EntryId;
    /** A fold's last entry (the id for an entry). */
    lastId: EntryId;
    kind: 'entry' | 'fold';
    /** Entries it stands for (1 for an entry). */
    count: number;
    /** `role` for messages, else the entry type; for a fold its most frequent kinds. */
    title: string;
    /** One line of the entry (a compaction: the range it summarizes, as the daemon says it). */
    preview: string;
    type: string;
    label?: string;
    name?: string;
    x: number;
    y: number;
    leaf: boolean;
    defaultLeaf: boolean;
    selectedLeaf: boolean;
    branchPoint: boolean;
    /** How many of its entries reach the model at the selected leaf. */
    inContext: number;
    onPath: boolean;
    /** A compaction's range, as the daemon gives it. */
    summarizes?: WireNode['summarizes'];
    /** The compactions whose kept part starts at this entry. */
    keptBy?: EntryId[];
    /** A Claude Code compact boundary: the line it compacted. */
    logicalParentId?: EntryId;
    /** Apart from the main conversation (a subagent's sidechain). */
    apart?: boolean;
    /** A tool call that started a subagent's own transcript: that transcript (its graph opens from here). */
    subagent?: WireNode['subagent'];
    /** The root of a sidechain written in the file: the tool call that started it. */
    startedBy?: WireNode['startedBy'];
    /** A tool call that started a sidechain written in the file: the sidechain's root. */
    sidechain?: WireNode['sidechain'];
    /** A fold opened into the nodes below it. */
    opened?: boolean;
    /** Drawn because the fold of this key was opened. */
    within?: string;
    /** A summary's audit: what it kept and lost, each fact with the entry it came from. */
    audit?: GraphAudit;
    /** The node in words ({@link describeNode}): its accessible name and hover. */
    description?: string;
}

export interface GraphEdge {
    from: string;
    to: string;
    onPath: boolean;
}

export interface Graph {
    nodes: GraphNode[];
    edges: GraphEdge[];
    /** From the node holding a compacted line to its compact boundary (Claude Code), laid out as parent and child, drawn dashed. */
    logicalEdges: Array<{ from: string; to: string; compacted: EntryId }>;
    /** From a tool call to the sidechain it started (Claude Code, in the file), laid out as parent and child, drawn dotted. */
    sidechainEdges: Array<{ from: string; to: string; toolUseId: string }>;
    /** A Claude Code subagent's own transcript: the transcript and tool call that started it. */
    parent: GraphParent | null;
    /** Bounding box of the node centres. */
    minX: number;
    maxX: number;
    maxY: number;
    entryCount: number;
    leafCount: number;
    /** Context entries at the selected leaf (`contextEntryIds`). */
    contextCount: number;
    name: string | null;
    selectedLeafId: EntryId | null;
    defaultLeafId: EntryId | null;
}

/** A node before layout, with the nodes hanging below it. */
interface Laid {
    node: Omit<GraphNode, 'x' | 'y'>;
    children: Laid[];
    /** Hangs below its parent by a logical link (a compact boundary under the line it compacted). */
    logical?: boolean;
    /** Hangs below the tool call that started it (a sidechain's root). */
    sidechain?: boolean;
}

/** The kinds a run of entries holds, most frequent first: `8 assistant, 4 toolResult, …`. */
function kinds(entries: TreeNode[]): string {
    const counts = new Map<string, number>();
    for (const n of entries) counts.set(n.role ?? n.type, (counts.get(n.role ?? n.type) ?? 0) + 1);
    const sorted = [...counts].sort((a, b) => b[1] - a[1]);
    return sorted.slice(0, 3).map(([k, c]) => `${c} ${k}`).join(', ') + (sorted.length > 3 ? ', …' : '');
}

const isUserTurn = (n: TreeNode) => n.type === 'message' && n.role === 'user';

/**
 * The nodes an opened fold shows, in order: each user message its own node, the runs between
 * folded again (from {@link SUBFOLD_MIN} entries); without user messages, runs of at most
 * {@link CHUNK}. A run that is opened too is replaced by what it shows.
 */
function openFold(entries: TreeNode[], fold: WireNode, open: ReadonlySet<string>, within: string): Array<Omit<GraphNode, 'x' | 'y'>> {
    const entry = (n: TreeNode): Omit<GraphNode, 'x' | 'y'> => ({
        key: n.id,
        id: n.id,
        lastId: n.id,
        kind: 'entry',
        count: 1,
        title: n.role ?? n.type,
        preview: n.preview,
        type: n.type,
        ...(n.label ? { label: n.label } : {}),
        leaf: false,
        defaultLeaf: false,
        selectedLeaf: false,
        branchPoint: false,
        inContext: fold.inContext ? 1 : 0,
        onPath: fold.onPath,
        ...(fold.apart ? { apart: true } : {}),
        within,
    });
    const run = (part: TreeNode[]): Array<Omit<GraphNode, 'x' | 'y'>> => {
        if (part.length < SUBFOLD_MIN) return part.map(entry);
        const key = foldKey(part[0].id, part[part.length - 1].id);
        if (open.has(key)) return [{ ...sub(part), opened: true }, ...openFold(part, fold, open, key)];
        return [sub(part)];
    };
    const sub = (part: TreeNode[]): Omit<GraphNode, 'x' | 'y'> => ({
        key: foldKey(part[0].id, part[part.length - 1].id),
        id: part[0].id,
        lastId: part[part.length - 1].id,
        kind: 'fold',
        count: part.length,
        title: kinds(part),
        preview: '',
        type: part[0].type,
        leaf: false,
        defaultLeaf: false,
        selectedLeaf: false,
        branchPoint: false,
        inContext: fold.inContext ? part.length : 0,
        onPath: fold.onPath,
        ...(fold.apart ? { apart: true } : {}),
        within,
    });
    const out: Array<Omit<GraphNode, 'x' | 'y'>> = [];
    if (entries.some(isUserTurn)) {
        let between: TreeNode[] = [];
        for (const n of entries) {
            if (isUserTurn(n)) {
                out.push(...run(between));
                between = [];
                out.push(entry(n));
            } else {
                between.push(n);
            }
        }
        out.push(...run(between));
    } else if (entries.length <= CHUNK) {
        out.push(...entries.map(entry));
    } else {
        // As even a split as chunks of at most CHUNK allow.
        const parts = Math.ceil(entries.length / CHUNK);
        const size = Math.ceil(entries.length / parts);
        for (let i = 0; i < entries.length; i += size) out.push(...run(entries.slice(i, i + size)));
    }
    return out;
}

/** The entries a fold holds, in order: from its first entry down the single children to its last. */
function foldEntries(fold: WireNode, byId: Map<EntryId, TreeNode>, kids: Map<EntryId, EntryId[]>): TreeNode[] | undefined {
    const out: TreeNode[] = [];
    for (let cur: EntryId | undefined = fold.id; cur !== undefined; ) {
        const n = byId.get(cur);
        if (!n) return undefined;
        out.push(n);
        if (cur === fold.lastId) break;
        cur = (kids.get(cur) ?? [])[0];
    }
    return out.length === fold.count && out[out.length - 1].id === fold.lastId ? out : undefined;
}

/** Lays out the daemon's graph, with the folds in `open` opened. */
export function layoutGraph(input: GraphInput): Graph {
    const d = input.daemon;
    const open = input.open ?? new Set<string>();
    const byId = new Map(input.entries.map((n) => [n.id, n]));
    const kids = new Map<EntryId, EntryId[]>();
    for (const n of input.entries) if (n.parentId !== null) kids.set(n.parentId, [...(kids.get(n.parentId) ?? []), n.id]);
    const keptBy = new Map<EntryId, EntryId[]>();
    for (const n of d.nodes) {
        const k = n.summarizes?.firstKeptEntryId;
        if (k) keptBy.set(k, [...(keptBy.get(k) ?? []), n.id]);
    }

    // Each row of the daemon's graph becomes a chain of nodes (one, or an opened fold's): its
    // first hangs below the parent row's last, the rows below it hang below its last.
    const heads: Laid[] = [];
    const tails: Laid[] = [];
    d.nodes.forEach((w) => {
        const own: Omit<GraphNode, 'x' | 'y'> = {
            key: w.kind === 'fold' ? foldKey(w.id, w.lastId) : w.id,
            id: w.id,
            lastId: w.lastId,
            kind: w.kind,
            count: w.count,
            title: w.title,
            preview: w.preview,
            type: w.type,
            ...(w.label !== undefined ? { label: w.label } : {}),
            ...(w.name !== undefined ? { name: w.name } : {}),
            leaf: w.leaf,
            defaultLeaf: w.defaultLeaf,
            selectedLeaf: w.selectedLeaf,
            branchPoint: w.branchPoint,
            inContext: w.inContext ? w.count : 0,
            onPath: w.onPath,
            ...(w.summarizes ? { summarizes: w.summarizes } : {}),
            ...(keptBy.has(w.id) ? { keptBy: keptBy.get(w.id) } : {}),
            ...(w.logicalParentId !== undefined ? { logicalParentId: w.logicalParentId } : {}),
            ...(w.apart ? { apart: true } : {}),
            ...(w.subagent ? { subagent: w.subagent } : {}),
            ...(w.startedBy ? { startedBy: w.startedBy } : {}),
            ...(w.sidechain ? { sidechain: w.sidechain } : {}),
        };
        const audit = w.kind === 'entry' ? input.audits?.[w.id] : undefined;
        if (audit) own.audit = audit;
        let chain: Array<Omit<GraphNode, 'x' | 'y'>> = [own];
        if (w.kind === 'fold' && open.has(own.key)) {
            const entries = foldEntries(w, byId, kids);
            if (entries) chain = [{ ...own, opened: true }, ...openFold(entries, w, open, own.key)];
        }
        const laid = chain.map((node) => ({ node, children: [] as Laid[] }));
        for (let i = 1; i < laid.length; i++) laid[i - 1].children.push(laid[i]);
        heads.push(laid[0]);
        tails.push(laid[laid.length - 1]);
    });
    const top: Laid = { node: undefined as unknown as Laid['node'], children: [] };
    d.nodes.forEach((w, row) => {
        if (w.parentRow !== null && tails[w.parentRow]) {
            tails[w.parentRow].children.push(heads[row]);
        } else if (w.logicalParentRow !== undefined && tails[w.logicalParentRow]) {
            heads[row].logical = true;
            tails[w.logicalParentRow].children.push(heads[row]);
        } else if (w.startedBy && heads[w.startedBy.row]) {
            // Below the call itself (never a fold), not below what an opened fold shows.
            heads[row].sidechain = true;
            heads[w.startedBy.row].children.push(heads[row]);
        } else {
            top.children.push(heads[row]);
        }
    });

    const h = hierarchy<Laid>(top, (l) => l.children);
    const laidOut = tree<Laid>().nodeSize([GRAPH_DX, GRAPH_DY])(h);
    const nodes: GraphNode[] = [];
    const edges: GraphEdge[] = [];
    const logicalEdges: Graph['logicalEdges'] = [];
    const sidechainEdges: Graph['sidechainEdges'] = [];
    let minX = 0;
    let maxX = 0;
    let maxY = 0;
    laidOut.each((p: HierarchyPointNode<Laid>) => {
        if (p.depth === 0) return;
        const y = (p.depth - 1) * GRAPH_DY;
        minX = Math.min(minX, p.x);
        maxX = Math.max(maxX, p.x);
        maxY = Math.max(maxY, y);
        const node: GraphNode = { ...p.data.node, x: p.x, y };
        node.description = describeNode(node);
        nodes.push(node);
        if (p.parent && p.parent.depth > 0) {
            const from = p.parent.data.node.key;
            if (p.data.logical) logicalEdges.push({ from, to: node.key, compacted: node.logicalParentId ?? p.parent.data.node.lastId });
            else if (p.data.sidechain) sidechainEdges.push({ from, to: node.key, toolUseId: node.startedBy?.toolUseId ?? '' });
            else edges.push({ from, to: node.key, onPath: node.onPath });
        }
    });
    return {
        nodes,
        edges,
        logicalEdges,
        sidechainEdges,
        parent: d.parent,
        minX,
        maxX,
        maxY,
        entryCount: d.entryCount,
        leafCount: d.leafCount,
        contextCount: d.contextEntryIds.length,
        name: d.name,
        selectedLeafId: d.selectedLeafId,
        defaultLeafId: d.defaultLeafId,
    };
}

/**
 * What a node says in words (its accessible name and its hover): the full title and preview,
 * the range a compaction summarizes and where its kept part starts, the marks.
 */
export function describeNode(n: GraphNode): string {
    const parts: string[] = [];
    parts.push(n.kind === 'fold' ? `${n.count} entries folded, ${n.id} to ${n.lastId}: ${n.title}` : `${n.title} ${n.id}`);
    if (n.preview && !n.summarizes) parts.push(n.preview);
    if (n.label) parts.push(`label ${n.label}`);
    if (n.name) parts.push(`names the session ${n.name}`);
    if (n.summarizes) {
        const s = n.summarizes;
        const range = s.firstId ? ` ${s.firstId}…${s.lastId}` : '';
        const prev = s.previousCompactionId ? ` and compaction ${s.previousCompactionId}'s summary` : '';
        parts.push(`compaction summarizing ${s.count} entries${range}${prev}, kept from ${s.firstKeptEntryId ?? 'none (nothing kept)'}`);
    }
    if (n.keptBy) parts.push(`kept from here by compaction ${n.keptBy.join(', ')}`);
    if (n.type === 'branch_summary' && n.kind === 'entry') parts.push('branch summary');
    if (n.audit) parts.push(`audit: ${n.audit.headline}`);
    if (n.logicalParentId) parts.push(`compacts the conversation at ${n.logicalParentId}`);
    if (n.apart) parts.push('apart from the main conversation');
    if (n.startedBy) parts.push(`sidechain started by tool_use ${n.startedBy.toolUseId} of ${n.startedBy.id}`);
    if (n.sidechain) parts.push(`started the sidechain ${n.sidechain.id}`);
    if (n.subagent) parts.push(`started subagent agent-${n.subagent.agentId} (${n.subagent.path})`);
    if (n.branchPoint) parts.push('branch point');
    if (n.selectedLeaf) parts.push('selected leaf');
    if (n.defaultLeaf) parts.push('resume leaf');
    else if (n.leaf) parts.push('leaf');
    if (n.inContext) parts.push(n.kind === 'fold' ? `${n.inContext} in context` : 'in context');
    else if (n.onPath) parts.push('on the path, not sent');
    if (n.kind === 'fold') parts.push(n.opened ? 'opened (click to close)' : 'click to open');
    return parts.filter(Boolean).join('; ');
}

/** The transcripts a graph links to: the subagents' its tool calls started, and its parent's. */
export function linkedPaths(graph: Graph | undefined): Set<string> {
    const out = new Set<string>();
    for (const n of graph?.nodes ?? []) if (n.subagent) out.add(n.subagent.path);
    if (graph?.parent) out.add(graph.parent.path);
    return out;
}
