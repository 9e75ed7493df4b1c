//! The two documents "Compare with Active Leaf" hands VS Code's diff editor
//! (`renderComparedContexts`): their shape on made-up contexts, and, on every pair of leaves of
//! the shipped pi session and of the real Claude Code transcript, VS Code's own diff computation
//! (the one code-server 1.139 runs, from the real-host suite's install) finishing within the
//! diff editor's default 5 s limit, where the whole contexts had made it stop early.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { ContextAtResult, ContextMessage, PiContextAt } from '../protocol';
import { commonPairs, COMPARE_WHOLE_CHARS, MAX_PART_CHARS, renderComparedContexts, renderContext } from '../render';
import { BINARY, CLAUDE, CLAUDE_EXAMPLE, EXAMPLE, LEAVES, REPO_DIR, requireBinary } from '../testing/fixtures';

const user = (text: string): ContextMessage => ({ role: 'user', content: [{ type: 'text', text }] });

/** A pi context of the given messages, each from the entry of the same index in `ids`. */
function piContext(leafId: string, ids: string[], texts: string[]): PiContextAt {
    return {
        messages: texts.map(user),
        model: { provider: 'anthropic', modelId: 'claude' },
        entryIds: ids,
        messageEntryIds: ids,
        leafId,
        diagnostics: [],
        tornTail: null,
        messageCount: texts.length,
        offset: 0,
        revision: 1,
    } as unknown as PiContextAt;
}

const heading = (leafId: string) => ({ path: '/s.jsonl', name: 'demo', leafId });

describe('the compared contexts', () => {
    it('pairs the longest common run of messages', () => {
        assert.deepEqual(commonPairs(['a', 'b', 'c', 'd'], ['a', 'x', 'c', 'd']), [
            [0, 0],
            [2, 2],
            [3, 3],
        ]);
        assert.deepEqual(commonPairs(['s', 'x', 'a1', 'a2'], ['m1', 'm2', 'm3', 'x', 'b1']), [[1, 3]]);
        assert.deepEqual(commonPairs([], ['a']), []);
    });

    it('shows a message both sides hold the same way on both, without its position', () => {
        const a = piContext('a2', ['s', 'x', 'a1', 'a2'], ['summary', 'shared', 'answer A', 'more A']);
        const b = piContext('b1', ['m1', 'm2', 'x', 'b1'], ['first', 'second', 'shared', 'answer B']);
        const sides = renderComparedContexts(a, heading('a2'), b, heading('b1'));
        for (const text of [sides.a, sides.b]) {
            assert.match(text, /^## user {2}\(entry x\)\n\nshared$/m);
            assert.doesNotMatch(text, /^## \d+\./m, 'no positions');
            assert.match(text, /^Compared: a2 ↔ b1$/m);
        }
        // Small: each side's own messages whole, where the two part.
        assert.match(sides.a, /^## user {2}\(entry s\)\n\nsummary$/m);
        assert.match(sides.b, /^## user {2}\(entry m2\)\n\nsecond$/m);
        // The preview's document is unchanged: positions in the headings.
        assert.match(renderContext(a, heading('a2')), /^## 2\. user {2}\(entry x\)$/m);
    });

    it('lists the messages of a long stretch one line each, A\'s before and B\'s after a line both share', () => {
        // Two parts as long as the preview shows one: more than the budget together.
        const long = 'x'.repeat(MAX_PART_CHARS + 10);
        assert.ok(2 * MAX_PART_CHARS >= COMPARE_WHOLE_CHARS);
        const a = piContext('a1', ['s', 'x', 'a1'], ['summary of it all', 'shared', 'answer A']);
        const b = piContext('b1', ['m1', 'm2', 'm3', 'x', 'b1'], [long, long, '\nsecond\nline', 'shared', 'answer B']);
        const sides = renderComparedContexts(a, heading('a1'), b, heading('b1'));
        const shared = '┄┄ 1 message only at a1, 3 only at b1 (one line each; Show Context shows them whole) ┄┄';
        assert.ok(sides.a.includes(`\nonly at a1 · user  (entry s): summary of it all\n${shared}\n`), sides.a);
        const x100 = `${'x'.repeat(100)}…`;
        assert.ok(sides.b.includes(`\n${shared}\nonly at b1 · user  (entry m1): ${x100}\nonly at b1 · user  (entry m2): ${x100}\nonly at b1 · user  (entry m3): second\n`), sides.b);
        // Past the stretch the two parted at, the messages are whole again (within the budget).
        assert.match(sides.a, /^## user {2}\(entry a1\)\n\nanswer A$/m);
        assert.match(sides.b, /^## user {2}\(entry b1\)\n\nanswer B$/m);
    });
});

/** code-server's diff worker: the same computation VS Code 1.139's diff editor runs. */
function diffWorker(): string | undefined {
    const host = process.env.SESSIOND_VSCODE_HOST_DIR ?? path.join(REPO_DIR, '.tools', 'vscode-host');
    const file = path.join(host, 'node_modules', 'code-server', 'lib', 'vscode', 'out', 'vs', 'platform', 'agentHost', 'node', 'diffWorkerMain.js');
    return fs.existsSync(file) ? file : undefined;
}

interface DetailedDiff {
    hitTimeout: boolean;
    added: number;
    removed: number;
}
type ComputeDiff = (original: string, modified: string, maxComputationTimeMs: number) => DetailedDiff;

/** The diff editor's default `diffEditor.maxComputationTime`. */
const DIFF_EDITOR_LIMIT_MS = 5000;

describe("VS Code's diff computation on the compared contexts", () => {
    const worker = diffWorker();
    const skip = worker ? false : 'code-server is not installed (bash scripts/vscode-host-deps.sh)';
    if (skip && process.env.CI === 'true') {
        it('needs code-server', () => assert.fail(skip));
        return;
    }
    if (skip) process.stderr.write(`skipping VS Code's diff computation: ${skip}\n`);

    const load = async (): Promise<ComputeDiff> => {
        // An ES module: loaded with import(), which TypeScript keeps as such under Node16.
        const mod = (await import(worker!)) as { computeDetailedDiff: ComputeDiff };
        return mod.computeDetailedDiff;
    };
    const context = (file: string, leaf: string): ContextAtResult =>
        JSON.parse(execFileSync(BINARY, ['context', file, '--leaf', leaf, '--json'], { encoding: 'utf8', maxBuffer: 1 << 28 }));

    it('the whole contexts of the shipped comparison stopped it early', { skip }, async () => {
        requireBinary();
        const compute = await load();
        const [a, b] = ['886c2fdc', 'de19adb3'];
        // A second is plenty to show it: 120 s did not finish it either.
        const d = compute(renderContext(context(EXAMPLE, a), heading(a)), renderContext(context(EXAMPLE, b), heading(b)), 1000);
        assert.equal(d.hitTimeout, true);
    });

    for (const [name, file, leaves] of [
        ['the shipped pi session', EXAMPLE, ['886c2fdc', ...LEAVES]],
        ['the real Claude Code transcript', CLAUDE_EXAMPLE, [CLAUDE.resumeLeaf, CLAUDE.rewoundLeaf, '7f1509ff-4e18-403f-ab85-226b98c46dbf']],
    ] as const) {
        it(`finishes within its default limit on every pair of leaves of ${name}`, { skip }, async () => {
            requireBinary();
            const compute = await load();
            const contexts = new Map(leaves.map((l) => [l, context(file, l)]));
            const times: string[] = [];
            for (const a of leaves) {
                for (const b of leaves) {
                    if (a === b) continue;
                    const sides = renderComparedContexts(contexts.get(a)!, heading(a), contexts.get(b)!, heading(b));
                    const t0 = Date.now();
                    const d = compute(sides.a, sides.b, DIFF_EDITOR_LIMIT_MS);
                    times.push(`${a.slice(0, 8)}↔${b.slice(0, 8)} ${Date.now() - t0} ms`);
                    assert.equal(d.hitTimeout, false, `${a} ↔ ${b}: ${times[times.length - 1]}`);
                    assert.ok(d.added + d.removed > 0, `${a} ↔ ${b} differ`);
                }
            }
            process.stderr.write(`diff computation: ${times.join(', ')}\n`);
        });
    }
});
