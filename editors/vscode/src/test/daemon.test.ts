//! Integration tests of client.ts and model.ts against the real daemon: spawns `sessiond serve`
//! (env SESSIOND_BIN, else target/debug/sessiond of this repository) on a temporary root that
//! holds a copy of examples/pi-v3-branched.jsonl, and speaks JSON-RPC to it over pipes.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ResponseError, SessiondClient } from '../client';
import { FetchPage, loadChildren, SessionModel, ViewItem } from '../model';
import { ConflictData, DidChangeParams, DidReloadParams, isNothingToCompact, Methods, PiContextAt, PiExplanation } from '../protocol';
import { auditHeadline, auditItems, auditOf, auditSourceText, comparisonSummary, contextEntryIds, isCodexContext, renderCompact, renderContext, retentionOf } from '../render';
import { addClaudeTranscript, BINARY, CLAUDE, DEFAULT_LEAF, ENTRY_COUNT, EXAMPLE, FORKS, LEAVES, makeRoot, next, requireBinary, SESSION_ID, userLine } from '../testing/fixtures';

/** Expands every row of the model, depth first, the way a person opening each fork would. */
async function expandAll(model: SessionModel, fetch: FetchPage): Promise<ViewItem[]> {
    const rows: ViewItem[] = [];
    const walk = async (item: ViewItem | undefined) => {
        for (const row of await loadChildren(model, item, fetch)) {
            rows.push(row);
            if (model.expandable(row)) await walk(row);
        }
    };
    await walk(undefined);
    return rows;
}

describe('sessiond serve through the client', () => {
    let root: string;
    let file: string;
    let client: SessiondClient;
    let stderr = '';

    before(async () => {
        requireBinary();
        ({ root, file } = makeRoot());
        client = await SessiondClient.start({ binary: BINARY, roots: [root], onStderr: (t) => (stderr += t) });
    });

    after(async () => {
        if (client) await client.stop();
        if (root) fs.rmSync(root, { recursive: true, force: true });
    });

    it('runs initialize and reports capabilities', () => {
        assert.ok(client.initializeResult, 'initialize answered');
        assert.equal(typeof client.initializeResult.capabilities, 'object');
        assert.deepEqual(client.roots, [root], 'initializationOptions.roots and --root name the same directory, once');
        assert.equal(client.running, true);
        // The methods and notifications this client uses are the ones the daemon says it has.
        const sessiond = (client.initializeResult.capabilities.experimental as any)?.sessiond;
        assert.equal(typeof sessiond?.protocolVersion, 'string');
        for (const m of [Methods.open, Methods.close, Methods.tree, Methods.entry, Methods.contextAt, Methods.explain, Methods.list, Methods.fork, Methods.label, Methods.compact]) {
            assert.ok(sessiond.methods.includes(m), `daemon lacks ${m}`);
        }
        for (const m of [Methods.didChange, Methods.didReload, Methods.didCorrupt]) assert.ok(sessiond.notifications.includes(m), `daemon lacks ${m}`);
    });

    it('verifies a leaf before resuming (session/verifyResume)', async () => {
        const report = await client.verifyResume({ path: file, leafId: DEFAULT_LEAF });
        assert.equal(report.path, file);
        assert.equal(report.leafId, DEFAULT_LEAF);
        assert.equal(report.cwd, '/Users/badlogic/workspaces/pi-mono');
        assert.equal(report.attention, true);
        assert.equal(report.findings[0].kind, 'cwd');
        assert.equal(report.findings[0].status, 'fail');
        const counted = { ok: 0, warn: 0, fail: 0 };
        for (const f of report.findings) counted[f.status]++;
        assert.deepEqual(report.counts, counted);
        await assert.rejects(client.verifyResume({ path: file, leafId: 'nope' }), (e: any) => e instanceof ResponseError && e.code === -33004);
    });

    it('lists the session under the root', async () => {
        const listed = await client.list();
        const paths = listed.sessions.map((s) => s.path);
        assert.ok(paths.includes(file), `session/list gave ${JSON.stringify(paths)}`);
    });

    it('opens the session', async () => {
        const open = await client.open(file);
        assert.equal(open.sessionId, SESSION_ID);
        assert.equal(open.leafId, DEFAULT_LEAF);
        assert.deepEqual([...open.leaves].sort(), [...LEAVES].sort());
        assert.equal(open.entryCount, ENTRY_COUNT);
        assert.equal(open.name, 'Untangle run modes');
        assert.equal(open.tornTail, null);
        assert.equal(open.header?.version, 3);
    });

    it('pages the whole tree into the model', async () => {
        const model = new SessionModel(file);
        model.applyOpen(await client.open(file));
        let pages = 0;
        const rows = await expandAll(model, async (start) => {
            pages++;
            return client.tree({ path: file, ...start });
        });
        assert.equal(model.size, ENTRY_COUNT, `${pages} pages`);
        assert.equal(rows.filter((r) => r.kind === 'more').length, 0);
        // An entry that starts a branch is shown by its branch row, the others by entry rows.
        const shown = rows.filter((r) => r.kind === 'entry' || r.kind === 'branch').map((r) => r.id);
        assert.equal(shown.length, ENTRY_COUNT, 'every entry shows exactly once');
        assert.equal(new Set(shown).size, ENTRY_COUNT);
        for (const fork of FORKS) {
            assert.equal(model.expandable({ kind: 'entry', id: fork }), true, `${fork} forks`);
            assert.equal(model.children({ kind: 'entry', id: fork }).length, 2);
        }
        for (const leaf of LEAVES) assert.equal(model.marks(leaf).leaf, true, `${leaf} is a leaf`);
        assert.equal(model.marks(DEFAULT_LEAF).activeLeaf, true);
        assert.equal(model.marks('e82f60b2').label, 'before-refactor');
        // The path to the default leaf goes through the second fork's second branch.
        assert.deepEqual(model.parentOf({ kind: 'entry', id: DEFAULT_LEAF }), { kind: 'branch', id: model.pathTo(DEFAULT_LEAF)[model.pathTo(DEFAULT_LEAF).indexOf('521cf246') + 1] });
        assert.equal(model.pathTo(DEFAULT_LEAF)[0], '00247798');
    });

    it('reads a label entry with session/entry and applies it to the model', async () => {
        const model = new SessionModel(file);
        const rows = await expandAll(model, (start) => client.tree({ path: file, ...start }));
        const labelIds = rows.flatMap((r) => (r.kind === 'entry' && model.node(r.id)?.type === 'label' ? [r.id] : []));
        assert.equal(labelIds.length, 1, 'one label entry in the session');
        const got = await client.entry(file, labelIds[0]);
        assert.equal(got.id, labelIds[0]);
        assert.equal(got.entry.type, 'label');
        assert.equal(JSON.parse(got.raw).targetId, got.entry.targetId);
        assert.equal(fs.readFileSync(file, 'utf8').split('\n')[got.line - 1], got.raw);
        // The label as written: the model takes it the same way after a didChange.
        model.applyEntry({ ...got.entry, label: 'renamed' });
        assert.equal(model.marks(String(got.entry.targetId)).label, 'renamed');
    });

    it('pages a subtree with fromId and depth', async () => {
        const page = await client.tree({ path: file, fromId: '521cf246', depth: 1 });
        const ids = page.nodes.map((n) => n.id);
        assert.ok(ids.includes('92bfec97') || ids.includes('521cf246'), `page below 521cf246: ${JSON.stringify(ids)}`);
        const model = new SessionModel(file);
        model.addPage(await client.tree({ path: file }));
        model.addPage(page);
        assert.deepEqual([...(model.childIds('521cf246') ?? [])].sort(), ['92bfec97', 'de19adb3']);
    });

    it('pages a wide node one child at a time with childrenOf and after', async () => {
        const first = await client.tree({ path: file, childrenOf: '521cf246', depth: 0, limit: 1 });
        assert.deepEqual(first.nodes.map((n) => n.id), ['92bfec97']);
        assert.deepEqual(first.next, [{ after: '92bfec97' }, { childrenOf: '92bfec97' }]);
        const second = await client.tree({ path: file, after: '92bfec97', depth: 0, limit: 1 });
        assert.deepEqual(second.nodes.map((n) => n.id), ['de19adb3']);
        assert.equal(second.complete, true);
        await assert.rejects(client.tree({ path: file, limit: 10_001 }), (err) => err instanceof ResponseError && err.code === -32602);
    });

    it('gives the context at the default leaf, equal to `sessiond context --json`', async () => {
        const ctx = (await client.contextAt({ path: file })) as PiContextAt;
        const cli = JSON.parse(execFileSync(BINARY, ['context', file, '--json'], { encoding: 'utf8', maxBuffer: 64 << 20 }));
        assert.deepEqual(ctx.messages, cli.messages);
        assert.equal(ctx.thinkingLevel, 'high');
        assert.deepEqual(ctx.model, { provider: 'anthropic', modelId: 'claude-sonnet-4-5' });
        assert.deepEqual(ctx.entryIds, cli.entryIds);
        assert.equal(ctx.messages?.length, 8);
        assert.equal(ctx.messageCount, 8);
        assert.equal(ctx.leafId, DEFAULT_LEAF);
        assert.ok(ctx.tokenEstimate > 0);
    });

    it('gives the context at another leaf', async () => {
        const ctx = await client.contextAt({ path: file, leafId: '8a9bb12f' });
        const cli = JSON.parse(execFileSync(BINARY, ['context', file, '--leaf', '8a9bb12f', '--json'], { encoding: 'utf8', maxBuffer: 64 << 20 }));
        assert.deepEqual(ctx.messages, cli.messages);
        assert.deepEqual(ctx.entryIds, cli.entryIds);
    });

    it('explains why an entry is not in the context', async () => {
        const e = (await client.explain({ path: file, entryId: '00247798' })) as PiExplanation;
        assert.equal(e.inContext, false);
        assert.equal(e.contextEntry, false);
        assert.equal(e.contributes, 'nothing');
        assert.match(e.text, /^entry 00247798 \(message\) at leaf 610f9c1e: not a context entry: .*compaction 4909db93/);
        assert.equal(e.leafId, DEFAULT_LEAF);
        assert.deepEqual(e.reason, { kind: 'summarizedByCompaction', compactionId: '4909db93', firstKeptEntryId: '521cf246' });
        const off = await client.explain({ path: file, entryId: 'de19adb3', leafId: DEFAULT_LEAF });
        assert.deepEqual(off.reason, { kind: 'notOnPath', divergesAt: '521cf246', branchEntryId: 'de19adb3' });
    });

    it('answers a bad request with a JSON-RPC error', async () => {
        await assert.rejects(client.explain({ path: file, entryId: 'no-such-id' }), (err) => err instanceof ResponseError && /no-such-id/.test(err.message));
        await assert.rejects(client.explain({ path: file, entryId: 'no-such-id' }), (err) => err instanceof ResponseError && err.code === -33004);
        await assert.rejects(
            client.open(EXAMPLE),
            (err) => err instanceof ResponseError && err.code === -33002 && /--root DIR, or initializationOptions\.roots/.test(err.message),
            'outside the roots, saying how to add one',
        );
        await assert.rejects(client.open(path.join(root, 'missing.jsonl')), (err) => err instanceof ResponseError && err.code === -33001);
    });

    it('follows the file live: an appended entry arrives as didChange and updates the model', async () => {
        const model = new SessionModel(file);
        model.applyOpen(await client.open(file));
        const fetch: FetchPage = (start) => client.tree({ path: file, ...start });
        await expandAll(model, fetch);
        const changed = next<DidChangeParams>(client.onDidChange, (c) => c.path === file, 10_000, 'session/didChange');
        fs.appendFileSync(file, userLine('feed0001', DEFAULT_LEAF, 'one more thing'));
        const change = await changed;
        assert.equal(change.leafId, 'feed0001');
        assert.equal(change.entryCount, ENTRY_COUNT + 1);
        assert.deepEqual(change.added.map((n) => n.id), ['feed0001']);
        assert.equal(change.added[0].parentId, DEFAULT_LEAF);
        assert.equal(change.added[0].preview, 'one more thing');
        const summary = model.applyDidChange(change);
        assert.deepEqual(summary.parents, [DEFAULT_LEAF]);
        assert.equal(model.defaultLeafId, 'feed0001');
        assert.equal(model.marks('feed0001').activeLeaf, true);
        assert.equal(model.marks(DEFAULT_LEAF).leaf, false);
        assert.deepEqual(model.parentOf({ kind: 'entry', id: 'feed0001' }), model.parentOf({ kind: 'entry', id: DEFAULT_LEAF }));
        const ctx = await client.contextAt({ path: file });
        assert.equal(ctx.messageCount, 9);
        assert.deepEqual(ctx.messages?.[8].content, [{ type: 'text', text: 'one more thing' }]);
    });

    it('reloads when the file shrinks: didReload, then the model refetches', async () => {
        const model = new SessionModel(file);
        model.applyOpen(await client.open(file));
        const fetch: FetchPage = (start) => client.tree({ path: file, ...start });
        await expandAll(model, fetch);
        assert.equal(model.size, ENTRY_COUNT + 1);
        const reloaded = next<DidReloadParams>(client.onDidReload, (r) => r.path === file, 10_000, 'session/didReload');
        // Cut the appended line off again: one truncate, so the daemon never sees a half state.
        fs.truncateSync(file, fs.statSync(EXAMPLE).size);
        const reload = await reloaded;
        assert.equal(reload.reason, 'shrank');
        assert.equal(reload.leafId, DEFAULT_LEAF);
        assert.equal(reload.entryCount, ENTRY_COUNT);
        model.applyDidReload(reload);
        assert.equal(model.size, 0);
        assert.equal(model.defaultLeafId, DEFAULT_LEAF);
        await expandAll(model, fetch);
        assert.equal(model.size, ENTRY_COUNT);
        assert.equal(model.node('feed0001'), undefined);
    });

    it('writes through the daemon: label (fenced), fork, compact', async () => {
        const model = new SessionModel(file);
        model.applyOpen(await client.open(file));
        assert.equal(model.defaultLeafId, DEFAULT_LEAF);

        // A label at the client's view of the leaf: written, announced once as a didChange.
        const changed = next<DidChangeParams>(client.onDidChange, (c) => c.path === file, 10_000, 'session/didChange');
        const labelled = await client.label({ path: file, targetId: FORKS[1], label: 'from-client', expectedLeafId: model.defaultLeafId });
        assert.equal(labelled.written, true);
        assert.equal(labelled.parentId, DEFAULT_LEAF);
        assert.equal(labelled.leafId, labelled.id);
        const change = await changed;
        assert.deepEqual(change.added.map((n) => n.id), [labelled.id]);
        assert.equal(change.added[0].type, 'label');
        model.applyDidChange(change);
        assert.equal(model.defaultLeafId, labelled.id);

        // The same request again carries a stale view: refused with the resume leaf.
        await assert.rejects(
            client.label({ path: file, targetId: FORKS[1], label: 'stale', expectedLeafId: DEFAULT_LEAF }),
            (err) => {
                if (!(err instanceof ResponseError) || err.code !== -33010) return false;
                const data = err.data as ConflictData;
                return data.currentLeafId === labelled.id && data.added.length === 1 && data.added[0] === labelled.id;
            },
        );

        // Fork at an entry: a new file next to the source.
        const forked = await client.fork({ path: file, entryId: LEAVES[0], position: 'at' });
        assert.equal(path.dirname(forked.path), root);
        // Labels on the path are re-chained after it (pi's createBranchedSession), so they end the new file.
        assert.equal(forked.leafId, forked.newLabels.length ? forked.newLabels[forked.newLabels.length - 1] : LEAVES[0]);
        assert.ok(fs.existsSync(forked.path));
        assert.equal(typeof forked.sessionId, 'string');

        // Compact: the dry run as the extension shows it, then the commit.
        const base = { path: file, expectedLeafId: model.defaultLeafId, keepRecentTokens: 1 };
        const dry = await client.compact({ ...base, dryRun: true });
        assert.ok(!isNothingToCompact(dry));
        assert.equal(dry.written, false);
        const { kept, lost } = retentionOf(dry);
        assert.equal(kept.length + lost.length, dry.retention.probes.length);
        assert.match(renderCompact(dry, true), /^Compaction would take the context from \d+ to \d+ tokens\./);
        const compacted = next<DidChangeParams>(client.onDidChange, (c) => c.path === file, 10_000, 'session/didChange');
        const done = await client.compact(base);
        assert.ok(!isNothingToCompact(done));
        assert.equal(done.written, true);
        assert.deepEqual((await compacted).added.map((n) => n.id), [done.entryId]);
        const again = await client.compact({ path: file, expectedLeafId: done.entryId, keepRecentTokens: 1 });
        assert.ok(isNothingToCompact(again));
        assert.equal(again.reason, 'leafIsCompaction');
    });

    it('reads a Claude Code transcript: listed with its format, forkable, every append refused with unsupportedForFormat', async () => {
        const claude = addClaudeTranscript(root);
        const listed = (await client.list()).sessions.find((x) => x.path === claude);
        assert.equal(listed?.format, 'claude-code');
        assert.equal(listed?.cwd, CLAUDE.cwd);
        const model = new SessionModel(claude);
        model.applyOpen(await client.open(claude));
        assert.deepEqual([model.format, model.appendable, model.forkable, model.entryCount], ['claude-code', false, true, CLAUDE.entryCount]);
        await loadChildren(model, undefined, (start) => client.tree({ path: claude, depth: 10_000, limit: 2_000, ...start }));
        assert.equal(model.isSummary(CLAUDE.boundary), true, 'a compact boundary carries an audit');
        assert.equal(model.isSummary(CLAUDE.resumeLeaf), false);
        // Its audit, from the same explain as pi's: one fact, kept.
        const audited = auditOf(await client.explain({ path: claude, entryId: CLAUDE.boundary }));
        assert.equal(audited && auditHeadline(audited.audit), 'kept 1 of 1 fact, lost 0');
        assert.equal(audited && auditSourceText(audited), 'summarizes 11 entries 7c758304…92a0029c, keeps from 7f1509ff');
        // What the view does not offer, the daemon refuses: the menus follow the daemon.
        const bytes = fs.readFileSync(claude);
        await assert.rejects(client.label({ path: claude, targetId: CLAUDE.resumeLeaf, label: 'x', expectedLeafId: CLAUDE.resumeLeaf }), (e: any) => {
            assert.equal(e.code, -33021);
            assert.equal(e.data.format, 'claude-code');
            return true;
        });
        await assert.rejects(client.compact({ path: claude, expectedLeafId: CLAUDE.resumeLeaf, dryRun: true }), (e: any) => e.code === -33021 && e.data.format === 'claude-code' && /session\/compact is not supported for a Claude Code session/.test(e.message));
        assert.deepEqual(fs.readFileSync(claude), bytes, 'nothing written');
        // Compared through the client: the rewind parts from the resumed branch where `sessiond diff` says.
        const c = await client.compareBranches({ path: claude, leafA: CLAUDE.resumeLeaf, leafB: CLAUDE.rewoundLeaf });
        assert.equal(c.format, 'claude-code');
        assert.equal(c.forkPointId, CLAUDE.forkPoint);
        const cli = JSON.parse(execFileSync(BINARY, ['diff', claude, CLAUDE.resumeLeaf, CLAUDE.rewoundLeaf, '--json'], { encoding: 'utf8' }));
        assert.deepEqual({ ...c, revision: undefined }, { ...cli, revision: undefined });
        assert.match(comparisonSummary(c), new RegExp(`^ec228510 and 0b5e3c50 part after f9cc853c; A: ${c.sideA.entries} entries, `));
        fs.rmSync(path.dirname(path.dirname(claude)), { recursive: true });
    });

    it('reads a Codex rollout: listed with its format, its input items rendered, every write refused', async () => {
        const dir = path.join(root, 'codex-home', 'sessions', '2026', '12', '04');
        fs.mkdirSync(dir, { recursive: true });
        const rollout = path.join(dir, 'rollout-2026-12-04T17-02-17-0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee.jsonl');
        const t = (n: number) => `2026-12-04T17:02:${String(10 + n).padStart(2, '0')}.000Z`;
        const lines = [
            { type: 'session_meta', payload: { id: '0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee', session_id: '0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee', timestamp: t(0), cwd: '/w', originator: 'codex_exec', cli_version: '0.171.0', history_mode: 'paginated', base_instructions: { text: 'You are Codex.' } } },
            { type: 'event_msg', payload: { type: 'task_started', turn_id: 't1' } },
            { type: 'response_item', payload: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'run a tool' }] } },
            { type: 'response_item', payload: { type: 'function_call', id: 'item_1', name: 'exec_command', arguments: '{"cmd":"echo hello-from-tool"}', call_id: 'call_1', status: 'completed' } },
            { type: 'response_item', payload: { type: 'function_call_output', call_id: 'call_1', output: 'hello-from-tool' } },
            { type: 'response_item', payload: { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'It printed hello-from-tool.' }] } },
            { type: 'event_msg', payload: { type: 'task_complete', turn_id: 't1' } },
        ];
        fs.writeFileSync(rollout, lines.map((l, i) => JSON.stringify({ timestamp: t(i), ordinal: i, ...l }) + '\n').join(''));
        const listed = (await client.list()).sessions.find((x) => x.path === rollout);
        assert.equal(listed?.format, 'codex');
        const opened = await client.open(rollout);
        assert.equal(opened.format, 'codex');
        const ctx = await client.contextAt({ path: rollout });
        assert.ok(isCodexContext(ctx), 'a rollout answers with the input Codex sends');
        const cli = JSON.parse(execFileSync(BINARY, ['context', rollout, '--json'], { encoding: 'utf8' }));
        assert.deepEqual(ctx.messages, cli.messages, 'the daemon and the CLI give the same input');
        const doc = renderContext(ctx, { path: rollout, name: null, leafId: ctx.leafId });
        assert.match(doc, /^# Context \(Codex\)/);
        assert.match(doc, /## 1\. message \(user\)\n\nrun a tool/);
        assert.match(doc, /exec_command\(\{"cmd":"echo hello-from-tool"\}\)/);
        assert.match(doc, /function_call_output\)?\n\nhello-from-tool/);
        assert.match(doc, /message \(assistant\)\n\nIt printed hello-from-tool\./);
        assert.deepEqual(contextEntryIds(ctx), [], 'a rollout item names no tree entry to mark');
        const bytes = fs.readFileSync(rollout);
        await assert.rejects(client.label({ path: rollout, targetId: '5', label: 'x', expectedLeafId: '6' }), (e: any) => e.code === -33021 && e.data.format === 'codex');
        assert.deepEqual(fs.readFileSync(rollout), bytes, 'nothing written');
        await client.close(rollout);
        // A compaction whose replacement history keeps the request: its audit, as pi's.
        const summary = 'Here is the summary produced by the other language model:\nSUMMARY: ran echo.';
        const user = (text: string) => ({ type: 'message', role: 'user', content: [{ type: 'input_text', text }] });
        const compacted = { type: 'compacted', payload: { message: summary, replacement_history: [user('run a tool'), user(summary)] } };
        fs.appendFileSync(rollout, JSON.stringify({ timestamp: t(7), ordinal: 7, ...compacted }) + '\n');
        const model = new SessionModel(rollout);
        model.applyOpen(await client.open(rollout));
        await loadChildren(model, undefined, (start) => client.tree({ path: rollout, depth: 10_000, limit: 2_000, ...start }));
        assert.equal(model.isSummary('7'), true, 'a compaction carries an audit');
        assert.equal(model.isSummary('5'), false);
        const audited = auditOf(await client.explain({ path: rollout, entryId: '7' }));
        assert.equal(audited && auditHeadline(audited.audit), 'kept 1 of 1 fact, lost 0');
        assert.equal(audited && auditSourceText(audited), 'summarizes 4 entries 2…5');
        assert.deepEqual(audited?.audit.probes.map((p) => [p.kind, p.text, p.entryId, p.foundIn]), [['lastUserRequest', 'run a tool', '2', '7']]);
        await client.close(rollout);
        fs.rmSync(path.join(root, 'codex-home'), { recursive: true });
    });

    it("audits a compaction: where it came from and every fact kept or lost, each from an entry of the tree", async () => {
        const e = await client.explain({ path: file, entryId: '4909db93' });
        const audit = auditOf(e);
        assert.ok(audit, 'explain on a compaction gives its audit');
        assert.deepEqual(audit.source, { count: 338, firstId: '00247798', lastId: '12bbdff5', firstKeptEntryId: '521cf246', previousCompactionId: null });
        assert.equal(auditHeadline(audit.audit), 'kept 0 of 46 facts, lost 46');
        assert.equal(auditSourceText(audit), 'summarizes 338 entries 00247798…12bbdff5, keeps from 521cf246');
        const items = auditItems(audit.audit);
        assert.equal(items.length, 46);
        // Every lost fact jumps to an entry the model knows, inside the span the summary replaced.
        const model = new SessionModel(file);
        model.applyOpen(await client.open(file));
        await loadChildren(model, undefined, (start) => client.tree({ path: file, depth: 10_000, limit: 2_000, ...start }));
        const span = new Set(model.pathTo('12bbdff5'));
        for (const i of items) {
            assert.ok(i.probe.entryId && span.has(i.probe.entryId), `${i.label}: ${i.probe.entryId} is on the summarized path`);
        }
        // An entry that is no summary has none.
        assert.equal(auditOf(await client.explain({ path: file, entryId: '521cf246' })), undefined);
    });

    it('closes a session: later requests for it are refused', async () => {
        assert.deepEqual(await client.close(file), { path: file });
        await assert.rejects(client.contextAt({ path: file }), (err) => err instanceof ResponseError && err.code === -33005);
    });

    it('shuts down cleanly', async () => {
        const exit = await client.stop();
        assert.equal(exit.code, 0, `exit ${JSON.stringify(exit)}; stderr: ${stderr.slice(-2000)}`);
        assert.equal(client.running, false);
        await assert.rejects(client.list(), /not running/);
    });
});
