//! The extension glue (extension.ts) activated under Node with a stand-in `vscode` module and
//! the real daemon: the Sessions view's rows, the context preview, explain, and live follow.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BINARY, DEFAULT_LEAF, EXAMPLE, makeRoot, next, PACKAGE_DIR, requireBinary, userLine } from '../testing/fixtures';
import { installVscodeStub, Recorded } from '../testing/vscode-stub';

describe('extension in a stand-in VS Code', () => {
    let root: string;
    let file: string;
    let vs: Recorded;
    let tree: any;
    const subscriptions: Array<{ dispose(): unknown }> = [];

    before(() => {
        requireBinary();
        ({ root, file } = makeRoot());
        // The daemon's search index and listing cache go under the test's root.
        process.env.XDG_CACHE_HOME = path.join(root, '.cache');
        vs = installVscodeStub({ path: BINARY, roots: [root] });
        // Loaded after the stand-in is installed, so its `require('vscode')` gets the stand-in.
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const extension = require('../extension') as typeof import('../extension');
        extension.activate({ subscriptions, extensionUri: { scheme: 'file', path: PACKAGE_DIR } } as any);
        tree = vs.treeDataProvider;
        assert.ok(tree, 'the Sessions view is registered');
    });

    after(async () => {
        // Restart stops the daemon and starts a new one only on demand.
        await vs?.commands.get('sessiond.restart')?.();
        for (const s of subscriptions) s.dispose();
        if (root) fs.rmSync(root, { recursive: true, force: true });
    });

    it('registers every command package.json contributes', () => {
        const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));
        const contributed: string[] = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
        assert.deepEqual([...vs.commands.keys()].sort(), contributed);
        for (const c of contributed) assert.ok(manifest.activationEvents.includes(`onCommand:${c}`), `activation event for ${c}`);
    });

    it('lists the session and shows its tree with forks as branches', async () => {
        const sessions = await tree.getChildren();
        assert.deepEqual(sessions.map((s: any) => s.path), [file]);
        // Before the open: what session/list says of it, in the description and the tooltip.
        const listed = tree.getTreeItem(sessions[0]);
        assert.match(listed.description, /^\d+ KiB · ~199 tokens/);
        assert.match(listed.tooltip, /name: Untangle run modes\nfirst message: \/mode\n1033 entries, 3 leaves, 921 messages\ncontext: ~199 tokens/);
        const rows = await tree.getChildren(sessions[0]);
        const items = rows.map((r: any) => tree.getTreeItem(r));
        // 341 entries before the first fork: the first, a fold, the labelled one, a fold, the
        // last three (the fork's entry last), as `sessiond tree` folds them.
        assert.deepEqual(rows.map((r: any) => r.item.kind), ['entry', 'fold', 'entry', 'fold', 'entry', 'entry', 'entry']);
        assert.equal(items[0].label, '00247798 · user: /mode');
        assert.equal(items[1].label, '┆ 23 entries folded');
        assert.match(items[2].label, /^e82f60b2 \[before-refactor\] · user: /);
        assert.equal(items[3].label, '┆ 309 entries folded');
        assert.equal(items[3].collapsibleState, 1, 'a fold expands');
        const folded = await tree.getChildren(rows[1]);
        assert.equal(folded.length, 23);
        assert.equal(tree.getParent(folded[5]), rows[1], 'an entry in a fold is listed by the fold');
        assert.equal(tree.getParent(rows[1]), sessions[0]);
        const fork = items[items.length - 1];
        assert.match(fork.label, /^088a3b48 · /);
        assert.equal(fork.collapsibleState, 1, 'the fork expands');
        const branches = await tree.getChildren(rows[rows.length - 1]);
        assert.deepEqual(branches.map((b: any) => tree.getTreeItem(b).contextValue), ['branch.appendable', 'branch.appendable'], 'a version-3 session: label and compact are offered');
        // After the session was opened, its row shows the entry count.
        assert.match(tree.getTreeItem(sessions[0]).description, /^1033 entries/);
        assert.equal(tree.getParent(rows[0]), sessions[0]);
    });

    it('previews the context at a clicked entry', async () => {
        const [session] = await tree.getChildren();
        const rows = await tree.getChildren(session);
        const item = tree.getTreeItem(rows[2]);
        assert.equal(item.command.command, 'sessiond.showContext');
        await vs.commands.get('sessiond.showContext')!(...item.command.arguments);
        const doc = vs.documents[vs.documents.length - 1];
        assert.equal(doc.uri.scheme, 'sessiond-context');
        assert.equal(doc.uri.fragment, rows[2].item.id);
        assert.match(doc.text, /^# Context — Untangle run modes$/m);
        assert.match(doc.text, new RegExp(`^- leaf: ${rows[2].item.id}$`, 'm'));
        assert.match(doc.text, /^## 1\. user {2}\(entry 00247798\)$/m);
        // The clicked entry is now the active leaf.
        assert.match(tree.getTreeItem(rows[2]).label, /^e82f60b2 \[before-refactor\] ● active leaf · /);
    });

    it('explains an entry at the active leaf', async () => {
        const [session] = await tree.getChildren();
        const rows = await tree.getChildren(session);
        vs.messages.length = 0;
        await vs.commands.get('sessiond.explain')!(rows[0]);
        assert.equal(vs.messages.length, 1);
        assert.equal(vs.messages[0].text, `Entry 00247798 (message) at leaf ${rows[2].item.id}: a context entry; it reaches the model as message 1.`);
    });

    it('verifies before resuming: findings in a quick pick, then Show Entry reveals the entry', async () => {
        vs.messages.length = 0;
        vs.revealed.length = 0;
        // The example ran in a directory that does not exist here: a fail first, with its path.
        vs.answers.push((items: any[]) => items.find((i) => i.finding.kind === 'missingFile'), 'Show Entry');
        // Invoked on the default leaf's row (an entry row verifies that leaf).
        await vs.commands.get('sessiond.verify')!({ type: 'row', path: file, item: { kind: 'entry', id: DEFAULT_LEAF } });
        const pick = vs.quickPicks[vs.quickPicks.length - 1];
        assert.match(pick.options.title, /^Verify Before Resuming: .* needs attention before resuming$/);
        assert.equal(pick.items[0].finding.status, 'fail');
        assert.equal(pick.items[0].finding.kind, 'cwd');
        assert.ok(pick.items.every((i: any, k: number) => k === 0 || ['fail', 'warn', 'ok'].indexOf(pick.items[k - 1].finding.status) <= ['fail', 'warn', 'ok'].indexOf(i.finding.status)));
        const chosen = pick.items.find((i: any) => i.finding.kind === 'missingFile');
        assert.equal(vs.messages.length, 1, JSON.stringify(vs.messages));
        assert.equal(vs.messages[0].text, chosen.finding.message);
        assert.equal(vs.revealed.length, 1);
        assert.equal((vs.revealed[0] as any).item.id, chosen.finding.entryId);
    });

    it('searches sessions as the user types and opens the chosen hit at its entry with its context', async () => {
        vs.revealed.length = 0;
        const docs = vs.documents.length;
        const widgets = vs.quickPickWidgets.length;
        const done = vs.commands.get('sessiond.search')!();
        while (vs.quickPickWidgets.length === widgets) await new Promise((r) => setTimeout(r, 10));
        const pick = vs.quickPickWidgets[vs.quickPickWidgets.length - 1];
        assert.ok(pick?.shown, 'the quick pick is shown');
        assert.equal(pick.title, 'Search Sessions');
        // Typing: only the last value (after the pause) is asked for.
        pick.type('dupl');
        pick.type('"duplicated functions"');
        const deadline = Date.now() + 20_000;
        while (!(pick.items.length > 0 && pick.items[0].hit) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        const first = pick.items[0];
        assert.ok(first?.hit, JSON.stringify(pick.items));
        assert.equal(first.hit.entryId, 'de19adb3');
        assert.equal(first.label, 'Untangle run modes · user');
        assert.match(first.detail, /\*\*duplicated\*\* \*\*functions\*\*/);
        assert.match(first.description, /^2026-11-29 22:18/);
        assert.equal(pick.busy, false);
        pick.accept(first);
        await done;
        assert.equal(pick.shown, false, 'the quick pick is closed');
        const row = vs.revealed[vs.revealed.length - 1] as any;
        assert.equal(row.path, file);
        assert.equal(row.item.id, 'de19adb3');
        const ctx = vs.documents[vs.documents.length - 1];
        assert.ok(vs.documents.length > docs, 'the context is shown');
        assert.match(ctx.text, /^- leaf: de19adb3$/m);
        // Back to the default leaf for the tests that follow.
        await vs.commands.get('sessiond.showContext')!({ type: 'session', path: file });
    });

    it('follows the session live: an appended entry refreshes the view and the live preview', async () => {
        const [session] = await tree.getChildren();
        await vs.commands.get('sessiond.follow')!(session);
        const live = vs.documents[vs.documents.length - 1];
        assert.equal(live.uri.fragment, '', 'the live preview follows the default leaf');
        assert.match(live.text, new RegExp(`^- leaf: ${DEFAULT_LEAF}$`, 'm'));
        assert.match(tree.getTreeItem(session).description, /following/);
        const provider = vs.contentProviders.get('sessiond-context');
        const previewChanged = next<any>(provider.onDidChange, (uri) => uri.toString() === live.uri.toString(), 10_000, 'live preview change');
        const viewChanged = next<any>(tree.onDidChangeTreeData, (n) => n?.path === file, 10_000, 'view change');
        fs.appendFileSync(file, userLine('feed0002', DEFAULT_LEAF, 'keep going'));
        await Promise.all([previewChanged, viewChanged]);
        const text: string = await provider.provideTextDocumentContent(live.uri);
        assert.match(text, /^- leaf: feed0002$/m);
        assert.match(text, /^keep going$/m);
        assert.match(tree.getTreeItem(session).description, /^1034 entries/);
        assert.ok(fs.statSync(EXAMPLE).size < fs.statSync(file).size);
        // A corrupt line: the row stops saying "following" and says why; the message leads with
        // the file's name, not its full path.
        const stopped = next<any>(tree.onDidChangeTreeData, (n) => n?.path === file, 10_000, 'view change after a corrupt line');
        fs.appendFileSync(file, '{"type":"message","id":"bad\n');
        await stopped;
        assert.match(tree.getTreeItem(session).description, /^1034 entries · ~\d+ tokens · stopped at corrupt line 1036\b/);
        assert.doesNotMatch(tree.getTreeItem(session).description, /following/);
        const warning = vs.messages.filter((m) => m.level === 'warning').pop();
        assert.match(warning?.text ?? '', /^sessiond: [^/]+\.jsonl: stopped at corrupt line 1036 \(invalidJson\); later lines are not read/);
    });
    it('names the sessiond.path setting when the daemon cannot start', async () => {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const { startFailure } = require('../extension') as typeof import('../extension');
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const { SessiondClient } = require('../client') as typeof import('../client');
        for (const [binary, want] of [
            ['/nonexistent/sessiond', /^the daemon \/nonexistent\/sessiond \(setting sessiond\.path\) does not exist: build it \(cargo build\) or set sessiond\.path/],
            ['sessiond-not-on-path', /^the daemon "sessiond-not-on-path" is not on PATH: install sessiond or set sessiond\.path/],
        ] as const) {
            const err = await SessiondClient.start({ binary, roots: [] }).then(
                (c) => {
                    void c.stop();
                    return undefined;
                },
                (e: unknown) => e,
            );
            assert.ok(err, `${binary} started`);
            assert.match(startFailure(binary, err), want);
        }
    });
});
