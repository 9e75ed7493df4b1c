// The extension in a real VS Code (code-server 4.139.1, VS Code 1.139): one server start for
// all scenarios, which run in order on one page. Each waits on DOM conditions (generous
// timeouts, no fixed sleeps), asserts on the DOM and on the files, and keeps a screenshot in
// target/vscode-host/. Run by scripts/test-vscode-host.sh.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CLAUDE_TRANSCRIPT, findPi, runCommand, runScriptedPi, screenshot, sessiondBin, shot, startHost, WAIT_MS } from './harness.mjs';

/** The v3 example: its name, the entry before its first fork, its default leaf. */
const V3 = { file: 'pi-v3-branched.jsonl', name: 'Untangle run modes', fork: '088a3b48', leaf: '610f9c1e' };

/** The real Claude Code transcript with an Agent call (tests/data/claude/real/with-subagent*): its subagent. */
const SUBAGENT = {
    source: new URL('../../../tests/data/claude/real/with-subagent', import.meta.url).pathname,
    firstPrompt: 'Delegate to an agent',
    agent: 'a46c5597fd4041ded',
    toolUseId: 'toolu_21_0',
};

/** The Claude Code transcript: its first prompt (its row's name), its resume leaf, the leaf of its rewind, where they part. */
const CLAUDE = {
    firstPrompt: 'Run a command',
    resumeLeaf: 'ec228510-5a3b-4462-aad5-e3f6654df41b',
    rewoundLeaf: '0b5e3c50-369b-45ad-a35e-c68a63fa334e',
    forkPoint: 'f9cc853c-ba6a-4561-93ff-cb4f95759bd2',
};

let host;
let page;
const times = [];

/** The Sessions view's tree. */
const view = () => page.locator('.pane-body', { has: page.locator('[aria-label="Sessions"]') }).first();
/** A row of the Sessions view whose accessible name matches. */
const row = (name) => page.getByRole('treeitem', { name }).first();

/**
 * Moves the pointer off the rows and waits for any hover to close: a row's tooltip left open
 * where the pointer last rested (after a menu item was clicked above another row) covers the
 * rows below it, and a hover stays open while the pointer is on it.
 */
async function calm() {
    await page.mouse.move(5, 5);
    await page
        .locator('.workbench-hover-container, .monaco-hover')
        .first()
        .waitFor({ state: 'hidden', timeout: TOAST_MS })
        .catch(() => undefined);
}

/** Expands a row by its twistie (a click on the row runs its command, as a user's would). */
async function expand(r) {
    await r.waitFor();
    await calm();
    if ((await r.getAttribute('aria-expanded')) !== 'true') await r.locator('.monaco-tl-twistie').click();
    await page.waitForFunction((el) => el.getAttribute('aria-expanded') === 'true', await r.elementHandle(), { timeout: WAIT_MS });
}

/** Right-clicks a row and picks a context-menu item by its label. */
/** How long a toast or a closing dialog gets before the slower fallback is tried (ms). */
const TOAST_MS = 5000;

async function contextMenu(r, label) {
    const item = page.getByRole('menuitem', { name: label }).first();
    // The view follows the daemon's list changes: a row can move between being found and
    // being clicked (a write just made refreshes its session), and the menu that opens is
    // then another row's. Close it and right-click again where the row is now.
    for (let opened = 0; ; opened++) {
        await calm();
        await r.click({ button: 'right' });
        try {
            await item.waitFor({ timeout: opened < 2 ? 5000 : 30000 });
            break;
        } catch (e) {
            if (opened >= 2) throw e;
            await page.keyboard.press('Escape');
        }
    }
    // A menu ignores a click that comes too soon after it opened (a guard against the
    // right button's own release): click again while the menu stays open.
    for (let tries = 0; tries < 5; tries++) {
        await item.click().catch(() => undefined);
        try {
            await item.waitFor({ state: 'hidden', timeout: 1000 });
            return;
        } catch {
            // still open: the click was ignored
        }
    }
    throw new Error(`the context menu item "${label}" did not run`);
}

/** An editor's visible text, Monaco's non-breaking spaces as spaces. */
async function editorText(locator) {
    return (await locator.innerText()).replace(/\u00a0/g, ' ');
}

/** The text of the notification toasts shown now. */
async function waitForToast(re) {
    const toast = page.locator('.notification-toast', { hasText: re }).first();
    try {
        await toast.waitFor({ timeout: TOAST_MS });
    } catch {
        // A toast hides when something else takes the keyboard (an Escape closing a dialog
        // as it arrives); the notification itself stays in the notification center.
        await runCommand(page, 'Notifications: Show Notifications');
        const item = page.locator('.notifications-center .notification-list-item', { hasText: re }).first();
        await item.waitFor();
        const text = (await item.innerText()).replace(/\u00a0/g, ' ').trim();
        await runCommand(page, 'Notifications: Hide Notifications');
        return text;
    }
    return (await toast.innerText()).replace(/\u00a0/g, ' ').trim();
}

/** Sets a text setting through the Settings editor, as a user would (search, type, leave the field). */
async function setSetting(key, value) {
    await runCommand(page, 'Preferences: Open User Settings');
    const search = page.locator('.settings-editor .search-container .monaco-editor').first();
    await search.waitFor();
    await search.click();
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.type(key);
    const input = page.locator(`.settings-editor .setting-item-contents[data-key="${key}"] input, .settings-editor .setting-item-contents:has-text("${key.split('.').pop()}") input`).first();
    await input.waitFor();
    await input.fill(value);
    await input.press('Tab');
    // The Settings editor writes the user settings file after a short delay.
    const file = path.join(host.userData, 'User', 'settings.json');
    const t0 = Date.now();
    const written = () => {
        try {
            return JSON.parse(fs.readFileSync(file, 'utf8'))[key] === value;
        } catch {
            return false;
        }
    };
    while (!written()) {
        if (Date.now() - t0 > WAIT_MS) throw new Error(`${key} was not written to ${file}`);
        await new Promise((r) => setTimeout(r, 100));
    }
    // Recent VS Code shows Settings as a modal editor that Escape closes (and the command
    // palette does not open over it); older ones as an editor tab.
    const settings = page.locator('.settings-editor');
    await page.keyboard.press('Escape');
    try {
        await settings.waitFor({ state: 'detached', timeout: TOAST_MS });
    } catch {
        await runCommand(page, 'View: Close Editor');
        await settings.waitFor({ state: 'detached' });
    }
}

/** Collapses every row of the Sessions view (its title bar's "Collapse All"), so the rows a scenario expands are in sight. */
async function collapseAll() {
    const header = page.locator('.pane-header[aria-label^="Sessions Section"]').first();
    await header.waitFor();
    if ((await header.getAttribute('aria-expanded')) !== 'true') await header.click();
    await header.hover();
    await header.locator('[aria-label="Collapse All"]').first().click();
    await page.getByRole('treeitem', { name: /^pi, \d+ sessions?$/ }).first().waitFor();
    await page.waitForFunction(() => document.querySelectorAll('.part.sidebar [role="treeitem"][aria-expanded="true"]').length === 0, undefined, { timeout: WAIT_MS });
}

/** A diff editor side's visible text: `original` (left) or `modified` (right). */
function diffSide(side) {
    return page.locator(`.monaco-diff-editor .editor.${side} .view-lines`).last();
}

/**
 * The graph webview in sight whose status line matches `status`: each panel is an iframe
 * holding the page's own iframe, and a hidden panel's stays in the DOM (retainContextWhenHidden).
 */
async function graphFrame(status) {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
        const frames = page.locator('iframe.webview.ready');
        for (let i = 0; i < (await frames.count()); i++) {
            if (!(await frames.nth(i).isVisible())) continue;
            const frame = frames.nth(i).contentFrame().frameLocator('iframe#active-frame');
            if ((await frame.locator('#status', { hasText: status }).count()) > 0) return frame;
        }
        if (Date.now() > deadline) throw new Error(`no graph in sight whose status matches ${status}`);
        await page.waitForTimeout(200);
    }
}

/** The scenarios build on each other (one page, one workspace): after a failure the rest fail at once. */
let broken;

async function timed(name, f) {
    if (broken) throw new Error(`not run: the scenario "${broken}" failed before it`);
    const t0 = Date.now();
    try {
        await f();
    } catch (err) {
        broken = name;
        throw err;
    } finally {
        times.push(`${name}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        await screenshot(page, name).catch(() => undefined);
    }
}

describe('the extension in a real VS Code', { timeout: 15 * 60_000 }, () => {
    before(async () => {
        const t0 = Date.now();
        host = await startHost();
        page = host.page;
        times.push(`start: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    });

    after(async () => {
        console.log(`scenario times:\n  ${times.join('\n  ')}`);
        await host?.stop();
    });

    it('lists the sessions and expands to branches and entries', () =>
        timed('01-sessions-view', async () => {
            const header = page.locator('.pane-header[aria-label^="Sessions Section"]').first();
            await header.waitFor();
            if ((await header.getAttribute('aria-expanded')) !== 'true') await header.click();
            // Collapsed rows say what expanded ones say (entries), and where the file is.
            for (const f of ['pi-v1-before-compaction.jsonl', 'pi-v1-large-session.jsonl']) await row(new RegExp(`^${f}, \\d+ entries · ~\\d+ tokens · [^/]+/${f.replace('.', '\\.')}`)).waitFor();
            // A named session is listed by its name (session/list reads it), with pi's token estimate.
            const named = row(new RegExp(`^${V3.name}, 1033 entries · ~199 tokens`));
            await named.waitFor();
            await expand(named);
            // Opened: the row now shows the session's name and entry count.
            await row(new RegExp(`^${V3.name}, 1033 entries`)).waitFor();
            await row(/^00247798 · user: \/mode/).waitFor();
            await row(/┆ 23 entries folded/).waitFor();
            const fork = row(new RegExp(V3.fork));
            await expand(fork);
            await row(/branch_summary: Explored keeping tui-renderer monolithic/).waitFor();
            await expand(row(/branch_summary: Explored keeping/));
            await row(/user: Alternative: split main.ts/).waitFor();
            // A branch row shows its first entry, which is not repeated beneath it.
            assert.equal(await page.getByRole('treeitem', { name: /12bbdff5/ }).count(), 1, 'the branch row only');
        }));
    it('"Show Context at This Entry" opens the context document with pi\'s messages', () =>
        timed('02-show-context', async () => {
            // 886c2fdc: in the second branch, after the compaction; the CLI counts 8 messages.
            await expand(row(/user: Alternative: split main.ts/));
            const branch = row(/assistant: Plan: 1\) extract runPrintMode/);
            await expand(branch);
            const entry = row(/886c2fdc/);
            await contextMenu(entry, 'Show Context at This Entry');
            const tab = page.getByRole('tab', { name: /pi-v3-branched@886c2fdc\.md/ });
            await tab.waitFor();
            const editor = page.locator('.editor-instance .view-lines').last();
            await editor.filter({ hasText: '# Context — Untangle run modes' }).waitFor();
            const text = await editorText(editor);
            const cli = spawnSync(sessiondBin, ['context', path.join(host.workspace, V3.file), '--leaf', '886c2fdc', '--json'], { encoding: 'utf8' });
            assert.equal(cli.status, 0, cli.stderr);
            const want = JSON.parse(cli.stdout).messages.length;
            assert.equal(want, 8);
            assert.match(text, new RegExp(`- messages: ${want}`));
            assert.match(text, /## 1\. .*\(entry 4909db93\)/);
            assert.match(text, /## 2\. user {2}\(entry 521cf246\)/);
            await shot(page.locator('.editor-group-container', { has: tab }), 'readme-context');
            // The entry is now the view's active leaf.
            await page.getByRole('treeitem', { name: /886c2fdc.*active leaf/ }).first().waitFor();
            assert.equal(await page.getByRole('treeitem', { name: /● active leaf/ }).count(), 1, 'the active leaf is marked once');
        }));

    it('"Explain" answers for an entry at the active leaf', () =>
        timed('03-explain', async () => {
            await contextMenu(row(/4909db93/), 'Explain: Is This Entry in the Context?');
            // Whole, in a document beside the view, not a toast cut short.
            await page.getByRole('tab', { name: /pi-v3-branched 4909db93@886c2fdc\.md/ }).waitFor();
            const editor = page.locator('.editor-instance .view-lines', { hasText: 'Entry 4909db93 (compaction) at leaf 886c2fdc' }).first();
            await editor.waitFor();
            assert.match(await editorText(editor), /reaches the model: (yes|no)/);
        }));

    it('"Fork Session Here…" writes a fork that sessiond check accepts and that the view lists', () =>
        timed('04-fork', async () => {
            await contextMenu(row(/886c2fdc/), 'Fork Session Here…');
            const pick = page.locator('.quick-input-list .monaco-list-row', { hasText: 'At this entry' }).first();
            await pick.waitFor();
            await pick.click();
            const toast = await waitForToast(/forked into/);
            const m = /forked into (\S+\.jsonl)/.exec(toast);
            assert.ok(m, toast);
            const forked = m[1];
            assert.ok(fs.existsSync(forked), forked);
            assert.equal(path.dirname(forked), host.workspace);
            const check = spawnSync(sessiondBin, ['check', forked], { encoding: 'utf8' });
            assert.equal(check.status, 0, `sessiond check ${forked}: ${check.stdout}${check.stderr}`);
            const ctx = JSON.parse(spawnSync(sessiondBin, ['context', forked, '--json'], { encoding: 'utf8' }).stdout);
            assert.equal(ctx.messages.length, 8, 'the fork ends at 886c2fdc: the same 8 messages');
            await row(new RegExp(path.basename(forked, '.jsonl'))).waitFor();
        }));

    it('"Label Entry…" writes the label and the row shows it', () =>
        timed('05-label', async () => {
            const target = row(/user: \/mode/);
            await contextMenu(target, 'Label Entry…');
            const input = page.locator('.quick-input-widget input[type="text"]');
            await input.waitFor({ state: 'visible' });
            await input.fill('start-here');
            await input.press('Enter');
            const labelled = page.getByRole('treeitem', { name: /00247798.*\[start-here\]/ }).first();
            await labelled.waitFor();
            // The id and the label come before the preview: a narrow side bar cuts the preview.
            assert.match(await labelled.locator('.label-name').innerText(), /^00247798 \[start-here\] · user: /);
            const lines = fs.readFileSync(path.join(host.workspace, V3.file), 'utf8').trim().split('\n');
            const last = JSON.parse(lines[lines.length - 1]);
            assert.equal(last.type, 'label');
            assert.equal(last.targetId, '00247798');
            assert.equal(last.label, 'start-here');
        }));

    it('an append by another process shows live while "Follow Live" is on', () =>
        timed('06-follow-live', async () => {
            const file = path.join(host.workspace, V3.file);
            await contextMenu(row(new RegExp(`^${V3.name}`)), 'Follow Live (toggle)');
            await row(new RegExp(`^${V3.name}, .*following`)).waitFor();
            await page.getByRole('tab', { name: /pi-v3-branched@live\.md/ }).waitFor();
            const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
            const parentId = JSON.parse(lines[lines.length - 1]).id;
            const entry = {
                type: 'message',
                id: 'feed0001',
                parentId,
                timestamp: new Date().toISOString(),
                message: { role: 'user', content: [{ type: 'text', text: 'Appended by another process.' }], timestamp: Date.now() },
            };
            fs.appendFileSync(file, `${JSON.stringify(entry)}\n`);
            await page.getByRole('treeitem', { name: /feed0001.*user: Appended by another process\./ }).first().waitFor();
            // The live preview re-rendered at the new leaf (its text is further down: Monaco
            // renders only the visible lines).
            await page.locator('.editor-instance .view-lines', { hasText: /leaf:\sfeed0001/ }).first().waitFor();
            await shot(page.locator('.part.sidebar'), 'readme-sessions');
        }));

    it('"Restart Daemon" recovers after the daemon is killed', () =>
        timed('07-restart-daemon', async () => {
            const daemons = () =>
                spawnSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
                    .stdout.split('\n')
                    .filter((l) => l.includes(`${sessiondBin} serve`) && l.includes(host.workspace))
                    .map((l) => Number(l.trim().split(/\s+/)[0]));
            const [pid] = daemons();
            assert.ok(pid, 'the daemon runs');
            process.kill(pid, 'SIGKILL');
            await waitForToast(/the daemon stopped unexpectedly/);
            await runCommand(page, 'sessiond: Restart Daemon');
            await waitForToast(/the daemon was restarted/);
            const now = daemons();
            assert.equal(now.length, 1, `one daemon: ${now}`);
            assert.notEqual(now[0], pid);
            // The sessions were re-opened: a click on an entry previews its context.
            // The view re-lists its rows as the sessions re-open: a click that lands while they
            // move picks the row that moved under the pointer, so it is clicked again until the
            // preview is the clicked entry's.
            const editor = page.locator('.editor-instance .view-lines', { hasText: '- leaf: 00247798' }).first();
            for (let tries = 0; ; tries++) {
                await calm();
                await row(/^00247798 .*user: \/mode/).click();
                try {
                    await editor.waitFor({ timeout: TOAST_MS });
                    break;
                } catch (err) {
                    if (tries >= 3) throw err;
                }
            }
            assert.doesNotMatch(await editorText(editor), /Context unavailable/);
            // Live follow goes on with the new daemon.
            const file = path.join(host.workspace, V3.file);
            const entry = { type: 'message', id: 'feed0002', parentId: 'feed0001', timestamp: new Date().toISOString(), message: { role: 'user', content: [{ type: 'text', text: 'After the restart.' }], timestamp: Date.now() } };
            fs.appendFileSync(file, `${JSON.stringify(entry)}\n`);
            await page.getByRole('treeitem', { name: /feed0002.*user: After the restart\./ }).first().waitFor();
        }));
    it('the branch graph draws the tree, highlights the context and selects an entry from the keyboard', () =>
        timed('08-branch-graph', async () => {
            await runCommand(page, 'Notifications: Clear All Notifications');
            await contextMenu(row(new RegExp(`^${V3.name}`)), 'Show Branch Graph');
            // The webview: an iframe holding the page's own iframe.
            const frame = page.frameLocator('iframe.webview.ready').last().frameLocator('iframe#active-frame');
            const status = frame.locator('#status');
            await status.filter({ hasText: / in context at / }).waitFor();
            const file = path.join(host.workspace, V3.file);
            const entries = fs.readFileSync(file, 'utf8').trim().split('\n').length - 1;
            assert.match(await status.innerText(), new RegExp(`${entries} entries · 3 leaves · \\d+ nodes drawn`));
            const nodes = frame.locator('g.node');
            const drawn = await nodes.count();
            assert.ok(drawn > 10 && drawn < 80, `${drawn} nodes for ${entries} entries: single-child runs fold`);
            assert.equal(Number(/(\d+) nodes drawn/.exec(await status.innerText())?.[1]), drawn);
            // Branch points, the compaction with its range, the label, the session name.
            assert.equal(await frame.locator('g.node.branch-point').count(), 2);
            await frame.getByRole('button', { name: /compaction 4909db93.*compaction summarizing 338 entries 00247798…12bbdff5, kept from 521cf246/ }).waitFor();
            await frame.getByRole('button', { name: /^user 521cf246.*kept from here by compaction 4909db93/ }).waitFor();
            // The legend says what the marks mean.
            await frame.locator('#legend', { hasText: 'reaches the model at the active leaf' }).waitFor();
            await frame.getByRole('button', { name: /label before-refactor/ }).waitFor();
            await frame.getByRole('button', { name: /names the session Untangle run modes/ }).waitFor();
            // Keyboard: focus the other branch's leaf, Enter chooses it: said beside the picture,
            // the active leaf unchanged; "Make Active Leaf" moves it.
            const target = frame.getByRole('button', { name: /^user de19adb3/ });
            await target.focus();
            await target.press('Enter');
            const details = frame.locator('#details');
            await details.filter({ hasText: 'user de19adb3' }).waitFor();
            assert.equal(await page.getByRole('treeitem', { name: /de19adb3.*active leaf/ }).count(), 0, 'choosing a node leaves the active leaf');
            await details.getByRole('button', { name: 'Make de19adb3 the active leaf' }).click();
            await page.getByRole('treeitem', { name: /de19adb3.*active leaf/ }).first().waitFor();
            // Redrawn at that leaf: the highlighted entries are the ones pi puts in its context.
            const cli = JSON.parse(spawnSync(sessiondBin, ['context', file, '--leaf', 'de19adb3', '--json'], { encoding: 'utf8' }).stdout);
            await status.filter({ hasText: new RegExp(`${cli.entryIds.length} entries in context at de19adb3`) }).waitFor();
            await frame.getByRole('button', { name: /^user de19adb3.*selected leaf.*in context/ }).waitFor();
            // "Show Context Here" on another node: the preview opens beside the graph, which stays in sight.
            await frame.getByRole('button', { name: /^user 521cf246/ }).click();
            await details.getByRole('button', { name: 'Show the context at 521cf246 beside the graph' }).click();
            await page.getByRole('tab', { name: /pi-v3-branched@521cf246\.md/ }).waitFor();
            await frame.locator('#status').waitFor();
            assert.ok(await page.locator('iframe.webview.ready').last().isVisible(), 'the graph is not covered');
            const onPath = await frame.locator('path.edge.on-path').count();
            assert.ok(onPath >= 5, `${onPath} edges on the path to the selected leaf`);
            // Live: an append grows the picture.
            fs.appendFileSync(file, `${JSON.stringify({ type: 'message', id: 'feed0003', parentId: 'feed0002', timestamp: new Date().toISOString(), message: { role: 'user', content: [{ type: 'text', text: 'Drawn live.' }], timestamp: Date.now() } })}\n`);
            await status.filter({ hasText: new RegExp(`^.*${entries + 1} entries`) }).waitFor();
            await frame.getByRole('button', { name: /^user feed0003/ }).waitFor();
            await shot(page.locator('iframe.webview.ready').last(), 'readme-graph');
        }));

    it('a wrong sessiond.path is named in the view and the log; fixing it recovers without a reload', () =>
        timed('09-wrong-path', async () => {
            await runCommand(page, 'Notifications: Clear All Notifications');
            // The rows in sight whatever earlier scenarios left expanded (a click that landed on
            // a row moving during the restart's re-listing can open a long fold).
            await collapseAll();
            await expand(row(/^pi, \d+ sessions$/));
            await expand(row(/^project pi-mono,/));
            await row(/pi-v1-large-session\.jsonl/).waitFor();
            const expanded = row(new RegExp(`^${V3.name}`));
            await expand(expanded);
            const missing = path.join(host.tmp, 'no-such-dir', 'sessiond');
            await setSetting('sessiond.path', missing);
            // The message names the program and the setting; the view shows its welcome text.
            const toast = await waitForToast(/setting sessiond\.path/);
            assert.match(toast, new RegExp(`the daemon ${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(setting sessiond\\.path\\) does not exist`));
            await view().locator('.welcome-view-content', { hasText: 'No sessions to show' }).waitFor();
            assert.equal(await view().getByRole('treeitem').count(), 0, 'no stale rows');
            // The output channel says what happened.
            await runCommand(page, 'sessiond: Show Log');
            const output = page.locator('.part.panel .view-lines', { hasText: 'does not exist' }).first();
            await output.waitFor();
            const logText = await editorText(output);
            assert.match(logText, new RegExp(`starting ${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} serve`));
            await screenshot(page, 'readme-wrong-path');
            // Fixing the setting recovers: a new daemon, the sessions listed again.
            await setSetting('sessiond.path', sessiondBin);
            await waitForToast(/the settings changed; the daemon was restarted/);
            await row(new RegExp(`^(${V3.name}|${V3.file.replace('.', '\\.')})`)).waitFor();
            await row(/^pi-v1-large-session\.jsonl/).waitFor();
            // The error goes by itself, and the session expanded before stays expanded.
            await page.locator('.notification-toast', { hasText: /setting sessiond\.path/ }).waitFor({ state: 'detached' });
            await runCommand(page, 'Notifications: Show Notifications');
            assert.equal(await page.locator('.notifications-center .notification-list-item', { hasText: /setting sessiond\.path/ }).count(), 0, 'the old error is gone');
            await page.keyboard.press('Escape');
            await page.waitForFunction((el) => el.getAttribute('aria-expanded') === 'true', await row(new RegExp(`^${V3.name}`)).elementHandle(), { timeout: WAIT_MS });
        }));

    it('"Search Sessions…" finds entries as the user types and opens the chosen hit at its entry', () =>
        timed('10-search', async () => {
            await runCommand(page, 'Notifications: Clear All Notifications');
            const input = page.locator('.quick-input-widget input[type="text"]');
            const query = '"alternative: split" main';
            // A quick pick closes when it loses the focus (a notification arriving on a loaded
            // machine): then the search is opened again.
            for (let tries = 0; ; tries++) {
                try {
                    await runCommand(page, 'sessiond: Search Sessions…');
                    // The search's own quick pick (not the palette closing behind it), focused.
                    await page.locator('.quick-input-widget .quick-input-title', { hasText: 'Search Sessions' }).waitFor({ timeout: TOAST_MS });
                    await input.click({ timeout: TOAST_MS });
                    // Typed key by key: the daemon is asked once typing pauses.
                    await input.pressSequentially(query, { delay: 20, timeout: TOAST_MS });
                    // A key pressed while the quick pick was still taking the focus is lost: type again.
                    if ((await input.inputValue({ timeout: TOAST_MS })) !== query) await input.fill(query, { timeout: TOAST_MS });
                    break;
                } catch (err) {
                    if (tries >= 3) throw err;
                }
            }
            const hit = page.locator('.quick-input-list .monaco-list-row', { hasText: /Untangle run modes · user/ }).first();
            await hit.waitFor();
            const text = (await hit.innerText()).replace(/\u00a0/g, ' ');
            assert.match(text, /\*\*Alternative\*\*: \*\*split\*\* \*\*main\*\*/);
            await shot(page.locator('.quick-input-widget'), 'readme-search');
            // The CLI finds the same first hit in the same files.
            const cli = JSON.parse(
                spawnSync(sessiondBin, ['search', '"alternative: split" main', '--root', host.workspace, '--index-dir', path.join(host.workspace, '..', 'cli-index'), '--json'], { encoding: 'utf8' }).stdout,
            );
            const first = cli.hits[0];
            assert.equal(first?.entryId, '521cf246', 'the CLI finds the same entry');
            await hit.click();
            // The session's row at that entry is selected, and the context at it is shown.
            await page.getByRole('treeitem', { name: new RegExp(`${first.entryId}.*active leaf`) }).first().waitFor();
            await page.getByRole('tab', { name: new RegExp(`@${first.entryId}\\.md`) }).waitFor();
        }));


    it('lists a Claude Code transcript under its agent and project; its tree, context, explain and graph; fork is its only write', () =>
        timed('11-claude-session', async () => {
            await runCommand(page, 'Notifications: Clear All Notifications');
            // The context document gets the whole editor area (a narrow column wraps its lines).
            await runCommand(page, 'View: Close All Editors');
            const file = path.join(host.workspace, CLAUDE_TRANSCRIPT.dir, CLAUDE_TRANSCRIPT.file);
            await collapseAll();
            // Grouped by agent, then project (the transcript's cwd).
            await row(/^pi, \d+ sessions$/).waitFor();
            const agent = row(/^Claude Code, 1 session$/);
            await expand(agent);
            const project = row(/^project work, 1 session$/);
            await expand(project);
            // A transcript is named by a uuid: its row shows its first prompt, Claude's usage as tokens.
            await expand(row(new RegExp(`^${CLAUDE.firstPrompt}, 62 entries · ~129 tokens · [^/]+/compacted\\.jsonl`)));
            // Opened: the row counts its entries.
            const session = row(new RegExp(`^${CLAUDE.firstPrompt}, 62 entries · ~129 tokens`));
            await session.waitFor();
            // Its tree: the first prompt and each /compact's boundary start a branch; uuids shortened.
            const first = row(/^7c758304 · user: Run a command/);
            await first.waitFor();
            await row(/^ae800328 · system: compact boundary \(manual, 122 tokens before\)/).waitFor();
            await row(/^6b9b1c20 · system: compact boundary \(manual, 127 tokens before\)/).waitFor();
            // Its menu offers explain, compare and fork, not label or compact.
            await first.click({ button: 'right' });
            await page.getByRole('menuitem', { name: 'Fork Session Here…' }).first().waitFor();
            await page.getByRole('menuitem', { name: 'Compare with Active Leaf' }).first().waitFor();
            await page.getByRole('menuitem', { name: 'Explain: Is This Entry in the Context?' }).first().waitFor();
            assert.equal(await page.getByRole('menuitem', { name: 'Label Entry…' }).count(), 0, 'no label on a transcript');
            assert.equal(await page.getByRole('menuitem', { name: 'Compact Context…' }).count(), 0, 'no compact on a transcript');
            await page.keyboard.press('Escape');
            // The context at the resume leaf, as `sessiond context` reads it.
            await contextMenu(session, 'Show Context at This Entry');
            await page.getByRole('tab', { name: /compacted@ec228510\.md/ }).waitFor();
            const editor = page.locator('.editor-instance .view-lines', { hasText: '# Context (Claude Code)' }).last();
            await editor.waitFor();
            const text = await editorText(editor);
            const cli = JSON.parse(spawnSync(sessiondBin, ['context', file, '--json'], { encoding: 'utf8' }).stdout);
            assert.match(text, new RegExp(`- leaf: ${CLAUDE.resumeLeaf}`));
            assert.match(text, new RegExp(`- messages: ${cli.messages.length}`));
            // Explain on the first boundary.
            await contextMenu(row(/^ae800328/), 'Explain: Is This Entry in the Context?');
            await page.getByRole('tab', { name: /compacted ae800328@ec228510\.md/ }).waitFor();
            const explained = page.locator('.editor-instance .view-lines', { hasText: 'Line 60' }).first();
            await explained.waitFor();
            // Word wrap breaks the long sentence where the column ends: compared as one line.
            assert.match((await editorText(explained)).replace(/\s+/g, ' '), new RegExp(`Line 60 \\(system ae800328-172e-4b1c-a40d-ccf52c5420db\\) at leaf ${CLAUDE.resumeLeaf}: before compact boundary 6b9b1c20`));
            await shot(page.locator('.part.sidebar'), 'readme-claude-sessions');
            // The graph: every line of the tree, the context at the resume leaf highlighted.
            await runCommand(page, 'Notifications: Clear All Notifications');
            await runCommand(page, 'View: Close All Editors');
            await contextMenu(session, 'Show Branch Graph');
            const frame = page.frameLocator('iframe.webview.ready').last().frameLocator('iframe#active-frame');
            const status = frame.locator('#status');
            await status.filter({ hasText: new RegExp(`62 entries · 5 leaves · \\d+ nodes drawn · ${cli.entryIds.length} entries in context at ${CLAUDE.resumeLeaf}`) }).waitFor();
            // Each /compact's boundary starts a tree of its own, linked (dashed) to the line it compacted.
            await frame.getByRole('button', { name: /^compact_boundary ae800328-172e-4b1c-a40d-ccf52c5420db; compact boundary.*compacts the conversation at 7f1509ff-4e18-403f-ab85-226b98c46dbf/ }).waitFor();
            assert.equal(await frame.locator('path.edge.logical').count(), 2);
            await frame.getByRole('button', { name: new RegExp(`^assistant ${CLAUDE.resumeLeaf}; .*selected leaf; resume leaf; in context`) }).waitFor();
            // The second /compact's audit beside the picture while its boundary has the focus.
            await frame.getByRole('button', { name: /^compact_boundary ae800328-172e-4b1c-a40d-ccf52c5420db; .*audit: kept 1 of 1 fact, lost 0/ }).waitFor();
            await frame.getByRole('button', { name: /^compact_boundary 6b9b1c20-9e05-4138-a222-b80f484495b0; .*audit: kept 0 of 1 fact, lost 1/ }).focus();
            const pane = frame.locator('#details');
            await pane.filter({ hasText: 'kept 0 of 1 fact, lost 1; summarizes 16 entries 70883128…b7c03308, keeps from d49e5e29' }).waitFor();
            await pane.locator('button.lost', { hasText: 'last request: Run a command again ← 4bfd3501-c751-4bc1-bd0e-cff21c912309' }).waitFor();
            await shot(page.locator('iframe.webview.ready').last(), 'readme-claude-graph');
        }));

    it('"Compare with Active Leaf" opens the two contexts of a Claude Code rewind in VS Code\'s diff editor, with the summary and the report', () =>
        timed('12-claude-compare', async () => {
            await runCommand(page, 'Notifications: Clear All Notifications');
            // The diff editor gets the whole editor area.
            await runCommand(page, 'View: Close All Editors');
            const file = path.join(host.workspace, CLAUDE_TRANSCRIPT.dir, CLAUDE_TRANSCRIPT.file);
            // Down to the rewound branch's leaf: the fork after the first answer, then the one at the parallel calls.
            await expand(row(/^7c758304/));
            await expand(row(/^f9cc853c/));
            await expand(row(/^0bee5823/));
            await expand(row(/^63e5fc2b/));
            await expand(row(/^4080496a/));
            await contextMenu(row(/^0b5e3c50/), 'Compare with Active Leaf');
            await page.getByRole('tab', { name: /Context ec228510 ↔ 0b5e3c50/ }).waitFor();
            await diffSide('original').filter({ hasText: /leaf:\sec228510/ }).waitFor();
            await diffSide('modified').filter({ hasText: /leaf:\s0b5e3c50/ }).waitFor();
            // The summary says what `sessiond diff` says.
            const cli = JSON.parse(spawnSync(sessiondBin, ['diff', file, CLAUDE.resumeLeaf, CLAUDE.rewoundLeaf, '--json'], { encoding: 'utf8' }).stdout);
            assert.equal(cli.forkPointId, CLAUDE.forkPoint);
            const toast = page.locator('.notification-toast', { hasText: /part after f9cc853c/ }).first();
            await toast.waitFor();
            const summary = (await toast.innerText()).replace(/\u00a0/g, ' ');
            assert.match(summary, new RegExp(`ec228510 and 0b5e3c50 part after f9cc853c; A: ${cli.sideA.entries} entries`));
            assert.match(summary, new RegExp(`context: ${cli.contextCommon} shared, ${cli.contextOnlyA.length} only at A, ${cli.contextOnlyB.length} only at B`));
            await shot(page.locator('.part.editor'), 'readme-claude-compare');
            // The report, from the notification's button.
            await toast.getByRole('button', { name: 'Open Report' }).click();
            await page.getByRole('tab', { name: /compacted ec228510↔0b5e3c50\.md/ }).waitFor();
            await page.locator('.editor-instance .view-lines', { hasText: `fork point: ${CLAUDE.forkPoint}` }).first().waitFor();
            // The second /compact's audit: its lost fact (the last request) jumps to the line it came from.
            await row(/^7c758304/).locator('.monaco-tl-twistie').click();
            await contextMenu(row(/^6b9b1c20/), 'Show Summary Audit…');
            await page.locator('.quick-input-widget .quick-input-title', { hasText: 'Summary audit of 6b9b1c20: kept 0 of 1 fact, lost 1' }).waitFor();
            await page.locator('.quick-input-list .monaco-list-row', { hasText: 'lost: last request Run a command again' }).first().click();
            await page.getByRole('treeitem', { name: /^4bfd3501 ● active leaf · user: Run a command again/ }).first().waitFor();
        }));

    it('"Compare with Active Leaf" on the shipped pi session: a compaction on one side only', () =>
        timed('13-compare', async () => {
            await runCommand(page, 'Notifications: Clear All Notifications');
            await runCommand(page, 'View: Close All Editors');
            const file = path.join(host.workspace, V3.file);
            await collapseAll();
            await expand(row(/^pi, \d+ sessions$/));
            await expand(row(/^project pi-mono, \d+ sessions$/));
            await expand(row(new RegExp(`^${V3.name}, `)));
            await expand(row(new RegExp(V3.fork)));
            await expand(row(/branch_summary: Explored keeping/));
            await expand(row(/user: Alternative: split main\.ts/));
            await expand(row(/assistant: Plan: 1\) extract runPrintMode/));
            // The active leaf: 886c2fdc, after the compaction; compared with the other branch's leaf.
            await row(/^886c2fdc/).click();
            await page.getByRole('treeitem', { name: /886c2fdc.*active leaf/ }).first().waitFor();
            // The editors get the window's height (the output panel was opened by an earlier scenario).
            if (await page.locator('.part.panel').isVisible()) await runCommand(page, 'View: Toggle Panel Visibility');
            await contextMenu(row(/^de19adb3/), 'Compare with Active Leaf');
            await page.getByRole('tab', { name: /Context 886c2fdc ↔ de19adb3/ }).waitFor();
            await diffSide('original').filter({ hasText: /leaf:\s886c2fdc/ }).waitFor();
            await diffSide('modified').filter({ hasText: /leaf:\sde19adb3/ }).waitFor();
            const cli = JSON.parse(spawnSync(sessiondBin, ['diff', file, '886c2fdc', 'de19adb3', '--json'], { encoding: 'utf8' }).stdout);
            const a = JSON.parse(spawnSync(sessiondBin, ['context', file, '--leaf', '886c2fdc', '--json'], { encoding: 'utf8' }).stdout);
            const b = JSON.parse(spawnSync(sessiondBin, ['context', file, '--leaf', 'de19adb3', '--json'], { encoding: 'utf8' }).stdout);
            assert.match(await editorText(diffSide('original')), new RegExp(`- messages: ${a.messages.length}`));
            assert.match(await editorText(diffSide('modified')), new RegExp(`- messages: ${b.messages.length}`));
            // The diff is computed whole: the line both sides share where they part (the
            // compaction's summary at A, the 312 messages it summarized at B, listed one line
            // each) stands at one height on both sides, which only a finished diff aligns.
            const shared = `┄┄ 1 message only at 886c2fdc, ${b.messages.length - 2} only at de19adb3`;
            // Found from the right side (the diff editor scrolls both sides together).
            await diffSide('modified').click();
            await page.keyboard.press('ControlOrMeta+F');
            const find = page.locator('.monaco-diff-editor .editor.modified .find-widget textarea').first();
            await find.waitFor();
            await find.fill(shared);
            await find.press('Enter');
            const widget = page.locator('.monaco-diff-editor .find-widget.visible');
            await widget.getByRole('button', { name: /^Close/ }).click();
            await widget.waitFor({ state: 'detached' });
            // The found text stays selected: unselect it for the picture.
            await page.keyboard.press('ArrowLeft');
            // Its first row (a long line wraps), on each side.
            const start = /┄┄\s1\smessage\sonly\sat\s886c2fdc/;
            const height = async (side) => {
                const line = diffSide(side).locator('.view-line', { hasText: start });
                return (await line.count()) === 1 ? (await line.boundingBox())?.y : undefined;
            };
            const t0 = Date.now();
            for (;;) {
                const [left, right] = [await height('original'), await height('modified')];
                if (left !== undefined && left === right) break;
                if (Date.now() - t0 > WAIT_MS) assert.fail(`the shared line is not aligned: ${left} ≠ ${right}`);
                await page.waitForTimeout(200);
            }
            await diffSide('original').locator('.view-line', { hasText: /only\sat\s886c2fdc\s·\scompaction\ssummary/ }).waitFor();
            await diffSide('modified').locator('.view-line', { hasText: /only\sat\sde19adb3\s·\suser\s+\(entry\s00247798\):\s\// }).waitFor();
            // …and VS Code did not stop it early (its warning comes with the result it stopped at).
            const early = page.locator('.notification-toast, .notifications-center .notification-list-item', { hasText: /diff algorithm was stopped early/ });
            await early.first().waitFor({ timeout: TOAST_MS }).then(
                () => assert.fail('VS Code stopped the diff early'),
                () => undefined,
            );
            const toast = page.locator('.notification-toast', { hasText: /part after 521cf246/ }).first();
            await toast.waitFor();
            const summary = (await toast.innerText()).replace(/\u00a0/g, ' ');
            assert.match(summary, new RegExp(`context: ${cli.contextCommon} shared, ${cli.contextOnlyA.length} only at A, ${cli.contextOnlyB.length} only at B`));
            await screenshot(page, 'readme-compare-diff');
        }));

    it("a compaction's audit: in its row's hover, as a list that jumps to a lost fact's entry, and beside the graph", () =>
        timed('14-audit', async () => {
            await runCommand(page, 'Notifications: Clear All Notifications');
            await runCommand(page, 'View: Close All Editors');
            const file = path.join(host.workspace, V3.file);
            const cli = JSON.parse(spawnSync(sessiondBin, ['explain', file, '4909db93', '--json'], { encoding: 'utf8' }).stdout);
            assert.deepEqual([cli.audit.kept, cli.audit.lost], [0, 46]);
            // The hover: what it summarizes, what it kept, the lost facts with their entries.
            const compaction = row(/^4909db93/);
            await compaction.hover();
            const hover = page.locator('.monaco-hover, .workbench-hover', { hasText: 'kept 0 of 46 facts, lost 46' }).first();
            await hover.waitFor();
            const hoverText = (await hover.innerText()).replace(/\u00a0/g, ' ');
            assert.match(hoverText, /summarizes 338 entries 00247798…12bbdff5, keeps from 521cf246/);
            assert.ok(hoverText.includes(`lost read file ${cli.audit.probes[0].text} ← ${cli.audit.probes[0].entryId}`), hoverText);
            await shot(hover, 'readme-audit-hover');
            await page.mouse.move(5, 5);
            // The list: choosing a lost modified file selects the entry it came from.
            const modified = cli.audit.probes.find((p) => p.kind === 'modifiedFile');
            await contextMenu(compaction, 'Show Summary Audit…');
            await page.locator('.quick-input-widget .quick-input-title', { hasText: 'Summary audit of 4909db93: kept 0 of 46 facts, lost 46' }).waitFor();
            await page.locator('.quick-input-list .monaco-list-row', { hasText: `lost: modified file ${modified.text}` }).first().click();
            await page.getByRole('treeitem', { name: new RegExp(`${modified.entryId}.*active leaf`) }).first().waitFor();
            await page.getByRole('tab', { name: new RegExp(`@${modified.entryId}\\.md`) }).waitFor();
            // The graph: focusing the compaction shows its audit beside the picture; a fact selects its entry.
            await runCommand(page, 'Notifications: Clear All Notifications');
            await runCommand(page, 'View: Close All Editors');
            await contextMenu(row(new RegExp(`^${V3.name}`)), 'Show Branch Graph');
            const frame = page.frameLocator('iframe.webview.ready').last().frameLocator('iframe#active-frame');
            await frame.locator('#status', { hasText: / in context at / }).waitFor();
            const node = frame.getByRole('button', { name: /^compaction 4909db93;.*audit: kept 0 of 46 facts, lost 46/ });
            await node.focus();
            const pane = frame.locator('#details');
            await pane.filter({ hasText: 'kept 0 of 46 facts, lost 46; summarizes 338 entries 00247798…12bbdff5, keeps from 521cf246' }).waitFor();
            assert.equal(await pane.locator('button.lost').count(), 46);
            await shot(page.locator('iframe.webview.ready').last(), 'readme-graph-audit');
            const read = cli.audit.probes[0];
            await pane.getByRole('button', { name: `lost read file ${read.text}, from entry ${read.entryId}` }).click();
            // Its row selected and its context beside the graph; the active leaf stays.
            await page.getByRole('treeitem', { name: new RegExp(read.entryId), selected: true }).first().waitFor();
            await page.getByRole('tab', { name: new RegExp(`@${read.entryId}\\.md`) }).waitFor();
        }));

    it("the graph's ↳ subagent link opens the subagent's graph, whose header opens the parent's again", () =>
        timed('15-subagent-graph', async () => {
            await runCommand(page, 'Notifications: Clear All Notifications');
            await runCommand(page, 'View: Close All Editors');
            // The real transcript with an Agent call, and its subagent's own transcript beside it,
            // copied in where Claude Code writes them: the view lists it as it arrives.
            const project = path.join(host.workspace, CLAUDE_TRANSCRIPT.dir);
            fs.copyFileSync(path.join(SUBAGENT.source, '..', 'with-subagent.jsonl'), path.join(project, 'with-subagent.jsonl'));
            fs.mkdirSync(path.join(project, 'with-subagent', 'subagents'), { recursive: true });
            for (const f of fs.readdirSync(path.join(SUBAGENT.source, 'subagents'))) {
                fs.copyFileSync(path.join(SUBAGENT.source, 'subagents', f), path.join(project, 'with-subagent', 'subagents', f));
            }
            const parentFile = path.join(project, 'with-subagent.jsonl');
            const subFile = path.join(project, 'with-subagent', 'subagents', `agent-${SUBAGENT.agent}.jsonl`);
            const parentCli = JSON.parse(spawnSync(sessiondBin, ['graph', parentFile, '--json'], { encoding: 'utf8' }).stdout);
            const subCli = JSON.parse(spawnSync(sessiondBin, ['graph', subFile, '--json'], { encoding: 'utf8' }).stdout);
            assert.equal(subCli.parent.toolUseId, SUBAGENT.toolUseId);
            await collapseAll();
            await expand(row(/^Claude Code, \d+ sessions$/));
            await expand(row(/^project work, \d+ sessions$/));
            await contextMenu(row(new RegExp(`^${SUBAGENT.firstPrompt}, `)), 'Show Branch Graph');
            const parentGraph = await graphFrame(new RegExp(`\\b${parentCli.entryCount} entries · 1 leaf · `));
            // The Agent call's node carries the link; a click on it opens the subagent's graph.
            const call = parentCli.nodes.find((n) => n.subagent);
            await parentGraph.getByRole('button', { name: new RegExp(`^assistant ${call.id}; .*started subagent agent-${SUBAGENT.agent}`) }).waitFor();
            await parentGraph.getByRole('link', { name: new RegExp(`^Open the graph of subagent agent-${SUBAGENT.agent} `) }).click();
            await page.getByRole('tab', { name: new RegExp(`Graph: agent-${SUBAGENT.agent}`), selected: true }).waitFor();
            const subGraph = await graphFrame(new RegExp(`\\b${subCli.entryCount} entries · 1 leaf · `));
            // Its header names the call that started it and opens the parent's graph again.
            const back = subGraph.locator('#parent');
            await back.filter({ hasText: `↰ started by tool_use ${SUBAGENT.toolUseId}: open parent's graph` }).waitFor();
            await shot(page.locator('iframe.webview.ready').last(), 'readme-subagent-graph');
            await back.click();
            await page.getByRole('tab', { name: /Graph: with-subagent/, selected: true }).waitFor();
            await graphFrame(new RegExp(`\\b${parentCli.entryCount} entries · 1 leaf · `));
            // One panel per transcript: the two graphs, no third.
            assert.equal(await page.getByRole('tab', { name: /^Graph: / }).count(), 2);
        }));

    it('the graphs of the shipped sessions fit their panel at two sizes, tell the v1 compaction as the daemon does, and open folds one level', () =>
        timed('16-graph-shots', async () => {
            const docs = new URL('../docs/', import.meta.url).pathname;
            const before = page.viewportSize();
            const sizes = [
                [1600, 1000],
                [1100, 720],
            ];
            // How the nodes lie in the picture's area, per axis: covering it (to within the
            // 20 px margin the view keeps) where they are larger, centred where smaller.
            const filling = (frame) =>
                frame.locator('svg#graph').evaluate((svg) => {
                    const r = svg.getBoundingClientRect();
                    const boxes = [...svg.querySelectorAll('g.node')].map((g) => g.querySelector('rect').getBoundingClientRect());
                    const axis = (start, end, a, b) => {
                        if (b - a + 44 > end - start) return a <= start + 22 && b >= end - 22 ? 'fills' : `${Math.round(a - start)} px empty before, ${Math.round(end - b)} px after`;
                        return Math.abs(a - start - (end - b)) <= 4 ? 'centred' : `off centre: ${Math.round(a - start)} px before, ${Math.round(end - b)} px after`;
                    };
                    const lo = (k) => Math.min(...boxes.map((b) => b[k]));
                    const hi = (k) => Math.max(...boxes.map((b) => b[k]));
                    const zoom = Number(/scale\(([\d.]+)\)/.exec(svg.querySelector('#world')?.getAttribute('transform') ?? '')?.[1]);
                    const said = `width ${axis(r.left, r.right, lo('left'), hi('right'))}, height ${axis(r.top, r.bottom, lo('top'), hi('bottom'))}`;
                    // A small graph stops growing at twice its size, centred.
                    return zoom >= 2 && said === 'width centred, height centred' ? 'width fills, height centred (at the largest zoom)' : said;
                });
            const shoot = async (name, frame) => {
                for (const [w, h] of sizes) {
                    await page.setViewportSize({ width: w, height: h });
                    // The webview fits itself again after the resize (ResizeObserver): the
                    // picture fills the panel on one axis at least, and is centred on the other.
                    const t0 = Date.now();
                    let said;
                    const good = (x) => /^width (fills|centred), height (fills|centred)( \(at the largest zoom\))?$/.test(x) && x.includes('fills');
                    while (!good((said = await filling(frame)))) {
                        if (Date.now() - t0 > TOAST_MS) assert.fail(`${name} at ${w} px: ${said}`);
                        await page.waitForTimeout(100);
                    }
                    await page.waitForTimeout(300);
                    const file = await shot(page.locator('iframe.webview.ready').last(), `graph-${name}-${w}`);
                    fs.copyFileSync(file, path.join(docs, `graph-${name}-${w}.png`));
                }
            };
            const open = async (rowName) => {
                await runCommand(page, 'Notifications: Clear All Notifications');
                await runCommand(page, 'View: Close All Editors');
                // The session's row in view: earlier scenarios left long sessions expanded.
                await collapseAll();
                await expand(row(/^pi, \d+ sessions$/));
                await expand(row(/^project pi-mono,/));
                await contextMenu(row(rowName), 'Show Branch Graph');
                const frame = page.frameLocator('iframe.webview.ready').last().frameLocator('iframe#active-frame');
                await frame.locator('#status', { hasText: / in context at / }).waitFor();
                return frame;
            };
            try {
                // 1,002 entries, version 1: the compaction's range and kept start as `sessiond graph` says them.
                let frame = await open(/^pi-v1-before-compaction\.jsonl/);
                await frame.getByRole('button', { name: /compaction 00000168.*compaction summarizing 292 entries 00000002…00000125, kept from 00000126/ }).waitFor();
                await frame.getByRole('button', { name: /^user 00000126.*kept from here by compaction 00000168/ }).waitFor();
                await shoot('pi-v1-before-compaction', frame);
                // 1,018 entries in one line: a fold and the leaf; a click opens the fold one level,
                // its user turns as landmarks.
                frame = await open(/^pi-v1-large-session\.jsonl/);
                assert.equal(await frame.locator('g.node').count(), 2);
                // The status line counts in the singular where one: "1 leaf".
                assert.match(await frame.locator('#status').innerText(), /1018 entries · 1 leaf · 2 nodes drawn · \d+ entries in context at /);
                await shoot('pi-v1-large-session', frame);
                await frame.locator('g.node.fold').first().click();
                await frame.locator('g.node.opened').first().waitFor();
                const users = await frame.locator('g.node.type-message:not(.fold)').count();
                assert.ok(users >= 20, `${users} user turns drawn after one click`);
                await shoot('pi-v1-large-session-opened', frame);
                // The branched session.
                frame = await open(new RegExp(`^${V3.name}`));
                await frame.locator('g.node.branch-point').first().waitFor();
                await shoot('pi-v3-branched', frame);
            } finally {
                if (before) await page.setViewportSize(before);
            }
        }));
    const pi = findPi();
    const noPi = pi ? false : 'pi is not installed (bash scripts/live-deps.sh)';
    if (noPi && process.env.CI === 'true') throw new Error(`the rewind scenario needs ${noPi}`);
    it('"Rewind Files to Here…" on a session pi wrote in a git work tree: the dry run\'s diff first, then the files put back and the backup named', { skip: noPi }, () =>
        timed('17-rewind', async () => {
            await runCommand(page, 'Notifications: Clear All Notifications');
            await runCommand(page, 'View: Close All Editors');
            // pi writes and edits files in a git work tree, its model the scripted server
            // (tests/rewind.rs does the same); its session goes under the view's root.
            const base = path.join(host.tmp, 'rewind');
            const work = path.join(base, 'rewind-work');
            fs.mkdirSync(work, { recursive: true });
            const before = { 'existing.txt': 'alpha\nbeta\ngamma\n', 'readme.md': '# Title\n' };
            for (const [f, text] of Object.entries(before)) fs.writeFileSync(path.join(work, f), text);
            const git = (...args) => {
                const r = spawnSync('git', args, { cwd: work, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } });
                assert.equal(r.status, 0, `git ${args.join(' ')}: ${r.stderr}`);
            };
            git('init', '-q');
            git('add', '.');
            git('commit', '-q', '-m', 'start');
            const tool = (name, args) => ({ tools: [{ name, arguments: args }] });
            const file = await runScriptedPi(pi, {
                base,
                work,
                sessions: path.join(host.workspace, 'rewind-sessions'),
                script: {
                    prompts: {
                        'make notes': [tool('write', { path: 'notes.txt', content: 'one\ntwo\n' }), tool('edit', { path: 'existing.txt', edits: [{ oldText: 'beta', newText: 'BETA' }] }), { text: 'noted' }],
                        'edit them': [tool('edit', { path: 'notes.txt', edits: [{ oldText: 'two', newText: 'TWO' }] }), { text: 'edited' }],
                    },
                    default: [{ text: 'ok' }],
                },
                prompts: ['make notes', 'edit them'],
            });
            const after = { 'existing.txt': 'alpha\nBETA\ngamma\n', 'notes.txt': 'one\nTWO\n', 'readme.md': '# Title\n' };
            const tree = () => Object.fromEntries(fs.readdirSync(work).filter((f) => f !== '.git').sort().map((f) => [f, fs.readFileSync(path.join(work, f), 'utf8')]));
            assert.deepEqual(tree(), after, 'pi wrote and edited the files');
            const entries = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
            const prompt = entries.find((e) => e.message?.role === 'user' && JSON.stringify(e.message.content).includes('make notes')).id;
            // The session in the view: pi's, project rewind-work.
            await collapseAll();
            await expand(row(/^pi, \d+ sessions$/));
            await expand(row(/^project rewind-work, 1 session$/));
            await expand(row(new RegExp(`^${path.basename(file).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`)));
            // The prompt is within the session's folded run.
            await expand(row(/┆ \d+ entries folded/));
            await contextMenu(row(new RegExp(`^${prompt} · user: make notes`)), 'Rewind Files to Here…');
            // The dry run's diff is shown first, and asked about; nothing has changed yet.
            const dialog = page.locator('.monaco-dialog-box', { hasText: `rewind 2 files to ${prompt}?` });
            await dialog.waitFor();
            // A read-only document of its own (closing it asks nothing).
            await page.getByRole('tab', { name: new RegExp(` to ${prompt}\\.diff`) }).waitFor();
            const diff = page.locator('.editor-instance .view-lines', { hasText: `# Rewind files to ${prompt}` }).first();
            await diff.waitFor();
            const shown = await editorText(diff);
            assert.match(shown, /· dry run/);
            for (const want of ['# restore   existing.txt', '# remove    notes.txt', '--- a/existing.txt', '-BETA', '+beta', '+++ /dev/null']) {
                assert.ok(shown.includes(want), `${want} in the dry run's diff:\n${shown}`);
            }
            assert.deepEqual(tree(), after, 'the dry run changed nothing');
            await screenshot(page, 'readme-rewind');
            await dialog.getByRole('button', { name: 'Rewind Files' }).click();
            // Applied: the files as they were before the prompt, and the backup named.
            const done = await waitForToast(/rewound 2 file\(s\) to/);
            const backup = /backup (\S+) \(/.exec(done)?.[1];
            assert.ok(backup && fs.existsSync(backup), done);
            assert.deepEqual(tree(), before);
            await runCommand(page, 'View: Close All Editors');
            await page.getByRole('tab', { name: new RegExp(` to ${prompt}\\.diff`) }).waitFor({ state: 'detached' });
            assert.equal(await page.locator('.monaco-dialog-box').count(), 0, 'closing the plan asks nothing');
            // The backup puts the session's versions back (`sessiond rewind --undo DIR`).
            const undo = spawnSync(sessiondBin, ['rewind', '--undo', backup], { encoding: 'utf8' });
            assert.equal(undo.status, 0, undo.stderr);
            assert.deepEqual(tree(), after);
        }));
});
