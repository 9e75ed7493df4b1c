//! Unit tests of the view model (model.ts) and the renderings (render.ts), on hand-made pages.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { groupSessions, projectLabel } from '../groups';
import { loadChildren, SessionModel, TreeStart, ViewItem } from '../model';
import { DidChangeParams, ExplainResult, OpenResult, TreeNode, TreeResult } from '../protocol';
import { renderCompact, renderContext, renderExplain, verifyItems, verifySummary } from '../render';

/** A node with children given as ids (`undefined`: children left out of the page). */
function n(id: string, parentId: string | null, childCount: number, children?: string[], extra: Partial<TreeNode> = {}): TreeNode {
    return { id, parentId, type: 'message', role: 'user', preview: `text ${id}`, timestamp: null, childCount, ...(children ? { children } : {}), ...extra };
}

const revision = { entryCount: 6, appliedBytes: 600, generation: 0 };

/** A page of these nodes, with what a page always carries. */
function page(nodes: TreeNode[], extra: Partial<TreeResult> = {}): TreeResult {
    return { nodes, complete: true, next: [], leafId: 'e', entryCount: 6, revision, format: 'pi', ...extra };
}

/** A didChange of these nodes. */
function change(added: TreeNode[], leafId: string, leaves: string[], entryCount: number): DidChangeParams {
    return { path: '/s.jsonl', added, leafId, leaves, entryCount, revision: { ...revision, entryCount }, agent: null };
}

const open: OpenResult = {
    format: 'pi',
    path: '/s.jsonl',
    sessionId: 's1',
    pending: false,
    header: {},
    leafId: 'e',
    leaves: ['f', 'e'],
    entryCount: 6,
    name: 'demo',
    tornTail: null,
    diagnostics: [],
    revision: { entryCount: 6, appliedBytes: 600, generation: 0 },
    liveMode: 'events',
    agent: null,
};

/**  a → b → c ─┬→ d → f
 *              └→ e            (whole tree in one page) */
function fullPage(): TreeResult {
    return page([n('a', null, 1, ['b']), n('b', 'a', 1, ['c']), n('c', 'b', 2, ['d', 'e']), n('d', 'c', 1, ['f']), n('e', 'c', 0, []), n('f', 'd', 0, [])]);
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
        // A branch row shows its first entry; the rows beneath start after it.
        assert.deepEqual(ids(m.children({ kind: 'branch', id: 'd' })), ['entry:f']);
        assert.deepEqual(ids(m.children({ kind: 'branch', id: 'e' })), []);
        assert.equal(m.expandable({ kind: 'branch', id: 'e' }), false, 'a one-entry branch has nothing beneath');
        assert.equal(m.isBranchStart('d'), true);
        assert.equal(m.isBranchStart('f'), false);
        assert.deepEqual(m.parentOf({ kind: 'entry', id: 'd' }), { kind: 'entry', id: 'c' }, 'drawn as its branch row');
    });

    it('shows several roots as branches', () => {
        const m = new SessionModel('/s.jsonl');
        m.addPage(page([n('a', null, 0, []), n('z', null, 1, ['y']), n('y', 'z', 0, [])]));
        assert.deepEqual(ids(m.children()), ['branch:a', 'branch:z']);
        assert.deepEqual(ids(m.children({ kind: 'branch', id: 'z' })), ['entry:y']);
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
        // The id and the marks come before the preview (a narrow side bar cuts the end), once.
        assert.match(m.text({ kind: 'entry', id: 'f' }).label, /^f ● active leaf · /);
        assert.match(m.text({ kind: 'branch', id: 'd' }).description, /on active path/);
        assert.match(m.text({ kind: 'branch', id: 'e' }).label, /^e ◀ resume leaf · /);
        const rows = [...m.children(), ...m.children({ kind: 'entry', id: 'c' }), ...m.children({ kind: 'branch', id: 'd' })];
        assert.equal(rows.filter((r) => m.text(r).label.includes('● active leaf')).length, 1, 'the active leaf is marked once');
        m.setActiveLeaf(undefined);
        assert.equal(m.activeLeafId, 'e');
    });

    it('pages in children that the first page left out', async () => {
        const m = new SessionModel('/s.jsonl');
        // Depth-limited pages: `c` and `d` come without their children.
        const pages = new Map<string, TreeResult>([
            ['{}', page([n('a', null, 1, ['b']), n('b', 'a', 1, ['c']), n('c', 'b', 2)], { roots: ['a'] })],
            ['{"childrenOf":"c"}', page([n('d', 'c', 1), n('e', 'c', 0, [])])],
            ['{"childrenOf":"d"}', page([n('f', 'd', 0, [])])],
        ]);
        const asked: string[] = [];
        const fetch = async (start: TreeStart) => {
            const key = JSON.stringify(start);
            asked.push(key);
            const got = pages.get(key);
            assert.ok(got, `unexpected fetch ${key}`);
            return got;
        };
        assert.deepEqual(ids(await loadChildren(m, undefined, fetch)), ['entry:a', 'entry:b', 'entry:c']);
        assert.deepEqual(ids(m.children({ kind: 'entry', id: 'c' })), ['more:c'], 'a fork loads when expanded');
        assert.equal(m.expandable({ kind: 'entry', id: 'c' }), true, 'childCount says it forks before its children are loaded');
        // Expanding `c` fetches its children; the branch `d` then fetches below `d`.
        await loadChildren(m, { kind: 'entry', id: 'c' }, fetch);
        assert.deepEqual(ids(m.children({ kind: 'entry', id: 'c' })), ['branch:d', 'branch:e']);
        assert.deepEqual(ids(await loadChildren(m, { kind: 'branch', id: 'd' }, fetch)), ['entry:f']);
        assert.deepEqual(asked, ['{}', '{"childrenOf":"c"}', '{"childrenOf":"d"}']);
        assert.equal(m.size, 6);
    });

    it('gathers the children of a wide node over several pages', async () => {
        const m = new SessionModel('/s.jsonl');
        // `w` has five children; each page brings two, then says where the rest continues.
        const kids = ['k1', 'k2', 'k3', 'k4', 'k5'];
        m.addPage(page([n('w', null, 5)], { roots: ['w'], complete: false, next: [{ childrenOf: 'w' }] }));
        const asked: string[] = [];
        const fetch = async (start: TreeStart) => {
            asked.push(JSON.stringify(start));
            const from = start.childrenOf === 'w' ? 0 : kids.indexOf(start.after ?? '') + 1;
            const part = kids.slice(from, from + 2);
            const rest = from + 2 < kids.length ? [{ after: part[part.length - 1] }] : [];
            return page(part.map((k) => n(k, 'w', 0, [])), { complete: rest.length === 0, next: rest });
        };
        const rows = await loadChildren(m, { kind: 'entry', id: 'w' }, fetch);
        assert.deepEqual(asked, ['{"childrenOf":"w"}', '{"after":"k2"}', '{"after":"k4"}']);
        assert.deepEqual(m.childIds('w'), kids);
        assert.deepEqual(ids(rows), kids.map((k) => `branch:${k}`));
    });

    it('stops paging when a fetch brings nothing new', async () => {
        const m = new SessionModel('/s.jsonl');
        m.addPage(page([n('a', null, 1)]));
        let calls = 0;
        const rows = await loadChildren(m, undefined, async () => {
            calls++;
            return page([]);
        });
        assert.equal(calls, 1);
        assert.deepEqual(ids(rows), ['entry:a', 'more:a']);
    });

    it('applies didChange: appends to a run, forks a new branch, moves the leaf', () => {
        const m = new SessionModel('/s.jsonl');
        m.applyOpen(open);
        m.addPage(fullPage());
        const s1 = m.applyDidChange(change([n('g', 'e', 0), n('h', 'g', 0)], 'h', ['f', 'h'], 8));
        assert.deepEqual(s1.added, ['g', 'h']);
        assert.deepEqual(s1.parents, ['e', 'g']);
        assert.equal(s1.leafMoved, true);
        assert.deepEqual(ids(m.children({ kind: 'branch', id: 'e' })), ['entry:g', 'entry:h']);
        assert.equal(m.defaultLeafId, 'h');
        assert.equal(m.activeLeafId, 'h');
        assert.equal(m.entryCount, 8);
        assert.equal(m.marks('e').leaf, false);
        assert.equal(m.marks('h').defaultLeaf, true);
        // A second child of `a` turns the top run into a fork.
        m.applyDidChange(change([n('x', 'a', 0)], 'x', ['f', 'h', 'x'], 9));
        assert.deepEqual(ids(m.children()), ['entry:a']);
        assert.deepEqual(ids(m.children({ kind: 'entry', id: 'a' })), ['branch:b', 'branch:x']);
        assert.deepEqual(m.parentOf({ kind: 'entry', id: 'h' }), { kind: 'branch', id: 'e' });
        assert.deepEqual(m.parentOf({ kind: 'branch', id: 'e' }), { kind: 'entry', id: 'c' });
        assert.deepEqual(m.parentOf({ kind: 'entry', id: 'c' }), { kind: 'branch', id: 'b' });
        assert.equal(m.parentOf({ kind: 'entry', id: 'a' }), undefined);
    });

    it('applies a didChange that adds nothing and moves the leaf (a bookkeeping line)', () => {
        const m = new SessionModel('/s.jsonl');
        m.applyOpen(open);
        m.addPage(fullPage());
        const s = m.applyDidChange(change([], 'f', ['f', 'e'], 6));
        assert.deepEqual(s.added, []);
        assert.deepEqual(s.parents, []);
        assert.equal(s.leafMoved, true);
        assert.equal(m.defaultLeafId, 'f');
        assert.equal(m.entryCount, 6);
        assert.equal(m.marks('f').defaultLeaf, true);
        assert.equal(m.marks('e').defaultLeaf, false);
        assert.deepEqual(ids(m.children()), ['entry:a', 'entry:b', 'entry:c']);
    });

    it('asks for label and session_info entries and applies them', () => {
        const m = new SessionModel('/s.jsonl');
        m.applyOpen(open);
        m.addPage(fullPage());
        const s = m.applyDidChange(
            change([n('l1', 'e', 0, undefined, { type: 'label', role: undefined }), n('i1', 'l1', 0, undefined, { type: 'session_info', role: undefined })], 'i1', ['f', 'i1'], 8),
        );
        assert.deepEqual(s.needEntry, ['l1', 'i1']);
        assert.equal(m.applyEntry({ type: 'label', id: 'l1', targetId: 'c', label: 'checkpoint' }), true);
        assert.equal(m.marks('c').label, 'checkpoint');
        assert.match(m.text({ kind: 'entry', id: 'c' }).label, /^c \[checkpoint\] · /);
        assert.equal(m.applyEntry({ type: 'label', id: 'l2', targetId: 'c' }), true);
        assert.equal(m.marks('c').label, undefined);
        assert.equal(m.applyEntry({ type: 'label', id: 'l3', targetId: 'nope', label: 'x' }), false);
        m.applyEntry({ type: 'session_info', id: 'i1', name: 'renamed' });
        assert.equal(m.name, 'renamed');
    });

    it('links a didChange under a parent whose children are not loaded only by count', () => {
        const m = new SessionModel('/s.jsonl');
        // Read when the file had 3 entries: `b` has one child, not loaded.
        const at3 = { ...revision, entryCount: 3 };
        m.addPage(page([n('a', null, 0, [])], { revision: at3 }));
        m.addPage(page([n('a', null, 0, []), n('b', null, 1)], { roots: ['a', 'b'], revision: at3 }));
        assert.deepEqual(ids(m.children({ kind: 'branch', id: 'b' })), ['more:b']);
        // A fourth entry under `b`: two children now, so `b` forks and loads when expanded.
        const s = m.applyDidChange(change([n('d', 'b', 0)], 'd', ['a', 'd'], 4));
        assert.deepEqual(s.parents, ['b']);
        assert.equal(m.childIds('b'), undefined);
        assert.equal(m.node('b')?.childCount, 2);
        assert.deepEqual(ids(m.children({ kind: 'branch', id: 'b' })), []);
        assert.deepEqual(ids(m.children({ kind: 'entry', id: 'b' })), ['more:b']);
        // A page read after the change counts the child already: no second count.
        m.addPage(page([n('b', null, 2)], { revision: { ...revision, entryCount: 5 } }));
        m.applyDidChange(change([n('d', 'b', 0)], 'd', ['a', 'd'], 4));
        assert.equal(m.node('b')?.childCount, 2);
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
                diagnostics: [{ kind: 'missingToolResult', entryId: 'a1', toolCallId: 't1' }],
                tornTail: null,
                messageCount: 4,
                offset: 0,
                tokenEstimate: 42,
                revision,
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
        assert.match(text, /^- warning: a tool call without its result \(entry a1, tool call t1\)$/m);
    });

    it('explains in the daemon\'s words', () => {
        const e: ExplainResult = {
            entryId: 'e1',
            leafId: 'l1',
            type: 'thinking_level_change',
            inContext: false,
            contextEntry: true,
            contributes: 'setting',
            reason: { kind: 'neverInContext', entryType: 'thinking_level_change' },
            revision,
            text: 'entry e1 (thinking_level_change) at leaf l1: a context entry that adds no message; it sets the thinking level (high), in effect here',
        };
        assert.equal(
            renderExplain(e),
            'Entry e1 (thinking_level_change) at leaf l1: a context entry that adds no message; it sets the thinking level (high), in effect here.',
        );
    });

    it('reports a compaction with lost probes', () => {
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
                previousSummary: null,
                messagesToSummarize: 4,
                turnPrefixMessages: 0,
                readFiles: ['a.ts'],
                modifiedFiles: [],
                keepRecentTokens: 200,
                summarySource: 'embedded',
                summary: 's',
                fileOperations: '',
                retention: {
                    kept: 1,
                    lost: 1,
                    probes: [
                        { kind: 'readFile', text: 'a.ts', entryId: 'e1', status: 'kept', foundIn: 'c9' },
                        { kind: 'lastUserRequest', text: 'fix it', entryId: 'e2', status: 'lost' },
                    ],
                },
                entry: { type: 'compaction', id: 'c9', parentId: 'l1', timestamp: 't', summary: 's', firstKeptEntryId: 'k1', tokensBefore: 1000 },
                revision,
            },
            true,
        );
        assert.equal(text, 'Compaction would take the context from 1000 to 200 tokens. Retention: 1 kept, 1 lost. Lost: lastUserRequest fix it.');
        assert.equal(renderCompact({ nothingToCompact: true, reason: 'leafIsCompaction', revision }, true), 'Nothing to compact: the leaf is already a compaction.');
    });

    it('lists verify findings most urgent first, with file and entry', () => {
        const report = {
            format: 'pi' as const,
            path: '/s/a.jsonl',
            leafId: 'l1',
            cwd: '/w',
            repository: { workTree: '/w', gitDir: '/w/.git' },
            attention: true,
            counts: { ok: 1, warn: 1, fail: 1 },
            findings: [
                { status: 'ok' as const, kind: 'cwd', message: 'The working directory /w exists', path: '/w' },
                { status: 'warn' as const, kind: 'changedSince', message: '/w/a changed', path: '/w/a', entryId: 'e1', toolCallId: 'c1' },
                { status: 'fail' as const, kind: 'credentials', message: 'No credential' },
            ],
        };
        const items = verifyItems(report);
        assert.deepEqual(
            items.map((i) => [i.label, i.description, i.detail]),
            [
                ['$(error) credentials', '', 'No credential'],
                ['$(warning) changedSince', '/w/a · entry e1', '/w/a changed'],
                ['$(pass) cwd', '/w', 'The working directory /w exists'],
            ],
        );
        assert.equal(verifySummary(report), 'l1 in /w (git /w): 1 fail, 1 warn, 1 ok; needs attention before resuming');
        assert.equal(verifySummary({ ...report, repository: null }), 'l1 in /w: 1 fail, 1 warn, 1 ok; needs attention before resuming');
    });
});

describe('groupSessions', () => {
    const row = (p: string, format: 'pi' | 'claude-code' | undefined, cwd: string | null, modified: string) => ({ path: p, format, cwd, modified });

    it('groups by agent (pi, then Claude Code), then project, newest first', () => {
        const groups = groupSessions([
            row('/r/a.jsonl', 'pi', '/w/one', '2026-01-01T00:00:00Z'),
            row('/r/b.jsonl', 'claude-code', '/w/two', '2026-01-03T00:00:00Z'),
            row('/r/c.jsonl', 'pi', '/w/two', '2026-01-02T00:00:00Z'),
            row('/r/d.jsonl', 'pi', '/w/one', '2026-01-04T00:00:00Z'),
            row('/r/e.jsonl', 'pi', null, '2026-01-05T00:00:00Z'),
            // Opened by hand and not read yet: no format, counted as pi's.
            row('/r/f.jsonl', undefined, '/w/two', ''),
        ]);
        assert.deepEqual(
            groups.map((g) => [g.agent, g.count, g.projects.map((p) => [p.cwd, p.sessions.map((s) => s.path)])]),
            [
                ['pi', 5, [['/w/one', ['/r/d.jsonl', '/r/a.jsonl']], ['/w/two', ['/r/c.jsonl', '/r/f.jsonl']], [null, ['/r/e.jsonl']]]],
                ['claude-code', 1, [['/w/two', ['/r/b.jsonl']]]],
            ],
        );
        assert.deepEqual(groupSessions([]), []);
        assert.equal(projectLabel('/Users/me/work/sessiond'), 'sessiond');
        assert.equal(projectLabel('/'), '/');
        assert.equal(projectLabel(null), '(no working directory)');
    });

    it('offers appends only on pi version-3 files; a Claude Code transcript forks only', () => {
        const open = (format: 'pi' | 'claude-code', header: Record<string, unknown> | null) =>
            ({ format, path: '/r/x.jsonl', sessionId: null, pending: false, header, leafId: null, leaves: [], entryCount: 0, name: null, tornTail: null, diagnostics: [], revision: { entryCount: 0, appliedBytes: 0, generation: 0 }, liveMode: 'events', agent: null }) as OpenResult;
        const m = new SessionModel('/r/x.jsonl');
        assert.equal(m.forkable, false, 'not opened yet');
        m.applyOpen(open('pi', { type: 'session', version: 3, cwd: '/w' }));
        assert.deepEqual([m.appendable, m.forkable, m.cwd], [true, true, '/w']);
        m.applyOpen(open('pi', { type: 'session' }));
        assert.deepEqual([m.appendable, m.version], [false, 1]);
        m.applyOpen(open('claude-code', null));
        assert.deepEqual([m.appendable, m.forkable, m.version], [false, true, undefined]);
    });
});
