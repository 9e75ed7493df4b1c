//! The branch graph: a session's tree as a commit-graph-like picture. Pure: no `vscode`, no
//! I/O. Takes the tree's nodes (`session/tree`), the entries in context at the selected leaf
//! (`session/contextAt` entryIds) and the compactions' `firstKeptEntryId`s, folds plain
//! single-child runs into one node, and lays the rest out with d3-hierarchy's tidy tree
//! (Reingold–Tilford: the root at the top, time downwards, each branch in its own column).

import { hierarchy, HierarchyPointNode, tree } from 'd3-hierarchy';
import { EntryId, TreeNode } from './protocol';

/** A run of at least this many plain entries with one child each is drawn as one fold node. */
export const GRAPH_FOLD_MIN = 3;
/** Horizontal distance between columns and vertical distance between rows, in SVG units. */
export const GRAPH_DX = 220;
export const GRAPH_DY = 56;

/** What the graph is drawn from. */
export interface GraphInput {
    nodes: TreeNode[];
    /** The file's last entry: where pi resumes. */
    defaultLeafId: EntryId | null;
    /** The leaf the context is computed at (the selected entry, else the default leaf). */
    selectedLeafId: EntryId | null;
    /** The entries that reach the model at the selected leaf (`contextAt` entryIds). */
    inContext: EntryId[];
    /** Each compaction's `firstKeptEntryId` (from `session/entry`). */
    firstKept: Record<EntryId, EntryId | null>;
    name: string | null;
    /**
     * A Claude Code compact boundary's `logicalParentUuid`: the line it compacted. The boundary
     * starts a tree of its own (no `parentUuid`); the graph links the two with a dashed edge.
     */
    logicalParents?: Record<EntryId, EntryId>;
    /** Each summary's audit (`session/explain`'s `audit` on a compaction, branch summary or compact boundary). */
    audits?: Record<EntryId, GraphAudit>;
}

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

/** One node of the picture: an entry, or a fold of plain entries. */
export interface GraphNode {
    /** The entry's id; for a fold, its first entry's id. */
    id: EntryId;
    kind: 'entry' | 'fold';
    /** For a fold: every entry it holds, in order. */
    ids: EntryId[];
    /** `role` for messages, else the entry type; for a fold, "N entries". */
    title: string;
    preview: string;
    type: string;
    label?: string;
    x: number;
    y: number;
    leaf: boolean;
    defaultLeaf: boolean;
    selectedLeaf: boolean;
    /** Several children: a branch point. */
    branchPoint: boolean;
    /** How many of its entries reach the model at the selected leaf (0 for none). */
    inContext: number;
    /** On the path from the root to the selected leaf. */
    onPath: boolean;
    /** A compaction: the entries on its path that it summarizes (pi's prepareCompaction range). */
    summarizes?: { count: number; firstId: EntryId | null; lastId: EntryId | null; firstKeptEntryId: EntryId | null };
    /** The session name an entry sets (session_info). */
    name?: string;
    /** A summary's audit: what it kept and lost, each fact with the entry it came from. */
    audit?: GraphAudit;
}

export interface GraphEdge {
    from: EntryId;
    to: EntryId;
    onPath: boolean;
}

export interface Graph {
    nodes: GraphNode[];
    edges: GraphEdge[];
    /** From the node holding a compacted line to its compact boundary (Claude Code), laid out as parent and child, drawn dashed. */
    logicalEdges: Array<{ from: EntryId; to: EntryId; compacted: EntryId }>;
    /** Bounding box of the node centres. */
    minX: number;
    maxX: number;
    maxY: number;
    entryCount: number;
    leafCount: number;
    name: string | null;
    selectedLeafId: EntryId | null;
    defaultLeafId: EntryId | null;
}

interface Folded {
    id: EntryId;
    ids: EntryId[];
    children: Folded[];
}

/** Builds and lays out the graph. Nodes whose parent is missing are drawn as extra roots. */
export function layoutGraph(input: GraphInput): Graph {
    const byId = new Map(input.nodes.map((n) => [n.id, n]));
    const kids = new Map<EntryId | null, EntryId[]>();
    for (const n of input.nodes) {
        const p = n.parentId !== null && byId.has(n.parentId) ? n.parentId : null;
        const list = kids.get(p) ?? [];
        list.push(n.id);
        kids.set(p, list);
    }
    const leaves = new Set(input.nodes.filter((n) => (kids.get(n.id) ?? []).length === 0).map((n) => n.id));
    // A compact boundary is laid out under the line it compacted (its logical parent), so the
    // conversation reads top-down across its compactions; the edge between them is drawn dashed.
    const logicalKids = new Map<EntryId, EntryId[]>();
    const logicalChild = new Set<EntryId>();
    for (const [boundary, parent] of Object.entries(input.logicalParents ?? {})) {
        if (!byId.has(boundary) || !byId.has(parent) || byId.get(boundary)?.parentId !== null) continue;
        logicalKids.set(parent, [...(logicalKids.get(parent) ?? []), boundary]);
        logicalChild.add(boundary);
    }
    const layoutKids = (id: EntryId): EntryId[] => [...(kids.get(id) ?? []), ...(logicalKids.get(id) ?? [])];
    const path = new Set<EntryId>();
    for (let cur = input.selectedLeafId; cur && byId.has(cur) && !path.has(cur); cur = byId.get(cur)?.parentId ?? null) path.add(cur);
    const inContext = new Set(input.inContext);

    const plain = (id: EntryId): boolean => {
        const n = byId.get(id);
        if (!n) return false;
        const c = kids.get(id) ?? [];
        // A compact boundary (it has a logical parent) or an audited summary stays a node of its own.
        const summary = id in (input.logicalParents ?? {}) || logicalKids.has(id) || id in (input.audits ?? {});
        return c.length === 1 && !n.label && !summary && !['compaction', 'branch_summary', 'session_info'].includes(n.type) && id !== input.selectedLeafId;
    };

    // Fold runs of plain entries: a node's chain of single children, cut where one is notable.
    // Iterative (sessions have thousands of entries; recursion would overflow the stack).
    const fold = (start: EntryId): Folded => {
        const root: Folded = { id: start, ids: [start], children: [] };
        const stack: Folded[] = [root];
        while (stack.length > 0) {
            const f = stack.pop() as Folded;
            // Extend a fold over its plain run (the first entry of a run stays its own node when
            // the run is short).
            let last = f.ids[f.ids.length - 1];
            if (plain(last)) {
                const run: EntryId[] = [last];
                let cur = (kids.get(last) ?? [])[0];
                while (cur !== undefined && plain(cur)) {
                    run.push(cur);
                    cur = (kids.get(cur) ?? [])[0];
                }
                if (run.length >= GRAPH_FOLD_MIN) {
                    f.ids = run;
                    last = run[run.length - 1];
                }
            }
            for (const c of layoutKids(last)) {
                const child: Folded = { id: c, ids: [c], children: [] };
                f.children.push(child);
                stack.push(child);
            }
        }
        return root;
    };

    const top: Folded = { id: '', ids: [], children: (kids.get(null) ?? []).filter((id) => !logicalChild.has(id)).map(fold) };
    const h = hierarchy<Folded>(top, (f) => f.children);
    const laid = tree<Folded>().nodeSize([GRAPH_DX, GRAPH_DY])(h);

    const nodes: GraphNode[] = [];
    const edges: GraphEdge[] = [];
    const logicalEdges: Graph['logicalEdges'] = [];
    let minX = 0;
    let maxX = 0;
    let maxY = 0;
    laid.each((p: HierarchyPointNode<Folded>) => {
        if (p.depth === 0) return;
        const f = p.data;
        const first = byId.get(f.id) as TreeNode;
        const lastId = f.ids[f.ids.length - 1];
        const isFold = f.ids.length > 1;
        const x = p.x;
        const y = (p.depth - 1) * GRAPH_DY;
        minX = Math.min(minX, x);
        maxX = Math.max(maxX, x);
        maxY = Math.max(maxY, y);
        const counts = new Map<string, number>();
        for (const id of f.ids) {
            const n = byId.get(id);
            const k = n ? n.role ?? n.type : '?';
            counts.set(k, (counts.get(k) ?? 0) + 1);
        }
        const node: GraphNode = {
            id: f.id,
            kind: isFold ? 'fold' : 'entry',
            ids: f.ids,
            title: isFold ? `${f.ids.length} entries` : first.role ?? first.type,
            preview: isFold
                ? [...counts].sort((a, b) => b[1] - a[1]).slice(0, 3).map(([k, c]) => `${c} ${k}`).join(', ')
                : first.preview,
            type: first.type,
            x,
            y,
            leaf: leaves.has(lastId),
            defaultLeaf: f.ids.includes(input.defaultLeafId ?? ''),
            selectedLeaf: f.ids.includes(input.selectedLeafId ?? ''),
            branchPoint: (kids.get(lastId) ?? []).length > 1,
            inContext: f.ids.filter((id) => inContext.has(id)).length,
            onPath: path.has(f.id),
        };
        if (first.label) node.label = first.label;
        const audit = isFold ? undefined : input.audits?.[first.id];
        if (audit) node.audit = audit;
        if (first.type === 'session_info' && !isFold) node.name = first.preview.replace(/^name:\s*/, '');
        if (first.type === 'compaction' && !isFold) {
            const firstKept = input.firstKept[first.id] ?? null;
            // The compaction summarizes the entries on its path before firstKeptEntryId.
            const above: EntryId[] = [];
            for (let cur = first.parentId; cur && byId.has(cur); cur = byId.get(cur)?.parentId ?? null) above.push(cur);
            above.reverse();
            // As pi's prepareCompaction (and sessiond's core/graph.rs): after the previous
            // compaction on the path (from its first kept entry), up to this one's first kept
            // entry; compactions themselves are not counted (an earlier one is carried in by
            // its summary).
            const isCompaction = (id: EntryId) => byId.get(id)?.type === 'compaction';
            let prevAt = -1;
            for (let i = above.length - 1; i >= 0; i--) {
                if (isCompaction(above[i])) {
                    prevAt = i;
                    break;
                }
            }
            let start = 0;
            if (prevAt >= 0) {
                const prevKept = input.firstKept[above[prevAt]];
                const k = prevKept ? above.indexOf(prevKept) : -1;
                start = k >= 0 && k < prevAt ? k : prevAt + 1;
            }
            const keptAt = firstKept ? above.indexOf(firstKept) : -1;
            const end = keptAt >= start ? keptAt : above.length;
            const summarized = above.slice(start, end).filter((id) => !isCompaction(id));
            node.summarizes = {
                count: summarized.length,
                firstId: summarized[0] ?? null,
                lastId: summarized[summarized.length - 1] ?? null,
                firstKeptEntryId: firstKept,
            };
        }
        nodes.push(node);
        if (p.parent && p.parent.depth > 0) {
            if (logicalChild.has(f.id)) {
                logicalEdges.push({ from: p.parent.data.id, to: f.id, compacted: input.logicalParents?.[f.id] ?? p.parent.data.id });
            } else {
                edges.push({ from: p.parent.data.id, to: f.id, onPath: path.has(f.id) });
            }
        }
    });
    return {
        nodes,
        edges,
        logicalEdges,
        minX,
        maxX,
        maxY,
        entryCount: input.nodes.length,
        leafCount: leaves.size,
        name: input.name,
        selectedLeafId: input.selectedLeafId,
        defaultLeafId: input.defaultLeafId,
    };
}
