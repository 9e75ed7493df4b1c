//! Unit tests of the view model (model.ts) and the renderings (render.ts), on hand-made pages.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadChildren, SessionModel, ViewItem } from '../model';
import { OpenResult, TreeNode, TreeResult } from '../protocol';
import { renderCompact, renderContext, renderExplain } from '../render';

/** A node with children given as ids (`undefined`: children left out of the page). */
function n(id: string, parentId: string | null, childCount: number, children?: string[], extra: Partial<TreeNode> = {}): TreeNode {
    return { id, parentId, type: 'message', role: 'user', preview: `text ${id}`, timestamp: null, childCount, ...(children ? { children } : {}), ...extra };
}

const open: OpenResult = {
    path: '/s.jsonl',
    sessionId: 's1',
    header: {},
    leafId: 'e',
    leaves: ['f', 'e'],
    entryCount: 6,
    name: 'demo',
    tornTail: null,
    diagnostics: [],
    revision: { entryCount: 6, appliedBytes: 600, generation: 0 },
    liveMode: 'events',
};

/**  a → b → c ─┬→ d → f
 *              └→ e            (whole tree in one page) */
function fullPage(): TreeResult {
    return {
        nodes: [n('a', null, 1, ['b']), n('b', 'a', 1, ['c']), n('c', 'b', 2, ['d', 'e']), n('d', 'c', 1, ['f']), n('e', 'c', 0, []), n('f', 'd', 0, [])],
    };
}

const ids = (rows: ViewItem[]) => rows.map((r) => `${r.kind}:${r.id}`);

describe('SessionModel', () => {
    it('shows a run of single-child entries flat and a fork as branches', () => {
        const m = new SessionModel('/s.jsonl');
        m.applyOpen(open);
        assert.deepEqual(ids(m.children()), ['more:null']);
        m.addPage(fullPage());
        assert.deepEqual(m.roots, ['a']);
        assert.deepEqual(ids(m.children()), ['entry:a', 'entry:b', 'entry:c']);
        assert.equal(m.expandable({ kind: 'entry', id: 'c' }), true);
        assert.equal(m.expandable({ kind: 'entry', id: 'b' }), false);
        assert.deepEqual(ids(m.children({ kind: 'entry', id: 'c' })), ['branch:d', 'branch:e']);
        assert.deepEqual(ids(m.children({ kind: 'branch', id: 'd' })), ['entry:d', 'entry:f']);
        assert.deepEqual(ids(m.children({ kind: 'branch', id: 'e' })), ['entry:e']);
    });

    it('shows several roots as branches', () => {
        const m = new SessionModel('/s.jsonl');
        m.addPage({ nodes: [n('a', null, 0, []), n('z', null, 1, ['y']), n('y', 'z', 0, [])] });
        assert.deepEqual(ids(m.children()), ['branch:a', 'branch:z']);
        assert.deepEqual(ids(m.children({ kind: 'branch', id: 'z' })), ['entry:z', 'entry:y']);
        assert.equal(m.parentOf({ kind: 'branch', id: 'z' }), undefined);
        assert.deepEqual(m.parentOf({ kind: 'entry', id: 'y' }), { kind: 'branch', id: 'z' });
    });

    it('marks leaves, the default leaf, the chosen leaf and the active path', () => {
        const m = new SessionModel('/s.jsonl');
        m.applyOpen(open);
        m.addPage(fullPage());
        assert.equal(m.activeLeafId, 'e');
        assert.deepEqual(m.marks('e'), { leaf: true, defaultLeaf: true, activeLeaf: true, onActivePath: true, label: undefined });
        assert.equal(m.marks('d').onActivePath, false);
        assert.equal(m.marks('f').leaf, true);
        m.setActiveLeaf('f');
        assert.equal(m.activeLeafId, 'f');
        assert.equal(m.marks('d').onActivePath, true);
        assert.equal(m.marks('e').onActivePath, false);
        assert.equal(m.marks('e').defaultLeaf, true);
        assert.match(m.text({ kind: 'entry', id: 'f' }).description, /active leaf/);
        assert.match(m.text({ kind: 'branch', id: 'd' }).description, /on active path/);
        m.setActiveLeaf(undefined);
        assert.equal(m.activeLeafId, 'e');
    });

    it('pages in children that the first page left out', async () => {
        const m = new SessionModel('/s.jsonl');
        // Depth-limited pages: `c` and `d` come without their children.
        const pages = new Map<string | undefined, TreeResult>([
            [undefined, { nodes: [n('a', null, 1, ['b']), n('b', 'a', 1, ['c']), n('c', 'b', 2)] }],
            ['c', { nodes: [n('d', 'c', 1), n('e', 'c', 0)] }],
            ['d', { nodes: [n('f', 'd', 0)] }],
        ]);
        const asked: Array<string | undefined> = [];
        const fetch = async (fromId: string | undefined) => {
            asked.push(fromId);
            const page = pages.get(fromId);
            assert.ok(page, `unexpected fetch below ${fromId}`);
            return page;
        };
        assert.deepEqual(ids(await loadChildren(m, undefined, fetch)), ['entry:a', 'entry:b', 'entry:c']);
        assert.deepEqual(ids(m.children({ kind: 'entry', id: 'c' })), ['more:c'], 'a fork loads when expanded');
        assert.equal(m.expandable({ kind: 'entry', id: 'c' }), true, 'childCount says it forks before its children are loaded');
        // Expanding `c` fetches below it; the branch `d` then fetches below `d`.
        await loadChildren(m, { kind: 'entry', id: 'c' }, fetch);
        assert.deepEqual(ids(m.children({ kind: 'entry', id: 'c' })), ['branch:d', 'branch:e']);
        assert.deepEqual(ids(await loadChildren(m, { kind: 'branch', id: 'd' }, fetch)), ['entry:d', 'entry:f']);
        assert.deepEqual(asked, [undefined, 'c', 'd']);
        assert.equal(m.size, 6);
    });

    it('stops paging when a fetch brings nothing new', async () => {
        const m = new SessionModel('/s.jsonl');
        m.addPage({ nodes: [n('a', null, 1)] });
        let calls = 0;
        const rows = await loadChildren(m, undefined, async () => {
            calls++;
            return { nodes: [] };
        });
        assert.equal(calls, 1);
        assert.deepEqual(ids(rows), ['entry:a', 'more:a']);
    });

    it('flattens nested child nodes', () => {
        const m = new SessionModel('/s.jsonl');
        const nested: TreeNode = { ...n('a', null, 2), children: [{ ...n('b', 'a', 0), children: [] }, { ...n('c', 'a', 0), children: [] }] };
        m.addPage({ nodes: [nested] });
        assert.deepEqual(m.childIds('a'), ['b', 'c']);
        assert.deepEqual(ids(m.children()), ['entry:a']);
        assert.deepEqual(ids(m.children({ kind: 'entry', id: 'a' })), ['branch:b', 'branch:c']);
    });

    it('applies didChange: appends to a run, forks a new branch, moves the leaf', () => {
        const m = new SessionModel('/s.jsonl');
        m.applyOpen(open);
        m.addPage(fullPage());
        const s1 = m.applyDidChange({ path: '/s.jsonl', added: [n('g', 'e', 0), n('h', 'g', 0)], leafId: 'h', leaves: ['f', 'h'], entryCount: 8 });
        assert.deepEqual(s1.added, ['g', 'h']);
        assert.deepEqual(s1.parents, ['e', 'g']);
        assert.equal(s1.leafMoved, true);
        assert.deepEqual(ids(m.children({ kind: 'branch', id: 'e' })), ['entry:e', 'entry:g', 'entry:h']);
        assert.equal(m.defaultLeafId, 'h');
        assert.equal(m.activeLeafId, 'h');
        assert.equal(m.entryCount, 8);
        assert.equal(m.marks('e').leaf, false);
        assert.equal(m.marks('h').defaultLeaf, true);
        // A second child of `a` turns the top run into a fork.
        m.applyDidChange({ path: '/s.jsonl', added: [n('x', 'a', 0)], leafId: 'x', leaves: ['f', 'h', 'x'], entryCount: 9 });
        assert.deepEqual(ids(m.children()), ['entry:a']);
        assert.deepEqual(ids(m.children({ kind: 'entry', id: 'a' })), ['branch:b', 'branch:x']);
        assert.deepEqual(m.parentOf({ kind: 'entry', id: 'h' }), { kind: 'branch', id: 'e' });
        assert.deepEqual(m.parentOf({ kind: 'branch', id: 'e' }), { kind: 'entry', id: 'c' });
        assert.deepEqual(m.parentOf({ kind: 'entry', id: 'c' }), { kind: 'branch', id: 'b' });
        assert.equal(m.parentOf({ kind: 'entry', id: 'a' }), undefined);
    });

    it('asks for label and session_info entries and applies them', () => {
        const m = new SessionModel('/s.jsonl');
        m.applyOpen(open);
        m.addPage(fullPage());
        const s = m.applyDidChange({
            path: '/s.jsonl',
            added: [n('l1', 'e', 0, undefined, { type: 'label', role: undefined }), n('i1', 'l1', 0, undefined, { type: 'session_info', role: undefined })],
            leafId: 'i1',
            leaves: ['f', 'i1'],
            entryCount: 8,
        });
        assert.deepEqual(s.needEntry, ['l1', 'i1']);
        assert.equal(m.applyEntry({ type: 'label', id: 'l1', targetId: 'c', label: 'checkpoint' }), true);
        assert.equal(m.marks('c').label, 'checkpoint');
        assert.match(m.text({ kind: 'entry', id: 'c' }).description, /\[checkpoint\]/);
        assert.equal(m.applyEntry({ type: 'label', id: 'l2', targetId: 'c' }), true);
        assert.equal(m.marks('c').label, undefined);
        assert.equal(m.applyEntry({ type: 'label', id: 'l3', targetId: 'nope', label: 'x' }), false);
        m.applyEntry({ type: 'session_info', id: 'i1', name: 'renamed' });
        assert.equal(m.name, 'renamed');
    });

    it('links a didChange under a parent whose children are not loaded only by count', () => {
        const m = new SessionModel('/s.jsonl');
        m.addPage({ nodes: [n('a', null, 0, [])] });
        m.addPage({ nodes: [n('a', null, 0, []), n('b', null, 1)] });
        const s = m.applyDidChange({ path: '/s.jsonl', added: [n('c', 'b', 0)], leafId: 'c', leaves: ['a', 'c'], entryCount: 3 });
        assert.deepEqual(s.parents, ['b']);
        assert.equal(m.childIds('b'), undefined);
        assert.deepEqual(ids(m.children({ kind: 'branch', id: 'b' })), ['entry:b', 'more:b']);
    });

    it('forgets everything on reset (didReload)', () => {
        const m = new SessionModel('/s.jsonl');
        m.applyOpen(open);
        m.addPage(fullPage());
        m.reset();
        assert.equal(m.stale, true);
        assert.equal(m.size, 0);
        assert.deepEqual(ids(m.children()), ['more:null']);
        m.applyOpen(open);
        assert.equal(m.stale, false);
    });
});

describe('render', () => {
    it('renders a context with its heading and each message', () => {
        const text = renderContext(
            {
                messages: [
                    { role: 'compactionSummary', summary: 'Goal: split main.ts', tokensBefore: 100 },
                    { role: 'user', content: [{ type: 'text', text: 'hello' }] },
                    { role: 'assistant', content: [{ type: 'text', text: 'reading' }, { type: 'toolCall', id: 't1', name: 'read', arguments: { path: 'a.ts' } }], model: 'm1' },
                    { role: 'toolResult', toolName: 'read', isError: true, content: [{ type: 'text', text: 'ENOENT' }] },
                ],
                thinkingLevel: 'high',
                model: { provider: 'anthropic', modelId: 'claude' },
                entryIds: ['c1', 'u1', 'a1', 'r1'],
                messageEntryIds: ['c1', 'u1', 'a1', 'r1'],
                leafId: 'r1',
                diagnostics: [],
                messageCount: 4,
                offset: 0,
                tokenEstimate: 42,
            },
            { path: '/s.jsonl', name: 'demo', leafId: 'r1' },
        );
        assert.match(text, /^# Context — demo$/m);
        assert.match(text, /^- model: anthropic\/claude$/m);
        assert.match(text, /^- thinking level: high$/m);
        assert.match(text, /^- token estimate: 42$/m);
        assert.match(text, /^## 1\. compaction summary \(100 tokens before\) {2}\(entry c1\)$/m);
        assert.match(text, /^→ read\(\{"path":"a\.ts"\}\) {2}\[t1\]$/m);
        assert.match(text, /^## 4\. tool result: read \(error\) {2}\(entry r1\)$/m);
        assert.match(text, /^ENOENT$/m);
    });

    it('explains in the daemon\'s words', () => {
        const e = {
            entryId: 'e1',
            leafId: 'l1',
            type: 'thinking_level_change',
            inContext: false,
            contextEntry: true,
            contributes: 'setting' as const,
            reason: { kind: 'neverInContext', entryType: 'thinking_level_change' },
            text: 'entry e1 (thinking_level_change) at leaf l1: a context entry that adds no message; it sets the thinking level (high), in effect here',
        };
        assert.equal(
            renderExplain(e),
            'Entry e1 (thinking_level_change) at leaf l1: a context entry that adds no message; it sets the thinking level (high), in effect here.',
        );
    });

    it('reports a compaction with lost probes', () => {
        const revision = { entryCount: 3, appliedBytes: 300, generation: 0 };
        const text = renderCompact(
            {
                dryRun: true,
                written: false,
                entryId: 'c9',
                leafId: 'l1',
                firstKeptEntryId: 'k1',
                tokensBefore: 1000,
                tokensAfter: 200,
                isSplitTurn: false,
                readFiles: ['a.ts'],
                modifiedFiles: [],
                summarySource: 'embedded',
                summary: 's',
                retention: {
                    kept: 1,
                    lost: 1,
                    probes: [
                        { kind: 'readFile', text: 'a.ts', entryId: 'e1', status: 'kept', foundIn: 'c9' },
                        { kind: 'lastUserRequest', text: 'fix it', entryId: 'e2', status: 'lost' },
                    ],
                },
                entry: {},
                revision,
            },
            true,
        );
        assert.equal(text, 'Compaction would take the context from 1000 to 200 tokens. Retention: 1 kept, 1 lost. Lost: lastUserRequest fix it.');
        assert.equal(renderCompact({ nothingToCompact: true, reason: 'leafIsCompaction', revision }, true), 'Nothing to compact: the leaf is already a compaction.');
    });
});
