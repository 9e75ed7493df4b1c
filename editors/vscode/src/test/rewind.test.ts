//! "Rewind Files to Here…" without VS Code: `session/rewind` through the client on a pi session
//! whose records write and edit files in a work directory, and the diff document the command
//! shows before it asks (`renderRewind`): the dry run changes nothing, the rewind puts the files
//! back, drift is refused with its reason until forced.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SessiondClient } from '../client';
import { renderRewind, rewindChanges, rewindRefusalText } from '../render';
import { BINARY, requireBinary } from '../testing/fixtures';

const T = '2026-01-01T00:00:00.000Z';

function line(v: unknown): string {
    return `${JSON.stringify(v)}\n`;
}

/** A version-3 pi session in `cwd`: a prompt, a write of notes.txt, a prompt, an edit of existing.txt. */
function session(cwd: string): string {
    const msg = (id: string, parentId: string | null, message: unknown) => line({ type: 'message', id, parentId, timestamp: T, message });
    const call = (id: string, name: string, args: unknown) => ({
        role: 'assistant', content: [{ type: 'toolCall', id, name, arguments: args }], api: 'openai-completions', provider: 'p',
        model: 'm', usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
        stopReason: 'toolUse', timestamp: 1,
    });
    const result = (id: string, details: unknown) => ({
        role: 'toolResult', toolCallId: id, toolName: 'x', content: [{ type: 'text', text: 'Successfully done' }], details, isError: false, timestamp: 1,
    });
    const user = (text: string) => ({ role: 'user', content: [{ type: 'text', text }], timestamp: 1 });
    return (
        line({ type: 'session', version: 3, id: '0199a0b2-0000-7000-8000-00000000bbbb', timestamp: T, cwd }) +
        msg('bbbb0001', null, user('make notes')) +
        msg('bbbb0002', 'bbbb0001', call('c1', 'write', { path: 'notes.txt', content: 'one\n' })) +
        msg('bbbb0003', 'bbbb0002', result('c1', null)) +
        msg('bbbb0004', 'bbbb0003', user('edit it')) +
        msg('bbbb0005', 'bbbb0004', call('c2', 'edit', { path: 'existing.txt', edits: [{ oldText: 'beta', newText: 'BETA' }] })) +
        msg('bbbb0006', 'bbbb0005', result('c2', { diff: '', firstChangedLine: 2, patch: '--- existing.txt\n+++ existing.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA\n' }))
    );
}

describe('Rewind Files to Here (session/rewind)', () => {
    let base: string;
    let root: string;
    let work: string;
    let file: string;
    let client: SessiondClient;

    before(async () => {
        requireBinary();
        base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sessiond-vscode-rewind-')));
        root = path.join(base, 'sessions');
        work = path.join(base, 'work');
        fs.mkdirSync(root);
        fs.mkdirSync(work);
        fs.writeFileSync(path.join(work, 'existing.txt'), 'alpha\nBETA\n');
        fs.writeFileSync(path.join(work, 'notes.txt'), 'one\n');
        file = path.join(root, 's.jsonl');
        fs.writeFileSync(file, session(work));
        client = await SessiondClient.start({
            binary: BINARY,
            roots: [root],
            env: { ...process.env, XDG_STATE_HOME: path.join(base, 'state') },
        });
        await client.open(file);
    });

    after(async () => {
        if (client) await client.stop();
        if (base) fs.rmSync(base, { recursive: true, force: true });
    });

    it('shows the dry run as a diff document and changes nothing', async () => {
        const dry = await client.rewind({ path: file, to: 'bbbb0001', dryRun: true });
        assert.equal(dry.applied, false);
        assert.equal(dry.refusal, null);
        assert.equal(rewindChanges(dry), 2);
        const text = renderRewind(dry).split('\n');
        assert.equal(text[0], `# Rewind files to bbbb0001 (leaf bbbb0006, cwd ${work}) · dry run`);
        assert.ok(text.includes('# remove    notes.txt: the session created it after the entry (its first record is a write, and the file was born after the entry)'), text.join('\n'));
        for (const l of ['--- a/existing.txt', '+++ b/existing.txt', '-BETA', '+beta', '--- a/notes.txt', '+++ /dev/null', '-one']) {
            assert.ok(text.includes(l), `${l}: ${text.join('\n')}`);
        }
        assert.equal(fs.readFileSync(path.join(work, 'existing.txt'), 'utf8'), 'alpha\nBETA\n');
    });

    it('refuses drift with its reason until forced, then rewinds with a backup', async () => {
        fs.writeFileSync(path.join(work, 'notes.txt'), 'mine\n');
        const refused = await client.rewind({ path: file, to: 'bbbb0001' });
        assert.equal(refused.applied, false);
        assert.ok(refused.refusal);
        assert.equal(refused.refusal.kind, 'drift');
        assert.match(rewindRefusalText(refused.refusal), /notes\.txt is not as the session's records leave it \(/);
        assert.match(renderRewind(refused), /^# REFUSED: /m);
        assert.equal(fs.readFileSync(path.join(work, 'notes.txt'), 'utf8'), 'mine\n');
        const done = await client.rewind({ path: file, to: 'bbbb0001', force: true });
        assert.equal(done.applied, true);
        assert.ok(done.backupDir?.startsWith(path.join(base, 'state')), String(done.backupDir));
        assert.equal(fs.readFileSync(path.join(work, 'existing.txt'), 'utf8'), 'alpha\nbeta\n');
        assert.equal(fs.existsSync(path.join(work, 'notes.txt')), false);
    });
});
