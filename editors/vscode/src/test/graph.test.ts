//! The branch graph (graph.ts) draws what the daemon says: on every shipped session (the
//! real pi sessions in examples/ and the transcript written by the real Claude Code), the
//! drawn nodes, their context membership, path and leaf marks, and every compaction's range
//! and kept start equal `sessiond graph --json`; on the version-1 file the compaction says 292
//! entries 00000002…00000125, kept from 00000126. Folds open one level at a time, user
//! messages as landmarks, and still cover every entry once.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SessiondClient } from '../client';
import { DaemonGraph, foldKey, Graph, GraphAudit, GraphNode, layoutGraph, linkedPaths, loadDaemonGraph } from '../graph';
import { auditHeadline, auditOf, auditProbes, auditSourceText, contextEntryIds, PROBE_KINDS } from '../render';
import { loadAll, SessionModel } from '../model';
import { addClaudeTranscript, BINARY, CLAUDE, CLAUDE_EXAMPLE, DEFAULT_LEAF, ENTRY_COUNT, LEAVES, makeRoot, REPO_DIR, requireBinary } from '../testing/fixtures';
import { GraphResult } from '../protocol';

/** The shipped sessions: examples/*.jsonl (the real pi sessions) and the real Claude Code transcript. */
const SHIPPED = [
    ...fs
        .readdirSync(path.join(REPO_DIR, 'examples'))
        .filter((f) => f.endsWith('.jsonl'))
        .map((f) => path.join(REPO_DIR, 'examples', f)),
    CLAUDE_EXAMPLE,
];

/** `sessiond graph --json FILE [--leaf LEAF]`. */
function cliGraph(file: string, leaf?: string): GraphResult {
    const out = execFileSync(BINARY, ['graph', '--json', ...(leaf ? ['--leaf', leaf] : []), file], { maxBuffer: 256 << 20 });
    return JSON.parse(out.toString('utf8')) as GraphResult;
}

/** The nodes drawn for the daemon's rows (an opened fold's header is not one of them). */
function rows(g: Graph): GraphNode[] {
    return g.nodes.filter((n) => !n.opened && n.within === undefined);
}

describe('the branch graph draws what the daemon says', () => {
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

    /** A shipped session copied under the root, opened, its tree and graph loaded (small pages). */
    async function load(source: string, leafId?: string): Promise<{ file: string; model: SessionModel; daemon: DaemonGraph }> {
        const file = source === CLAUDE_EXAMPLE ? addClaudeTranscript(root) : path.join(root, path.basename(source));
        if (!fs.existsSync(file)) fs.copyFileSync(source, file);
        const model = new SessionModel(file);
        model.applyOpen(await client.open(file));
        await loadAll(model, (start) => client.tree({ path: file, depth: 1_000_000, limit: 300, ...start }));
        const daemon = await loadDaemonGraph((offset) => client.graph({ path: file, ...(leafId ? { leafId } : {}), offset, limit: 7 }));
        return { file, model, daemon };
    }

    for (const source of SHIPPED) {
        it(`${path.basename(source)}: nodes, context, path, leaves and compaction ranges equal sessiond graph --json`, async () => {
            const { model, daemon } = await load(source);
            const g = layoutGraph({ daemon, entries: model.allNodes() });
            const cli = cliGraph(source);
            const drawn = rows(g);
            assert.equal(drawn.length, cli.nodes.length, 'one node per row of the graph');
            for (const [i, want] of cli.nodes.entries()) {
                const n = drawn.find((d) => d.id === want.id && d.lastId === want.lastId);
                assert.ok(n, `row ${i} ${want.id}…${want.lastId} is drawn`);
                assert.equal(n.kind, want.kind, want.id);
                assert.equal(n.count, want.count, want.id);
                assert.equal(n.inContext, want.inContext ? want.count : 0, `${want.id} in context`);
                assert.equal(n.onPath, want.onPath, `${want.id} on path`);
                assert.equal(n.leaf, want.leaf, `${want.id} leaf`);
                assert.equal(n.defaultLeaf, want.defaultLeaf, `${want.id} resume leaf`);
                assert.equal(n.selectedLeaf, want.selectedLeaf, `${want.id} selected leaf`);
                assert.deepEqual(n.summarizes, want.summarizes, `${want.id}'s range`);
                if (want.summarizes) {
                    const s = want.summarizes;
                    assert.ok(n.description?.includes(`${s.count} entries${s.firstId ? ` ${s.firstId}…${s.lastId}` : ''}`), n.description);
                    assert.ok(n.description?.includes(`kept from ${s.firstKeptEntryId ?? 'none'}`), n.description);
                    if (s.firstKeptEntryId) assert.ok(drawn.find((d) => d.id === s.firstKeptEntryId)?.keptBy?.includes(want.id), `${s.firstKeptEntryId} marked kept`);
                }
            }
            assert.equal(g.contextCount, (cli.contextEntryIds ?? []).length);
            assert.equal(drawn.reduce((sum, n) => sum + n.inContext, 0), (cli.contextEntryIds ?? []).length, 'the nodes in context hold exactly the context entries');
            assert.equal(drawn.reduce((sum, n) => sum + n.count, 0), model.allNodes().length, 'every entry drawn once');
            assert.equal(g.edges.length + g.logicalEdges.length + g.sidechainEdges.length, g.nodes.length - daemon.nodes.filter((n) => n.parentRow === null && n.logicalParentRow === undefined && n.startedBy === undefined).length);
            const y = new Map(g.nodes.map((n) => [n.key, n.y]));
            assert.ok([...g.edges, ...g.logicalEdges, ...g.sidechainEdges].every((e) => (y.get(e.to) ?? 0) > (y.get(e.from) ?? 0)), 'top-down');
        });
    }

    it('on the version-1 session the compaction summarizes 292 entries 00000002…00000125 and keeps from 00000126', async () => {
        const { model, daemon } = await load(path.join(REPO_DIR, 'examples', 'pi-v1-before-compaction.jsonl'));
        const g = layoutGraph({ daemon, entries: model.allNodes() });
        const c = g.nodes.find((n) => n.id === '00000168');
        assert.deepEqual(c?.summarizes, { count: 292, firstId: '00000002', lastId: '00000125', firstKeptEntryId: '00000126', previousCompactionId: null });
        assert.match(c?.description ?? '', /compaction summarizing 292 entries 00000002…00000125, kept from 00000126/);
        assert.deepEqual(g.nodes.find((n) => n.id === '00000126')?.keptBy, ['00000168']);
    });

    it('opens a fold one level per click, user messages as landmarks, every entry once', async () => {
        const { model, daemon } = await load(path.join(REPO_DIR, 'examples', 'pi-v1-large-session.jsonl'));
        const closed = layoutGraph({ daemon, entries: model.allNodes() });
        assert.equal(closed.nodes.length, 2, 'a 1,018-entry linear session: a fold and its leaf');
        const fold = closed.nodes[0];
        assert.equal(fold.kind, 'fold');
        assert.equal(fold.count, 1017);
        const open = new Set([fold.key]);
        const one = layoutGraph({ daemon, entries: model.allNodes(), open });
        const inside = one.nodes.filter((n) => n.within === fold.key);
        const byId = new Map(model.allNodes().map((n) => [n.id, n]));
        const users = inside.filter((n) => n.kind === 'entry' && byId.get(n.id)?.role === 'user');
        const userCount = model.allNodes().filter((n) => n.role === 'user' && n.type === 'message').length;
        assert.ok(users.length >= 20, `${users.length} user turns shown`);
        assert.equal(users.length, userCount - (byId.get(closed.nodes[1].id)?.role === 'user' ? 1 : 0), 'every user message of the fold is a landmark');
        assert.ok(inside.every((n) => n.kind === 'entry' ? byId.get(n.id)?.role === 'user' || n.count === 1 : n.count >= 3), 'the runs between turns fold again');
        assert.equal(inside.reduce((s, n) => s + n.count, 0), 1017, 'the opened fold covers its entries once');
        // The next level: one of the runs between turns.
        const run = inside.find((n) => n.kind === 'fold' && n.count > 3) as GraphNode;
        const two = layoutGraph({ daemon, entries: model.allNodes(), open: new Set([fold.key, run.key]) });
        const deeper = two.nodes.filter((n) => n.within === run.key);
        assert.equal(deeper.reduce((s, n) => s + n.count, 0), run.count);
        assert.equal(run.key, foldKey(run.id, run.lastId));
        // Laid out as a chain below the fold: each node one row below the one before.
        assert.ok(two.edges.every((e) => two.nodes.some((n) => n.key === e.to)));
    });

    it("puts a summary's audit on its node, lost facts first, each with the entry it came from", async () => {
        const { file, model, daemon } = await load(path.join(REPO_DIR, 'examples', 'pi-v3-branched.jsonl'), '886c2fdc');
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
        const g = layoutGraph({ daemon, entries: model.allNodes(), audits: { '4909db93': audit } });
        assert.equal(model.allNodes().length, ENTRY_COUNT);
        assert.deepEqual(g.nodes.filter((n) => n.leaf).map((n) => n.lastId).sort(), [...LEAVES].sort());
        assert.equal(g.nodes.find((n) => n.defaultLeaf)?.id, DEFAULT_LEAF);
        assert.equal(g.nodes.find((n) => n.selectedLeaf)?.id, '886c2fdc');
        assert.equal(g.nodes.find((n) => n.label)?.label, 'before-refactor');
        const ctx = await client.contextAt({ path: file, leafId: '886c2fdc' });
        assert.equal(g.nodes.reduce((s, n) => s + n.inContext, 0), contextEntryIds(ctx).length);
        const node = g.nodes.find((n) => n.id === '4909db93');
        assert.equal(node?.audit?.headline, 'kept 0 of 46 facts, lost 46');
        assert.equal(node?.audit?.probes[0].kind, 'read file');
        assert.equal(g.nodes.filter((n) => n.audit).length, 1);
    });

    it('draws a Claude Code compact boundary under the line it compacted, dashed', async () => {
        const { model, daemon } = await load(CLAUDE_EXAMPLE, CLAUDE.resumeLeaf);
        const g = layoutGraph({ daemon, entries: model.allNodes() });
        assert.equal(g.leafCount, 5);
        assert.deepEqual(
            g.logicalEdges.map((e) => [e.to, e.compacted]),
            [
                [CLAUDE.boundary, '7f1509ff-4e18-403f-ab85-226b98c46dbf'],
                ['6b9b1c20-9e05-4138-a222-b80f484495b0', 'd49e5e29-e5ef-46c2-a87c-bf2f85c28185'],
            ],
        );
        for (const e of g.logicalEdges) {
            const from = g.nodes.find((n) => n.key === e.from);
            const to = g.nodes.find((n) => n.key === e.to);
            assert.ok(to && from && to.y > from.y, `${e.to} below ${e.from}`);
            assert.ok(!g.edges.some((x) => x.to === e.to), 'drawn once, dashed');
        }
    });

    it("links the Agent call to its subagent's transcript, and the subagent's graph back to it", async () => {
        const real = path.join(REPO_DIR, 'tests', 'data', 'claude', 'real');
        const agent = 'a46c5597fd4041ded';
        const parent = path.join(root, 'with-subagent.jsonl');
        const subs = path.join(root, 'with-subagent', 'subagents');
        fs.mkdirSync(subs, { recursive: true });
        fs.copyFileSync(path.join(real, 'with-subagent.jsonl'), parent);
        for (const ext of ['jsonl', 'meta.json']) fs.copyFileSync(path.join(real, 'with-subagent', 'subagents', `agent-${agent}.${ext}`), path.join(subs, `agent-${agent}.${ext}`));
        const sub = path.join(subs, `agent-${agent}.jsonl`);
        const graphOf = async (file: string): Promise<Graph> => {
            const model = new SessionModel(file);
            model.applyOpen(await client.open(file));
            await loadAll(model, (start) => client.tree({ path: file, depth: 1_000_000, limit: 300, ...start }));
            const daemon = await loadDaemonGraph((offset) => client.graph({ path: file, offset, limit: 2 }));
            return layoutGraph({ daemon, entries: model.allNodes() });
        };
        const g = await graphOf(parent);
        const call = g.nodes.find((n) => n.subagent);
        assert.equal(call?.id, 'b1326216-29c9-4f4d-b962-952158f6cccc');
        assert.deepEqual(call?.subagent, { agentId: agent, path: sub, toolUseId: 'toolu_21_0' });
        assert.match(call?.description ?? '', new RegExp(`started subagent agent-${agent}`));
        assert.equal(g.parent, null);
        assert.deepEqual([...linkedPaths(g)], [sub], 'the webview may open only the subagent');
        const back = await graphOf(sub);
        assert.deepEqual(back.parent, { path: parent, agentId: agent, toolUseId: 'toolu_21_0' });
        assert.deepEqual([...linkedPaths(back)], [parent]);
    });

    it('hangs a sidechain written in the file below the tool call whose prompt started it, dotted', async () => {
        const file = path.join(root, 'sidechain.jsonl');
        const line = (uuid: string, parentUuid: string | null, isSidechain: boolean, type: string, content: unknown) =>
            JSON.stringify({ type, uuid, parentUuid, isSidechain, timestamp: '2026-01-01T00:00:00.000Z', sessionId: 's', message: { role: type, content, id: `m-${uuid}`, model: 'claude-opus-4-8' } });
        const call = [{ type: 'tool_use', id: 'toolu_9', name: 'Agent', input: { description: 'look', prompt: 'subagent task' } }];
        const result = [{ type: 'tool_result', tool_use_id: 'toolu_9', content: 'done' }];
        const lines = [
            line('u1', null, false, 'user', 'main prompt'),
            line('a1', 'u1', false, 'assistant', call),
            line('s1', null, true, 'user', 'subagent task'),
            line('s2', 's1', true, 'assistant', 'subagent answer'),
            line('r1', 'a1', false, 'user', result),
            line('a2', 'r1', false, 'assistant', 'main answer'),
        ];
        fs.writeFileSync(file, `${lines.join('\n')}\n`);
        const model = new SessionModel(file);
        model.applyOpen(await client.open(file));
        await loadAll(model, (start) => client.tree({ path: file, depth: 1_000_000, limit: 300, ...start }));
        const daemon = await loadDaemonGraph((offset) => client.graph({ path: file, offset, limit: 100 }));
        const g = layoutGraph({ daemon, entries: model.allNodes() });
        assert.deepEqual(g.sidechainEdges, [{ from: 'a1', to: 's1', toolUseId: 'toolu_9' }]);
        assert.ok(!g.edges.some((e) => e.to === 's1'), 'drawn once, dotted');
        const y = new Map(g.nodes.map((n) => [n.key, n.y]));
        assert.ok((y.get('s1') ?? 0) > (y.get('a1') ?? 0), 'below the call');
        assert.match(g.nodes.find((n) => n.id === 's1')?.description ?? '', /sidechain started by tool_use toolu_9 of a1/);
        assert.deepEqual([...linkedPaths(g)], []);
    });
});
