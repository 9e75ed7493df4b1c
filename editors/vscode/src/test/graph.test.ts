//! The branch graph's layout (graph.ts) on the whole tree of examples/pi-v3-branched.jsonl as
//! the real daemon serves it: folds, branch points, leaves, the compaction's range, the path in
//! context at a chosen leaf.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { SessiondClient } from '../client';
import { GRAPH_FOLD_MIN, GraphAudit, layoutGraph } from '../graph';
import { auditHeadline, auditOf, auditProbes, auditSourceText, contextEntryIds, PROBE_KINDS } from '../render';
import { loadAll, SessionModel } from '../model';
import { addClaudeTranscript, BINARY, CLAUDE, DEFAULT_LEAF, ENTRY_COUNT, LEAVES, makeRoot, requireBinary } from '../testing/fixtures';

describe('branch graph layout', () => {
    let root: string;
    let file: string;
    let client: SessiondClient;
    let model: SessionModel;

    before(async () => {
        requireBinary();
        ({ root, file } = makeRoot());
        client = await SessiondClient.start({ binary: BINARY, roots: [root] });
        model = new SessionModel(file);
        model.applyOpen(await client.open(file));
        // Small pages, so that the whole tree arrives over several of them.
        await loadAll(model, (start) => client.tree({ path: file, depth: 1_000_000, limit: 300, ...start }));
    });

    after(async () => {
        if (client) await client.stop();
        if (root) fs.rmSync(root, { recursive: true, force: true });
    });

    it('loads every entry and draws each one exactly once', async () => {
        assert.equal(model.allNodes().length, ENTRY_COUNT);
        const ctx = await client.contextAt({ path: file, leafId: '886c2fdc' });
        const kept = (await client.entry(file, '4909db93')).entry.firstKeptEntryId as string;
        assert.equal(kept, '521cf246');
        const g = layoutGraph({ nodes: model.allNodes(), defaultLeafId: DEFAULT_LEAF, selectedLeafId: '886c2fdc', inContext: contextEntryIds(ctx), firstKept: { '4909db93': kept }, name: model.name });
        const drawn = g.nodes.flatMap((n) => n.ids);
        assert.equal(drawn.length, ENTRY_COUNT);
        assert.equal(new Set(drawn).size, ENTRY_COUNT);
        assert.ok(g.nodes.length < 60, `${g.nodes.length} nodes: long runs fold`);
        assert.ok(g.nodes.filter((n) => n.kind === 'fold').every((n) => n.ids.length >= GRAPH_FOLD_MIN));
        assert.deepEqual(g.nodes.filter((n) => n.leaf).map((n) => n.ids[n.ids.length - 1]).sort(), [...LEAVES].sort());
        assert.deepEqual(g.nodes.filter((n) => n.branchPoint).map((n) => n.ids[n.ids.length - 1]).sort(), ['088a3b48', '521cf246']);
        assert.equal(g.nodes.find((n) => n.defaultLeaf)?.id, DEFAULT_LEAF);
        assert.equal(g.nodes.find((n) => n.selectedLeaf)?.id, '886c2fdc');
        assert.equal(g.nodes.find((n) => n.label)?.label, 'before-refactor');
        assert.ok(g.nodes.some((n) => n.name === 'Untangle run modes'));
        assert.ok(g.nodes.some((n) => n.type === 'branch_summary'));
        // Entries in context: every one of contextAt's entryIds is counted on some node.
        assert.equal(g.nodes.reduce((s, n) => s + n.inContext, 0), contextEntryIds(ctx).length);
        const compaction = g.nodes.find((n) => n.type === 'compaction');
        // It summarizes its path up to the first kept entry: the root to the branch summary.
        assert.equal(compaction?.summarizes?.firstKeptEntryId, '521cf246');
        assert.equal(compaction?.summarizes?.firstId, '00247798');
        assert.equal(compaction?.summarizes?.lastId, '12bbdff5');
        // Edges form a tree over the drawn nodes; the highlighted path ends at the selected leaf.
        assert.equal(g.edges.length, g.nodes.length - 1);
        assert.ok(g.edges.filter((e) => e.onPath).some((e) => e.to === '886c2fdc'));
        // Laid out top-down: every child below its parent.
        const y = new Map(g.nodes.map((n) => [n.id, n.y]));
        assert.ok(g.edges.every((e) => (y.get(e.to) ?? 0) > (y.get(e.from) ?? 0)));
    });

    it("puts a summary's audit on its node, lost facts first, each with the entry it came from", async () => {
        const e = await client.explain({ path: file, entryId: '4909db93' });
        const a = auditOf(e);
        assert.ok(a);
        const audit: GraphAudit = {
            headline: auditHeadline(a.audit),
            source: auditSourceText(a),
            kept: a.audit.kept,
            lost: a.audit.lost,
            probes: auditProbes(a.audit).map((p) => ({ kind: PROBE_KINDS[p.kind], text: p.text, entryId: p.entryId, status: p.status })),
        };
        const g = layoutGraph({ nodes: model.allNodes(), defaultLeafId: DEFAULT_LEAF, selectedLeafId: DEFAULT_LEAF, inContext: [], firstKept: { '4909db93': '521cf246' }, name: model.name, audits: { '4909db93': audit } });
        const node = g.nodes.find((n) => n.id === '4909db93');
        assert.equal(node?.audit?.headline, 'kept 0 of 46 facts, lost 46');
        assert.equal(node?.audit?.probes[0].kind, 'read file');
        assert.ok(node?.audit?.probes.every((p) => p.entryId && g.nodes.some((n) => n.ids.includes(p.entryId as string))), 'every fact names a drawn entry');
        assert.equal(g.nodes.filter((n) => n.audit).length, 1);
    });
});

describe('branch graph layout of a Claude Code transcript', () => {
    let root: string;
    let client: SessiondClient;

    before(async () => {
        requireBinary();
        ({ root } = makeRoot());
        client = await SessiondClient.start({ binary: BINARY, roots: [root] });
    });

    after(async () => {
        if (client) await client.stop();
        if (root) fs.rmSync(root, { recursive: true, force: true });
    });

    it('draws each compact boundary as a tree of its own, linked to the line it compacted', async () => {
        const file = addClaudeTranscript(root);
        const model = new SessionModel(file);
        model.applyOpen(await client.open(file));
        await loadAll(model, (start) => client.tree({ path: file, depth: 1_000_000, limit: 20, ...start }));
        assert.equal(model.allNodes().length, CLAUDE.entryCount);
        const logicalParents: Record<string, string> = {};
        for (const id of model.roots ?? []) {
            const e = (await client.entry(file, id)).entry as { logicalParentUuid?: string };
            if (model.isSummary(id) && e.logicalParentUuid) logicalParents[id] = e.logicalParentUuid;
        }
        const ctx = await client.contextAt({ path: file, leafId: CLAUDE.resumeLeaf });
        const g = layoutGraph({ nodes: model.allNodes(), defaultLeafId: CLAUDE.resumeLeaf, selectedLeafId: CLAUDE.resumeLeaf, inContext: contextEntryIds(ctx), firstKept: {}, name: null, logicalParents });
        assert.equal(g.leafCount, 5);
        assert.deepEqual(g.nodes.flatMap((n) => n.ids).sort(), model.allNodes().map((n) => n.id).sort(), 'every line drawn once');
        // The first /compact compacted the branch that ends at 7f1509ff; the second, the first boundary's.
        assert.deepEqual(
            g.logicalEdges.map((e) => [e.to, e.compacted]),
            [
                [CLAUDE.boundary, '7f1509ff-4e18-403f-ab85-226b98c46dbf'],
                ['6b9b1c20-9e05-4138-a222-b80f484495b0', 'd49e5e29-e5ef-46c2-a87c-bf2f85c28185'],
            ],
        );
        // Each boundary is laid out under the line it compacted: one conversation, read top-down.
        for (const e of g.logicalEdges) {
            const from = g.nodes.find((n) => n.id === e.from);
            const to = g.nodes.find((n) => n.id === e.to);
            assert.ok(from?.ids.includes(e.compacted));
            assert.ok(to && from && to.y > from.y, `${e.to} below ${e.from}`);
            assert.ok(!g.edges.some((x) => x.to === e.to), 'drawn once, dashed');
        }
        // The boundaries are nodes of their own, not folded into the runs they start.
        for (const id of Object.keys(logicalParents)) assert.equal(g.nodes.find((n) => n.ids.includes(id))?.kind, 'entry');
        assert.equal(g.nodes.reduce((s, n) => s + n.inContext, 0), contextEntryIds(ctx).length);
    });
});
