//! The extension glue (extension.ts) activated under Node with a stand-in `vscode` module and
//! the real daemon: the Sessions view's rows (pi's and Claude Code's sessions, grouped by agent and
//! project), the context preview, explain, the comparison of two leaves, a summary's audit, the
//! writes each format takes, and live follow.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addClaudeTranscript, BINARY, CLAUDE, DEFAULT_LEAF, EXAMPLE, makeRoot, next, PACKAGE_DIR, requireBinary, userLine } from '../testing/fixtures';
import { installVscodeStub, Recorded } from '../testing/vscode-stub';

describe('extension in a stand-in VS Code', () => {
    let root: string;
    let file: string;
    let claudeFile: string;
    let vs: Recorded;
    let tree: any;
    const subscriptions: Array<{ dispose(): unknown }> = [];

    before(() => {
        requireBinary();
        ({ root, file } = makeRoot());
        claudeFile = addClaudeTranscript(root);
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

    it('says how to add a root in VS Code when a path is outside the roots', () => {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const extension = require('../extension') as typeof import('../extension');
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const { ResponseError } = require('../client') as typeof import('../client');
        const outside = new ResponseError(-33002, '/home/u/x/s.jsonl: outside the session roots (add its directory: --root DIR, or initializationOptions.roots)');
        assert.equal(extension.errorText(outside), 's.jsonl: outside the session roots (add its directory to the sessiond.roots setting) (code -33002)');
        assert.equal(extension.errorText(new ResponseError(-33001, '/a/b.jsonl: file not found')), 'b.jsonl: file not found (code -33001)');
    });

    it('marks a session with corrupt spots in its row and its tooltip', () => {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const extension = require('../extension') as typeof import('../extension');
        const row = { path: '/r/a/s.jsonl', entryCount: 10, leafCount: 1, messageCount: 4, tokenEstimate: 5, corruptions: 2 };
        assert.equal(extension.sessionDescription(row.path, row, {}), '10 entries · ⚠ 2 corrupt · ~5 tokens · a/s.jsonl');
        assert.match(extension.sessionTooltip(row.path, row), /\n⚠ 2 corrupt spots: read as its agent reads it; `sessiond check` says where/);
        const clean = { ...row, corruptions: 0 };
        assert.equal(extension.sessionDescription(clean.path, clean, {}), '10 entries · ~5 tokens · a/s.jsonl');
        assert.doesNotMatch(extension.sessionTooltip(clean.path, clean), /corrupt/);
    });

    it('registers every command package.json contributes', () => {
        const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));
        const contributed: string[] = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
        assert.deepEqual([...vs.commands.keys()].sort(), contributed);
        for (const c of contributed) assert.ok(manifest.activationEvents.includes(`onCommand:${c}`), `activation event for ${c}`);
    });

    /** The session rows of one agent's group, every project's, in the view's order. */
    async function sessionsOf(agent: 'pi' | 'claude-code'): Promise<any[]> {
        const group = (await tree.getChildren()).find((g: any) => g.group.agent === agent);
        const out: any[] = [];
        for (const project of await tree.getChildren(group)) out.push(...(await tree.getChildren(project)));
        return out;
    }

    it('groups the sessions by agent, then by project', async () => {
        const agents = await tree.getChildren();
        assert.deepEqual(agents.map((a: any) => tree.getTreeItem(a).label), ['pi', 'Claude Code']);
        assert.deepEqual(agents.map((a: any) => tree.getTreeItem(a).description), ['1 session', '1 session']);
        const [piProject] = await tree.getChildren(agents[0]);
        const [claudeProject] = await tree.getChildren(agents[1]);
        assert.equal(tree.getTreeItem(piProject).label, 'pi-mono');
        assert.equal(tree.getTreeItem(piProject).description, '/Users/badlogic/workspaces/pi-mono');
        assert.equal(tree.getTreeItem(claudeProject).label, 'work');
        assert.equal(tree.getTreeItem(claudeProject).description, CLAUDE.cwd);
        const [claudeSession] = await tree.getChildren(claudeProject);
        assert.equal(claudeSession.path, claudeFile);
        // A transcript is named by a uuid: its row shows the first prompt.
        assert.equal(tree.getTreeItem(claudeSession).label, CLAUDE.firstMessage);
        assert.match(tree.getTreeItem(claudeSession).tooltip, /context: ~\d+ tokens \(Claude Code's usage at the resume leaf\)/);
        // Each level knows its parent (reveal walks them up).
        assert.equal(tree.getParent(claudeSession), claudeProject);
        assert.equal(tree.getParent(claudeProject), agents[1]);
        assert.equal(tree.getParent(agents[1]), undefined);
    });

    it('lists the session and shows its tree with forks as branches', async () => {
        const sessions = await sessionsOf('pi');
        assert.deepEqual(sessions.map((s: any) => s.path), [file]);
        // Before the open: what session/list says of it, in the description and the tooltip.
        const listed = tree.getTreeItem(sessions[0]);
        // Collapsed or expanded, the row says the same: entries, tokens, and where the file is
        // (copies of one session tell themselves apart).
        assert.equal(listed.description, `1033 entries · ~199 tokens · ${path.basename(path.dirname(file))}/pi-v3-branched.jsonl`);
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
        // A version-3 session: label and compact are offered; the second branch starts with a
        // branch summary, which offers its audit.
        assert.deepEqual(branches.map((b: any) => tree.getTreeItem(b).contextValue), ['branch.appendable', 'branch.appendable.summary']);
        // After the session was opened, its row shows the entry count.
        assert.match(tree.getTreeItem(sessions[0]).description, /^1033 entries/);
        assert.equal(tree.getParent(rows[0]), sessions[0]);
    });

    it('previews the context at a clicked entry', async () => {
        const [session] = await sessionsOf('pi');
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
        const [session] = await sessionsOf('pi');
        const rows = await tree.getChildren(session);
        vs.messages.length = 0;
        vs.documents.length = 0;
        await vs.commands.get('sessiond.explain')!(rows[0]);
        // Whole, in a document beside the view; no toast when nothing else decides it.
        assert.equal(vs.messages.length, 0, JSON.stringify(vs.messages));
        const doc = vs.documents.find((d) => d.uri.scheme === 'sessiond-explain');
        assert.ok(doc, 'the explanation is shown as a document');
        assert.match(doc.text, new RegExp(`Entry 00247798 \\(message\\) at leaf ${rows[2].item.id}: a context entry; it reaches the model as message 1\\.`));
        assert.match(doc.text, /reaches the model: yes/);
    });

    it('verifies before resuming: findings in a quick pick, then Show Entry reveals the entry', async () => {
        vs.messages.length = 0;
        vs.revealed.length = 0;
        // The example ran in a directory that does not exist here: one fail first, with its path,
        // standing for the files under it; an entry's finding is chosen to be shown.
        vs.answers.push((items: any[]) => items.find((i) => i.finding.kind === 'interrupted'), 'Show Entry');
        // Invoked on the default leaf's row (an entry row verifies that leaf).
        await vs.commands.get('sessiond.verify')!({ type: 'row', path: file, item: { kind: 'entry', id: DEFAULT_LEAF } });
        const pick = vs.quickPicks[vs.quickPicks.length - 1];
        assert.match(pick.options.title, /^Verify Before Resuming: .* needs attention before resuming$/);
        assert.equal(pick.items[0].finding.status, 'fail');
        assert.equal(pick.items[0].finding.kind, 'cwd');
        assert.ok(pick.items.every((i: any, k: number) => k === 0 || ['fail', 'warn', 'ok'].indexOf(pick.items[k - 1].finding.status) <= ['fail', 'warn', 'ok'].indexOf(i.finding.status)));
        assert.match(pick.items[0].finding.message, /the \d+ files the session used under it are not checked one by one/);
        assert.equal(pick.items.filter((i: any) => i.finding.kind === 'missingFile').length, 0, 'the missing cwd is said once');
        const chosen = pick.items.find((i: any) => i.finding.kind === 'interrupted');
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

    /** A row of the view for an entry of a session, as the view passes it to a command. */
    const entryRow = (p: string, id: string) => ({ type: 'row', path: p, key: `r:${p}:entry:${id}`, item: { kind: 'entry', id } });
    const cliJson = (...args: string[]) => JSON.parse(execFileSync(BINARY, args, { encoding: 'utf8' }));

    it('compares an entry with the active leaf: the two contexts in the diff editor, a summary, the report', async () => {
        await vs.commands.get('sessiond.showContext')!(entryRow(file, DEFAULT_LEAF));
        vs.messages.length = 0;
        vs.answers.push('Open Report');
        await vs.commands.get('sessiond.compare')!(entryRow(file, 'de19adb3'));
        const diff = vs.diffs[vs.diffs.length - 1];
        assert.equal(diff.title, `Context ${DEFAULT_LEAF} ↔ de19adb3`);
        // Each side is the context at its leaf as compared with the other's (renderComparedContexts).
        assert.equal(diff.left.uri.scheme, 'sessiond-compare');
        assert.equal(diff.left.uri.fragment, `${DEFAULT_LEAF}:de19adb3:context`);
        assert.equal(diff.right.uri.fragment, `de19adb3:${DEFAULT_LEAF}:context`);
        for (const [side, leaf] of [[diff.left, DEFAULT_LEAF], [diff.right, 'de19adb3']] as const) {
            const ctx = cliJson('context', file, '--leaf', leaf, '--json');
            assert.match(side.text, new RegExp(`^- leaf: ${leaf}$`, 'm'));
            assert.match(side.text, new RegExp(`^- messages: ${ctx.messages.length}$`, 'm'));
            assert.match(side.text, new RegExp(`^Compared: ${DEFAULT_LEAF} ↔ de19adb3$`, 'm'));
        }
        // The 312 messages the compaction summarized (at de19adb3 only) are listed one line each.
        assert.equal(diff.right.text.match(/^only at de19adb3 · /gm)?.length, 312);
        // The summary says what `sessiond diff` says.
        const cli = cliJson('diff', file, DEFAULT_LEAF, 'de19adb3', '--json');
        assert.equal(cli.forkPointId, '521cf246');
        assert.equal(vs.messages.length, 1, JSON.stringify(vs.messages));
        assert.equal(
            vs.messages[0].text,
            `sessiond: ${DEFAULT_LEAF} and de19adb3 part after 521cf246; A: 10 entries, 1 user turn, 2 assistant messages, 2 tool calls; ` +
                `B: 1 entry, 1 user turn, 0 assistant messages, 0 tool calls; context: ${cli.contextCommon} shared, ${cli.contextOnlyA.length} only at A, ` +
                `${cli.contextOnlyB.length} only at B; thinking level high → off`,
        );
        const report = vs.documents[vs.documents.length - 1];
        assert.equal(report.uri.scheme, 'sessiond-compare');
        assert.match(report.text, /^- fork point: 521cf246$/m);
        assert.match(report.text, /^## Only on A's path \(10\)$/m);
        assert.match(report.text, /^- 92bfec97 · assistant: Plan: 1\) extract runPrintMode/m);
        assert.match(report.text, /^## Only on B's path \(1\)$/m);
        assert.match(report.text, /^\| tool calls \| edit 1, read 1 \| – \|$/m);
        const summarized = cli.contextOnlyB.filter((d: any) => d.text === 'summarized by compaction 4909db93, on A only').length;
        assert.equal(summarized, 338);
        assert.match(report.text, /^- 1 context entry reaches the model the same way at both leaves$/m);
        assert.match(report.text, new RegExp(`^- ${cli.contextOnlyB.length} only at B:\n  - 338 summarized by compaction 4909db93, on A only: 00247798, c62d6448, `, 'm'));
    });

    it("shows a compaction's audit: in its tooltip, each lost fact linking to its entry, and as a list that jumps there", async () => {
        const row = entryRow(file, '4909db93');
        const item = tree.getTreeItem(row);
        assert.equal(item.contextValue, 'entry.appendable.summary', 'the audit is offered on a summary');
        assert.equal(tree.getTreeItem(entryRow(file, '521cf246')).contextValue, 'entry.appendable');
        const resolved = await tree.resolveTreeItem(item, row);
        const cli = cliJson('explain', file, '4909db93', '--json');
        assert.equal(cli.audit.lost, 46);
        const tip = resolved.tooltip;
        assert.match(tip.value, /^\*\*kept 0 of 46 facts, lost 46\*\* · summarizes 338 entries 00247798…12bbdff5, keeps from 521cf246\n/);
        const first = cli.audit.probes[0];
        const link = `command:sessiond.revealEntry?${encodeURIComponent(JSON.stringify([file, first.entryId]))}`;
        assert.ok(tip.value.includes(`- lost read file \`${first.text}\` ← [${first.entryId}](${link})`), tip.value);
        assert.match(tip.value, /- … 34 more lost/);
        assert.deepEqual(tip.isTrusted, { enabledCommands: ['sessiond.revealEntry'] });
        // The list: every probe, lost first; choosing a lost modified file jumps to its entry.
        vs.revealed.length = 0;
        vs.answers.push((items: any[]) => items.find((i) => i.probe.kind === 'modifiedFile'));
        await vs.commands.get('sessiond.showAudit')!(row);
        const pick = vs.quickPicks[vs.quickPicks.length - 1];
        assert.equal(pick.options.title, 'Summary audit of 4909db93: kept 0 of 46 facts, lost 46');
        assert.equal(pick.items.length, cli.audit.probes.length);
        const want = cli.audit.probes.find((p: any) => p.kind === 'modifiedFile');
        const chosen = pick.items.find((i: any) => i.probe.kind === 'modifiedFile');
        assert.equal(chosen.label, `$(error) lost: modified file ${want.text}`);
        assert.equal(chosen.description, `from ${want.entryId}`);
        assert.equal((vs.revealed[vs.revealed.length - 1] as any).item.id, want.entryId);
        const ctx = vs.documents[vs.documents.length - 1];
        assert.match(ctx.text, new RegExp(`^- leaf: ${want.entryId}$`, 'm'));
        // The link in the tooltip does the same.
        vs.revealed.length = 0;
        await vs.commands.get('sessiond.revealEntry')!(file, first.entryId);
        assert.equal((vs.revealed[0] as any).item.id, first.entryId);
    });

    it('shows a Claude Code transcript: its tree, context and explain; offers fork, refuses label and compact', async () => {
        const [session] = await sessionsOf('claude-code');
        const rows = await tree.getChildren(session);
        // Three roots: the first prompt and each /compact's boundary; uuids shortened to 8 characters.
        const items = rows.map((r: any) => tree.getTreeItem(r));
        assert.deepEqual(
            items.map((i: any) => i.label),
            ['7c758304 · user: Run a command', 'ae800328 · system: compact boundary (manual, 122 tokens before)', '6b9b1c20 · system: compact boundary (manual, 127 tokens before)'],
        );
        // Menus: fork and explain for every row, the audit on the boundaries; label and compact (`.appendable`) nowhere.
        assert.deepEqual(items.map((i: any) => i.contextValue), ['branch', 'branch.summary', 'branch.summary']);
        assert.equal(tree.getTreeItem(session).contextValue, 'session');
        assert.match(tree.getTreeItem(session).description, /^62 entries/);
        // The context at the resume leaf, as `sessiond context` counts its messages.
        await vs.commands.get('sessiond.showContext')!(session);
        const doc = vs.documents[vs.documents.length - 1];
        const ctx = cliJson('context', claudeFile, '--json');
        assert.match(doc.text, /^# Context \(Claude Code\)$/m);
        assert.match(doc.text, new RegExp(`^- leaf: ${CLAUDE.resumeLeaf}$`, 'm'));
        assert.match(doc.text, new RegExp(`^- messages: ${ctx.messages.length}$`, 'm'));
        assert.equal(doc.uri.path, `/${CLAUDE.resumeLeaf.replace(/-.*/, '').replace(/^/, 'compacted@')}.md`);
        // Explain on the first boundary (the context stays at the resume leaf: the audit below jumps).
        vs.messages.length = 0;
        vs.documents.length = 0;
        await vs.commands.get('sessiond.explain')!(rows[1]);
        assert.match(vs.documents.find((d) => d.uri.scheme === 'sessiond-explain')!.text, new RegExp(`^Line 60 \\(system ${CLAUDE.boundary}\\) at leaf ${CLAUDE.resumeLeaf}: before compact boundary 6b9b1c20`, 'm'));
        // The second /compact's audit: it summarized 16 lines and lost the last request, whose line it jumps to.
        const boundary = rows[2];
        const tip = (await tree.resolveTreeItem(tree.getTreeItem(boundary), boundary)).tooltip;
        const audit = cliJson('explain', claudeFile, boundary.item.id, '--json').audit;
        assert.deepEqual(audit.probes.map((p: any) => [p.kind, p.status]), [['lastUserRequest', 'lost']]);
        assert.match(tip.value, /^\*\*kept 0 of 1 fact, lost 1\*\* · summarizes 16 entries 70883128…b7c03308, keeps from d49e5e29\n/);
        assert.ok(tip.value.includes(`- lost last request \`Run a command again\` ← [4bfd3501](command:sessiond.revealEntry?`), tip.value);
        vs.revealed.length = 0;
        vs.answers.push((items: any[]) => items[0]);
        await vs.commands.get('sessiond.showAudit')!(boundary);
        assert.equal(vs.quickPicks[vs.quickPicks.length - 1].options.title, 'Summary audit of 6b9b1c20: kept 0 of 1 fact, lost 1');
        assert.equal((vs.revealed[0] as any).item.id, audit.probes[0].entryId);
        assert.match(vs.documents[vs.documents.length - 1].text, new RegExp(`^- leaf: ${audit.probes[0].entryId}$`, 'm'));
        // Label and compact, even from the palette, are refused before the daemon is asked: nothing written.
        const bytes = fs.readFileSync(claudeFile);
        const asked = vs.answers.length;
        vs.messages.length = 0;
        await vs.commands.get('sessiond.label')!(rows[0]);
        await vs.commands.get('sessiond.compact')!(rows[0]);
        assert.deepEqual(
            vs.messages.map((m) => m.text),
            [
                'sessiond: a Claude Code transcript takes no label: sessiond reads it and never writes to it; "Fork Session Here…" makes a new session to continue',
                'sessiond: a Claude Code transcript takes no compaction: sessiond reads it and never writes to it; "Fork Session Here…" makes a new session to continue',
            ],
        );
        assert.equal(vs.answers.length, asked, 'no prompt was shown');
        assert.deepEqual(fs.readFileSync(claudeFile), bytes);
        // Fork is offered, and forks: a new transcript beside it, listed under Claude Code.
        vs.answers.push({ label: 'At this entry', value: 'at' }, undefined);
        await vs.commands.get('sessiond.fork')!(entryRow(claudeFile, CLAUDE.rewoundLeaf));
        const forked = /forked into (\S+\.jsonl)/.exec(vs.messages[vs.messages.length - 1].text)?.[1];
        assert.ok(forked && fs.existsSync(forked), vs.messages[vs.messages.length - 1].text);
        const listed = (await sessionsOf('claude-code')).map((s: any) => s.path);
        assert.ok(listed.includes(forked), `${forked} in ${listed}`);
        assert.equal(cliJson('context', forked, '--json').leafId !== undefined, true);
        fs.rmSync(forked);
    });

    it('compares two leaves of a Claude Code transcript: the rewind and the resumed branch', async () => {
        await vs.commands.get('sessiond.showContext')!(entryRow(claudeFile, CLAUDE.resumeLeaf));
        vs.messages.length = 0;
        vs.answers.push(undefined);
        await vs.commands.get('sessiond.compare')!(entryRow(claudeFile, CLAUDE.rewoundLeaf));
        const diff = vs.diffs[vs.diffs.length - 1];
        assert.equal(diff.title, 'Context ec228510 ↔ 0b5e3c50');
        assert.match(diff.left.text, new RegExp(`^- leaf: ${CLAUDE.resumeLeaf}$`, 'm'));
        assert.match(diff.right.text, new RegExp(`^- leaf: ${CLAUDE.rewoundLeaf}$`, 'm'));
        const cli = cliJson('diff', claudeFile, CLAUDE.resumeLeaf, CLAUDE.rewoundLeaf, '--json');
        assert.equal(cli.forkPointId, CLAUDE.forkPoint);
        assert.match(vs.messages[0].text, new RegExp(`^sessiond: ec228510 and 0b5e3c50 part after f9cc853c; A: ${cli.sideA.entries} entries, `));
        assert.match(vs.messages[0].text, new RegExp(`context: ${cli.contextCommon} shared, ${cli.contextOnlyA.length} only at A, ${cli.contextOnlyB.length} only at B$`));
    });

    /** Waits until `cond` holds (polled every 100 ms), failing after `ms` with `what`. */
    async function until(cond: () => Promise<boolean>, ms: number, what: string): Promise<void> {
        const end = Date.now() + ms;
        while (!(await cond())) {
            if (Date.now() > end) assert.fail(`not within ${ms} ms: ${what}`);
            await new Promise((r) => setTimeout(r, 100));
        }
    }

    it('keeps the sessions list fresh without Refresh: a copy appears, a grown session updates, a deleted one goes', async () => {
        await sessionsOf('pi');
        const dir = path.join(root, 'copies');
        fs.mkdirSync(dir, { recursive: true });
        const copy = path.join(dir, path.basename(EXAMPLE));
        fs.copyFileSync(EXAMPLE, copy);
        const rowOf = async (p: string) => (await sessionsOf('pi')).find((s: any) => s.path === p);
        await until(async () => (await rowOf(copy)) !== undefined, 10_000, 'the copy listed');
        const [a, b] = [tree.getTreeItem(await rowOf(file)), tree.getTreeItem(await rowOf(copy))];
        assert.equal(a.label, b.label, 'copies of one session share its name');
        assert.notEqual(a.description, b.description, 'the descriptions tell them apart');
        assert.match(b.description, /^1033 entries · ~199 tokens · copies\/pi-v3-branched\.jsonl$/);
        // Grown (never opened here): its entries and tokens come with the listing's change.
        fs.appendFileSync(copy, userLine('c0ffee01', DEFAULT_LEAF, 'a question long enough to count for a few more tokens in the estimate'));
        await until(async () => /^1034 entries/.test(tree.getTreeItem(await rowOf(copy)).description), 10_000, 'the grown copy updated');
        const grown = tree.getTreeItem(await rowOf(copy));
        assert.notEqual(grown.description.split(' · ')[1], '~199 tokens', grown.description);
        assert.match(grown.tooltip, /1034 entries, 3 leaves, 922 messages/);
        fs.rmSync(dir, { recursive: true, force: true });
        await until(async () => (await rowOf(copy)) === undefined, 10_000, 'the deleted copy gone');
    });

    it('follows the session live: an appended entry refreshes the view and the live preview', async () => {
        const [session] = await sessionsOf('pi');
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
