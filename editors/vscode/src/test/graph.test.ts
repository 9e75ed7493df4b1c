//! The branch graph's layout (graph.ts) on the whole tree of examples/pi-v3-branched.jsonl as
//! the real daemon serves it: folds, branch points, leaves, the compaction's range, the path in
//! context at a chosen leaf.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { SessiondClient } from '../client';
import { GRAPH_FOLD_MIN, GraphAudit, layoutGraph } from '../graph';
import { auditHeadline, auditOf, auditProbes, auditSourceText, PROBE_KINDS } from '../render';
import { loadAll, SessionModel } from '../model';
import { BINARY, DEFAULT_LEAF, ENTRY_COUNT, LEAVES, makeRoot, requireBinary } from '../testing/fixtures';

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
        const g = layoutGraph({ nodes: model.allNodes(), defaultLeafId: DEFAULT_LEAF, selectedLeafId: '886c2fdc', inContext: ctx.entryIds, firstKept: { '4909db93': kept }, name: model.name });
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
        assert.equal(g.nodes.reduce((s, n) => s + n.inContext, 0), ctx.entryIds.length);
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
