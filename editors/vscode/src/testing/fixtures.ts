//! What the integration tests share: where the daemon binary and the example session are, a
//! temporary session root, and waiting for one event.

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Event } from 'vscode-jsonrpc/node';

/** editors/vscode, from out/testing. */
export const PACKAGE_DIR = path.resolve(__dirname, '..', '..');
export const REPO_DIR = path.resolve(PACKAGE_DIR, '..', '..');
/** The daemon: env SESSIOND_BIN, else this repository's target/debug/sessiond. */
export const BINARY = process.env.SESSIOND_BIN ? path.resolve(process.env.SESSIOND_BIN) : path.join(REPO_DIR, 'target', 'debug', 'sessiond');
export const EXAMPLE = path.join(REPO_DIR, 'examples', 'pi-v3-branched.jsonl');

/** Facts about examples/pi-v3-branched.jsonl (also printed by `sessiond tree --json`). */
export const SESSION_ID = 'd703a1a9-1b7b-4fb1-b512-c9738b1fe617';
export const DEFAULT_LEAF = '610f9c1e';
export const LEAVES = ['8a9bb12f', 'de19adb3', '610f9c1e'];
export const ENTRY_COUNT = 1033;
export const FORKS = ['088a3b48', '521cf246'];

/** Fails with the path and what to do when the daemon binary is missing. */
export function requireBinary(): void {
    if (!fs.existsSync(BINARY)) {
        throw new Error(`sessiond binary not found at ${BINARY}: build it with \`cargo build\` or set SESSIOND_BIN`);
    }
}

/** A fresh session root (canonical path) holding a copy of the example; returns the root and the copy. */
export function makeRoot(): { root: string; file: string } {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sessiond-vscode-')));
    const file = path.join(root, path.basename(EXAMPLE));
    fs.copyFileSync(EXAMPLE, file);
    return { root, file };
}

/** A user message entry line (with its newline) appended under `parentId`. */
export function userLine(id: string, parentId: string, text: string): string {
    return `${JSON.stringify({
        type: 'message',
        id,
        parentId,
        timestamp: '2026-12-01T10:00:00.000Z',
        message: { role: 'user', content: [{ type: 'text', text }], timestamp: 1796119200000 },
    })}\n`;
}

/** Resolves with the first event that passes `accept`, or rejects after `ms`. */
export function next<T>(event: Event<T>, accept: (e: T) => boolean, ms: number, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
            sub.dispose();
            reject(new Error(`no ${what} within ${ms} ms`));
        }, ms);
        const sub = event((e) => {
            if (!accept(e)) return;
            clearTimeout(timer);
            sub.dispose();
            resolve(e);
        });
    });
}

/** A transcript written by the real Claude Code 2.1.197 (tests/data/claude/real/README.md): a
 * rewind branch and two `/compact`s. */
export const CLAUDE_EXAMPLE = path.join(REPO_DIR, 'tests', 'data', 'claude', 'real', 'compacted.jsonl');
/** Facts about it (also printed by `sessiond tree` and `sessiond diff`). */
export const CLAUDE = {
    cwd: '/tmp/corpus-final/work',
    firstMessage: 'Run a command',
    entryCount: 62,
    /** The leaf `claude --resume` continues from. */
    resumeLeaf: 'ec228510-5a3b-4462-aad5-e3f6654df41b',
    /** The leaf of the rewound branch. */
    rewoundLeaf: '0b5e3c50-369b-45ad-a35e-c68a63fa334e',
    /** Where the resume leaf's path and the rewound one part. */
    forkPoint: 'f9cc853c-ba6a-4561-93ff-cb4f95759bd2',
    /** The first `/compact`'s boundary (a root of the tree). */
    boundary: 'ae800328-172e-4b1c-a40d-ccf52c5420db',
};

/** Copies the Claude Code transcript into `root` under a project folder as Claude Code keeps it; returns the copy. */
export function addClaudeTranscript(root: string): string {
    const dir = path.join(root, 'claude', '-tmp-corpus-final-work');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, path.basename(CLAUDE_EXAMPLE));
    fs.copyFileSync(CLAUDE_EXAMPLE, file);
    return file;
}
