//! The VS Code side: the "Sessions" tree view (pi's and Claude Code's sessions, grouped by agent
//! and project), the read-only context preview, the comparison of two leaves in VS Code's diff
//! editor, and the commands (open, showContext, explain, compare, showAudit, verify, fork, label,
//! compact, follow) over one `sessiond serve` daemon. Everything that can be tested without VS
//! Code lives in client.ts, groups.ts, model.ts and render.ts.

import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { ExitInfo, ResponseError, SessiondClient } from './client';
import { GraphPanels } from './graph-panel';
import { AGENT_TITLES, agentKey, AgentGroup, agentOf, groupSessions, ProjectGroup, projectKey, projectLabel, SessionRow } from './groups';
import { loadAll, loadChildren, SessionModel, TreeStart, ViewItem } from './model';
import { EntryId, ExplainResult, isNothingToCompact, SearchHit, SessionSummary } from './protocol';
import {
    auditHeadline,
    auditItems,
    auditOf,
    auditSourceText,
    auditTooltip,
    comparisonSummary,
    renderCompact,
    renderComparedContexts,
    renderComparison,
    renderContext,
    explainDecider,
    explainMarkdown,
    renderExplain,
    renderRewind,
    retentionOf,
    rewindChanges,
    rewindRefusalText,
    shortId,
    verifyItems,
    verifySummary,
} from './render';

/** How many tree levels one `session/tree` request asks for. */
const TREE_PAGE_DEPTH = 10_000;
/** How many nodes one `session/tree` request asks for. */
const TREE_PAGE_LIMIT = 2_000;
const CONTEXT_SCHEME = 'sessiond-context';
const COMPARE_SCHEME = 'sessiond-compare';
const EXPLAIN_SCHEME = 'sessiond-explain';
const REWIND_SCHEME = 'sessiond-rewind';

/** A session row's tooltip: the path, then what `session/list` says of it (first user
 * message, counts, the context's tokens at the default leaf as its agent counts them,
 * modification time, cwd). */
export function sessionTooltip(p: string, s: SessionRow): string {
    const counts = s.entryCount !== undefined ? `${s.entryCount} ${s.entryCount === 1 ? 'entry' : 'entries'}, ${s.leafCount ?? 0} ${s.leafCount === 1 ? 'leaf' : 'leaves'}, ${s.messageCount ?? 0} ${s.messageCount === 1 ? 'message' : 'messages'}` : '';
    return [
        p,
        s.name ? `name: ${s.name}` : '',
        s.firstMessage ? `first message: ${s.firstMessage}` : '',
        counts,
        s.tokenEstimate != null
            ? `context: ~${s.tokenEstimate} tokens (${s.format === 'claude-code' ? "Claude Code's usage" : "pi's estimate"} at the resume leaf)`
            : '',
        s.corruptions
            ? `⚠ ${s.corruptions} corrupt ${s.corruptions === 1 ? 'spot' : 'spots'}: read as its agent reads it; \`sessiond check\` says where`
            : '',
        s.modified ? `modified ${s.modified}` : '',
        s.cwd ? `cwd ${s.cwd}` : '',
    ]
        .filter(Boolean)
        .join('\n');
}

/** How long typing must pause before "Search Sessions" asks the daemon (ms). */
export const SEARCH_DEBOUNCE_MS = 150;

/** A "Search Sessions" quick pick row for a `session/search` hit: the session's name (or file
 * name) and the entry's role, the snippet with its `**` marks as VS Code shows matches, and
 * the date. */
export function searchItem(hit: SearchHit): vscode.QuickPickItem & { hit: SearchHit } {
    const session = hit.name || path.basename(hit.path);
    const kind = hit.role ?? hit.entryType ?? 'entry';
    const date = hit.timestamp ? hit.timestamp.slice(0, 16).replace('T', ' ') : '';
    return {
        label: `${session} · ${kind}`,
        description: [date, hit.onDefaultPath ? '' : 'off the default path'].filter(Boolean).join(' · '),
        detail: hit.snippet,
        // The daemon chose the hits; VS Code must not filter them again by the typed text.
        alwaysShow: true,
        hit,
    };
}

/** A row of the view: an agent, a project, a session file, or a row of a session's tree. */
type Node =
    | { type: 'agent'; key: string; group: AgentGroup }
    | { type: 'project'; key: string; group: ProjectGroup }
    | { type: 'session'; key: string; path: string; summary: SessionRow }
    | { type: 'row'; key: string; path: string; item: ViewItem };

/** The label of a session's row: its name, else (a Claude Code transcript, named by a uuid) its first prompt, else its file name. */
export function sessionLabel(p: string, s: SessionRow, modelName?: string | null): string {
    const name = modelName ?? s.name;
    if (name) return name;
    if (agentOf(s) === 'claude-code' && s.firstMessage) return s.firstMessage;
    return path.basename(p);
}

/**
 * A session row's description, the same whether the row is collapsed or expanded: its entries
 * (the open session's count, else the listing's), its corrupt spots (a strict read refuses the
 * file), the context's tokens at the resume leaf, its
 * state (following, stopped), and where the file is (its folder and name), so that copies of
 * one session tell themselves apart; the project row above already names the cwd.
 */
export function sessionDescription(p: string, s: SessionRow, now: { entryCount?: number; state?: string }): string {
    const count = now.entryCount ?? s.entryCount;
    const entries = count !== undefined ? `${count} ${count === 1 ? 'entry' : 'entries'}` : '';
    const tokens = s.tokenEstimate != null ? `~${s.tokenEstimate} tokens` : '';
    const corrupt = s.corruptions ? `⚠ ${s.corruptions} corrupt` : '';
    const where = `${path.basename(path.dirname(p))}/${path.basename(p)}`;
    return [entries, corrupt, tokens, now.state ?? '', where].filter(Boolean).join(' · ');
}

/** A `command:` link that reveals an entry in the Sessions view (for markdown tooltips). */
function revealLink(sessionPath: string, id: EntryId): string {
    return `command:sessiond.revealEntry?${encodeURIComponent(JSON.stringify([sessionPath, id]))}`;
}

/**
 * Starts the daemon on first use and again after it died or the settings changed. An exit that
 * no restart asked for is a crash: the listeners of {@link onCrash} re-open what was open (the
 * new daemon knows no sessions) and the user is told.
 */
class Daemon implements vscode.Disposable {
    private client: Promise<SessiondClient> | undefined;
    private readonly listeners: Array<(c: SessiondClient) => void> = [];
    private readonly crashListeners: Array<(e: ExitInfo) => void> = [];

    constructor(private readonly log: vscode.OutputChannel) {}

    /** Runs `f` on every client started from now on (to subscribe to its notifications). */
    onStart(f: (c: SessiondClient) => void): void {
        this.listeners.push(f);
    }

    /** Runs `f` when a running daemon exits without being asked to. */
    onCrash(f: (e: ExitInfo) => void): void {
        this.crashListeners.push(f);
    }

    get(): Promise<SessiondClient> {
        if (!this.client) {
            const config = vscode.workspace.getConfiguration('sessiond');
            const binary = config.get<string>('path') || 'sessiond';
            const roots = (config.get<string[]>('roots') ?? []).map(expandHome);
            this.log.appendLine(`starting ${binary} serve ${roots.map((r) => `--root ${r}`).join(' ')}`);
            const started = SessiondClient.start({ binary, roots, onStderr: (t) => this.log.append(t) }).catch((err: unknown) => {
                throw new Error(startFailure(binary, err));
            });
            this.client = started;
            started.then(
                (c) => {
                    c.onExit((e) => {
                        this.log.appendLine(`sessiond exited (code ${e.code}, signal ${e.signal})`);
                        if (this.client !== started) return;
                        this.client = undefined;
                        for (const f of this.crashListeners) f(e);
                    });
                    for (const f of this.listeners) f(c);
                },
                (err: unknown) => {
                    this.log.appendLine(err instanceof Error ? err.message : String(err));
                    if (this.client === started) this.client = undefined;
                },
            );
        }
        return this.client;
    }

    async restart(): Promise<void> {
        const old = this.client;
        this.client = undefined;
        if (old) await old.then((c) => c.stop(), () => undefined);
    }

    dispose(): void {
        void this.restart();
    }
}

/**
 * Why the daemon did not start, saying where the executable comes from: the `sessiond.path`
 * setting (default `sessiond`, looked up on PATH).
 */
export function startFailure(binary: string, err: unknown): string {
    const text = err instanceof Error ? err.message : String(err);
    if (/ENOENT/.test(text)) {
        return path.isAbsolute(binary) || binary.includes('/')
            ? `the daemon ${binary} (setting sessiond.path) does not exist: build it (cargo build) or set sessiond.path to the sessiond executable`
            : `the daemon "${binary}" is not on PATH: install sessiond or set sessiond.path to the sessiond executable`;
    }
    if (/EACCES/.test(text)) return `the daemon ${binary} (setting sessiond.path) is not executable`;
    return `the daemon ${binary} (setting sessiond.path) did not start: ${text}`;
}

function expandHome(p: string): string {
    return p === '~' || p.startsWith('~/') ? path.join(process.env.HOME ?? '', p.slice(1)) : p;
}

/** The "Sessions" view: sessions from `session/list` and any opened by hand, each expandable. */
class SessionsProvider implements vscode.TreeDataProvider<Node> {
    private readonly changed = new vscode.EventEmitter<Node | undefined>();
    readonly onDidChangeTreeData = this.changed.event;
    readonly models = new Map<string, SessionModel>();
    private readonly opening = new Map<string, Promise<SessionModel>>();
    private readonly extra = new Map<string, SessionRow>();
    private readonly nodes = new Map<string, Node>();
    readonly following = new Set<string>();
    /**
     * Sessions whose growth the daemon stopped reading at a corrupt line (session/didCorrupt),
     * and why, said on the session row until the file is reloaded (repaired or replaced).
     */
    readonly stopped = new Map<string, string>();
    /** Models whose session row was redrawn after they were opened. */
    private readonly drawnOpen = new WeakSet<SessionModel>();
    /**
     * The sessions the daemon listed, by path, kept fresh by `session/didChangeList`;
     * `undefined` until listed (again, after Refresh or a new daemon).
     */
    private listed: Map<string, SessionSummary> | undefined;
    /** Rows the user expanded: drawn expanded again after the view was emptied and refilled. */
    readonly expanded = new Set<string>();

    constructor(private readonly daemon: Daemon) {}

    /** One object per row key, so that refresh and reveal find the same element. */
    private node(n: Node): Node {
        const known = this.nodes.get(n.key);
        if (known) return known;
        this.nodes.set(n.key, n);
        return n;
    }

    sessionNode(p: string, summary?: SessionRow): Node {
        return this.node({ type: 'session', key: `s:${p}`, path: p, summary: summary ?? { path: p } });
    }

    rowNode(p: string, item: ViewItem): Node {
        // An entry that starts a branch is drawn as its branch row (revealing it reveals that row).
        if (item.kind === 'entry' && this.models.get(p)?.isBranchStart(item.id)) item = { kind: 'branch', id: item.id };
        return this.node({ type: 'row', key: `r:${p}:${item.kind}:${item.id ?? ''}`, path: p, item });
    }

    refresh(n?: Node): void {
        this.changed.fire(n);
    }

    /** Lists the sessions again on the next redraw (Refresh, a new daemon). */
    relist(): void {
        this.listed = undefined;
        this.refresh();
    }

    /**
     * Applies `session/didChangeList`: new and changed rows replace theirs, removed ones go;
     * the view redraws (a session's row shows its new size, entries and tokens).
     */
    applyListChange(changed: SessionSummary[], removed: string[]): void {
        if (!this.listed) return;
        for (const s of changed) this.listed.set(s.path, s);
        for (const p of removed) this.listed.delete(p);
        this.refresh();
    }

    /**
     * Opens a session in the daemon once and keeps its model under the canonical path the
     * daemon answers with (notifications name sessions by that path).
     */
    model(p: string): Promise<SessionModel> {
        const known = this.models.get(p);
        if (known && !known.stale) return Promise.resolve(known);
        let pending = this.opening.get(p);
        if (!pending) {
            pending = (async () => {
                const client = await this.daemon.get();
                const open = await client.open(p);
                const canonical = open.path || p;
                const model = this.models.get(canonical) ?? new SessionModel(canonical);
                model.applyOpen(open);
                this.models.set(canonical, model);
                return model;
            })();
            this.opening.set(p, pending);
            pending.finally(() => this.opening.delete(p)).catch(() => undefined);
        }
        return pending;
    }

    /** Adds a session opened by hand (or written by a fork), grouped by what its open said. */
    addSession(p: string): Node {
        if (!this.extra.has(p)) {
            const model = this.models.get(p);
            this.extra.set(p, { path: p, format: model?.format, cwd: model?.cwd ?? null });
        }
        this.refresh();
        const node = this.sessionNode(p);
        if (node.type === 'session' && node.summary.format === undefined) node.summary = this.extra.get(p) ?? node.summary;
        return node;
    }

    private agentNode(group: AgentGroup): Node {
        const node = this.node({ type: 'agent', key: agentKey(group.agent), group });
        if (node.type === 'agent') node.group = group;
        return node;
    }

    private projectNode(group: ProjectGroup): Node {
        const node = this.node({ type: 'project', key: projectKey(group.agent, group.cwd), group });
        if (node.type === 'project') node.group = group;
        return node;
    }

    async getChildren(n?: Node): Promise<Node[]> {
        try {
            if (!n) {
                const all = new Map<string, SessionRow>();
                if (!this.listed) {
                    const fresh = new Map<string, SessionSummary>();
                    for (const s of await listSessions(await this.daemon.get())) fresh.set(s.path, s);
                    this.listed = fresh;
                }
                for (const [p, s] of this.listed) all.set(p, s);
                for (const [p, s] of this.extra) if (!all.has(p)) all.set(p, s);
                this.clearFailure();
                return groupSessions([...all.values()]).map((g) => this.agentNode(g));
            }
            if (n.type === 'agent') return n.group.projects.map((g) => this.projectNode(g));
            if (n.type === 'project') {
                return n.group.sessions.map((s) => {
                    const node = this.sessionNode(s.path, s);
                    if (node.type === 'session') node.summary = s;
                    return node;
                });
            }
            const model = await this.model(n.path);
            // VS Code keeps the session row it drew before the open: redraw it (name, entry count).
            if (n.type === 'session' && !this.drawnOpen.has(model)) {
                this.drawnOpen.add(model);
                setTimeout(() => this.refresh(n), 0);
            }
            const client = await this.daemon.get();
            const fetch = (start: TreeStart) => client.tree({ path: n.path, depth: TREE_PAGE_DEPTH, limit: TREE_PAGE_LIMIT, ...start });
            const items = await loadChildren(model, n.type === 'session' ? undefined : n.item, fetch);
            return items.map((item) => this.rowNode(n.path, item));
        } catch (err) {
            if (!n) {
                this.showFailure(`sessiond: ${errorText(err)}`);
            } else {
                void vscode.window.showErrorMessage(`sessiond: ${errorText(err)}`);
            }
            return [];
        }
    }

    /** The notification saying why the sessions cannot be listed, while it holds. */
    private failure: { text: string; close: () => void } | undefined;

    /**
     * Says why the view is empty (the daemon cannot start: a wrong `sessiond.path`) in a
     * notification that stays until the sessions are listed again, then goes by itself (the
     * view's welcome text offers the settings and the log meanwhile).
     */
    private showFailure(text: string): void {
        if (this.failure?.text === text) return;
        this.failure?.close();
        let close = () => undefined as void;
        const done = new Promise<void>((resolve) => (close = resolve));
        this.failure = { text, close };
        void vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: text, cancellable: true }, (_progress, cancelled) => {
            cancelled.onCancellationRequested(() => close());
            return done;
        });
    }

    /** The sessions are listed: the failure notification, if any, goes. */
    private clearFailure(): void {
        this.failure?.close();
        this.failure = undefined;
    }

    getTreeItem(n: Node): vscode.TreeItem {
        if (n.type === 'agent') {
            const item = new vscode.TreeItem(AGENT_TITLES[n.group.agent], vscode.TreeItemCollapsibleState.Expanded);
            item.id = n.key;
            item.description = `${n.group.count} session${n.group.count === 1 ? '' : 's'}`;
            item.contextValue = `agent.${n.group.agent}`;
            item.iconPath = new vscode.ThemeIcon(n.group.agent === 'claude-code' ? 'sparkle' : 'terminal');
            item.accessibilityInformation = { label: `${AGENT_TITLES[n.group.agent]}, ${item.description}` };
            return item;
        }
        if (n.type === 'project') {
            const label = projectLabel(n.group.cwd);
            const item = new vscode.TreeItem(label, vscode.TreeItemCollapsibleState.Expanded);
            item.id = n.key;
            item.description = n.group.cwd ?? '';
            item.tooltip = `${n.group.cwd ?? 'no working directory recorded'}: ${n.group.sessions.length} ${AGENT_TITLES[n.group.agent]} session${n.group.sessions.length === 1 ? '' : 's'}`;
            item.contextValue = 'project';
            item.iconPath = new vscode.ThemeIcon('folder');
            item.accessibilityInformation = { label: `project ${label}, ${n.group.sessions.length} session${n.group.sessions.length === 1 ? '' : 's'}` };
            return item;
        }
        if (n.type === 'session') {
            const model = this.models.get(n.path);
            const name = sessionLabel(n.path, n.summary, model?.name);
            const item = new vscode.TreeItem(name, this.expanded.has(n.key) ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed);
            item.id = n.key;
            item.description = sessionDescription(n.path, n.summary, {
                entryCount: model && !model.stale ? model.entryCount : undefined,
                state: this.stopped.get(n.path) ?? (this.following.has(n.path) ? 'following' : ''),
            });
            item.tooltip = sessionTooltip(n.path, n.summary);
            item.contextValue = `session${this.following.has(n.path) ? '.following' : ''}${model?.appendable ? '.appendable' : ''}`;
            item.iconPath = new vscode.ThemeIcon('comment-discussion');
            item.resourceUri = vscode.Uri.file(n.path);
            // Without it VS Code reads the tooltip (the full path) as the row's accessible name.
            item.accessibilityInformation = { label: [name, item.description].filter(Boolean).join(', ') };
            return item;
        }
        const model = this.models.get(n.path);
        if (!model) return new vscode.TreeItem('…');
        const text = model.text(n.item);
        const state = model.expandable(n.item) ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None;
        const item = new vscode.TreeItem(text.label, state === vscode.TreeItemCollapsibleState.Collapsed && this.expanded.has(n.key) ? vscode.TreeItemCollapsibleState.Expanded : state);
        item.id = n.key;
        item.description = text.description;
        // VS Code resolves (resolveTreeItem) only a tooltip left undefined: a summary's is its audit.
        // Left undefined on entries, so VS Code asks resolveTreeItem: the explanation (a summary: its audit).
        item.tooltip = n.item.kind === 'entry' || n.item.kind === 'branch' ? undefined : text.tooltip;
        item.accessibilityInformation = { label: [text.label, text.description].filter(Boolean).join(', ') };
        if (n.item.kind === 'more') {
            item.contextValue = 'more';
            item.iconPath = new vscode.ThemeIcon('loading~spin');
            return item;
        }
        if (n.item.kind === 'fold') {
            item.contextValue = 'fold';
            item.iconPath = new vscode.ThemeIcon('fold');
            return item;
        }
        const marks = model.marks(n.item.id);
        // Menus read it: label and compact only where the daemon appends (pi's version-3 files;
        // never a Claude Code transcript, whose only write is a fork); the audit on summaries.
        item.contextValue = `${n.item.kind}${model.appendable ? '.appendable' : ''}${model.isSummary(n.item.id) ? '.summary' : ''}`;
        item.iconPath = new vscode.ThemeIcon(
            n.item.kind === 'branch' ? 'git-branch' : marks.activeLeaf ? 'debug-stackframe' : marks.leaf ? 'circle-filled' : marks.onActivePath ? 'circle-small-filled' : 'circle-small',
        );
        item.command = { command: 'sessiond.showContext', title: 'Show Context', arguments: [n] };
        return item;
    }

    /**
     * A summary's tooltip, filled when the pointer rests on its row: the audit of
     * `session/explain` (where it came from, what it kept), each lost fact linking to the entry
     * it came from.
     */
    async resolveTreeItem(item: vscode.TreeItem, n: Node): Promise<vscode.TreeItem> {
        if (n.type !== 'row' || (n.item.kind !== 'entry' && n.item.kind !== 'branch')) return item;
        const model = this.models.get(n.path);
        if (!model) return item;
        const plain = model.text(n.item).tooltip;
        const summary = model.isSummary(n.item.id);
        try {
            const client = await this.daemon.get();
            const leafId = model.activeLeafId ?? undefined;
            const e = await client.explain(summary || !leafId ? { path: n.path, entryId: n.item.id } : { path: n.path, entryId: n.item.id, leafId });
            const audit = auditOf(e);
            // Every entry's hover says whether it reaches the model at the active leaf and why,
            // whole, with a link to the entry that decides it; a summary's says what it kept.
            const tip = new vscode.MarkdownString(audit ? auditTooltip(audit, (p) => (p.entryId ? revealLink(n.path, p.entryId) : undefined)) : explainMarkdown(e, (id) => revealLink(n.path, id)));
            if (plain) tip.appendMarkdown(`\n\n---\n\n`).appendText(plain);
            tip.isTrusted = { enabledCommands: ['sessiond.revealEntry'] };
            item.tooltip = tip;
        } catch {
            // No audit to show (the daemon restarting, the entry gone): the row's plain tooltip.
            item.tooltip = plain;
        }
        return item;
    }

    getParent(n: Node): Node | undefined {
        if (n.type === 'agent') return undefined;
        if (n.type === 'project') return this.nodes.get(agentKey(n.group.agent)) ?? this.agentNode({ agent: n.group.agent, projects: [], count: 0 });
        if (n.type === 'session') {
            // The project it is listed under; made here if the view has not listed it yet.
            const agent = agentOf(n.summary);
            const cwd = n.summary.cwd ?? null;
            return this.nodes.get(projectKey(agent, cwd)) ?? this.projectNode({ agent, cwd, sessions: [] });
        }
        const model = this.models.get(n.path);
        const parent = model?.parentOf(n.item);
        return parent ? this.rowNode(n.path, parent) : this.sessionNode(n.path);
    }
}

/** The context preview: `sessiond-context:/NAME@LEAF.md?PATH#LEAF`, rendered from `contextAt`. */
class ContextProvider implements vscode.TextDocumentContentProvider {
    private readonly changed = new vscode.EventEmitter<vscode.Uri>();
    readonly onDidChange = this.changed.event;
    private readonly open = new Set<string>();

    constructor(
        private readonly daemon: Daemon,
        private readonly sessions: SessionsProvider,
    ) {}

    static uri(sessionPath: string, leafId: EntryId | null, following: boolean): vscode.Uri {
        const label = following ? 'live' : leafId ? shortId(leafId) : 'empty';
        return vscode.Uri.from({
            scheme: CONTEXT_SCHEME,
            path: `/${path.basename(sessionPath, '.jsonl')}@${label}.md`,
            query: sessionPath,
            fragment: following ? '' : leafId ?? '',
        });
    }

    async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
        this.open.add(uri.toString());
        const sessionPath = uri.query;
        try {
            const model = await this.sessions.model(sessionPath);
            const leafId = uri.fragment || model.defaultLeafId;
            const client = await this.daemon.get();
            const ctx = await client.contextAt(leafId ? { path: sessionPath, leafId } : { path: sessionPath });
            return renderContext(ctx, { path: sessionPath, name: model.name, leafId });
        } catch (err) {
            return `# Context unavailable\n\n${errorText(err)}\n`;
        }
    }

    /** Re-renders the open previews of a session (live ones, or all). */
    refresh(sessionPath: string, liveOnly: boolean): void {
        for (const key of this.open) {
            const uri = vscode.Uri.parse(key);
            if (uri.query === sessionPath && (!liveOnly || uri.fragment === '')) this.changed.fire(uri);
        }
    }
}

/**
 * What a comparison shows, rendered when it ran: the report (`sessiond-compare:/NAME A↔B.md`)
 * and the two contexts as the diff editor's sides (`sessiond-compare:/NAME@A (compared with
 * B).md`, `renderComparedContexts`).
 */
class CompareProvider implements vscode.TextDocumentContentProvider {
    private readonly reports = new Map<string, string>();

    /** Keeps a report and gives the URI that shows it. */
    add(sessionPath: string, leafA: EntryId, leafB: EntryId, text: string): vscode.Uri {
        return this.keep(`/${path.basename(sessionPath, '.jsonl')} ${shortId(leafA)}↔${shortId(leafB)}.md`, sessionPath, `${leafA}:${leafB}`, text);
    }

    /** Keeps the context at `leaf` as compared with the one at `other`, and gives its URI. */
    addSide(sessionPath: string, leaf: EntryId, other: EntryId, text: string): vscode.Uri {
        return this.keep(`/${path.basename(sessionPath, '.jsonl')}@${shortId(leaf)} (compared with ${shortId(other)}).md`, sessionPath, `${leaf}:${other}:context`, text);
    }

    private keep(uriPath: string, sessionPath: string, fragment: string, text: string): vscode.Uri {
        const uri = vscode.Uri.from({ scheme: COMPARE_SCHEME, path: uriPath, query: sessionPath, fragment });
        this.reports.set(uri.toString(), text);
        return uri;
    }

    provideTextDocumentContent(uri: vscode.Uri): string {
        return this.reports.get(uri.toString()) ?? '# Comparison unavailable\n\nRun "Compare with Active Leaf" again.\n';
    }
}

/**
 * Rewind plans (`sessiond-rewind:/NAME to ENTRY.diff`), as "Rewind Files to Here…" shows them
 * before it asks: read only (an untitled document would ask to be saved when closed), each
 * rewind's its own.
 */
class RewindProvider implements vscode.TextDocumentContentProvider {
    private readonly plans = new Map<string, string>();
    private made = 0;

    /** Keeps a plan and gives the URI that shows it. */
    add(sessionPath: string, entryId: EntryId, text: string): vscode.Uri {
        this.made += 1;
        const uri = vscode.Uri.from({
            scheme: REWIND_SCHEME,
            path: `/${path.basename(sessionPath, '.jsonl')} to ${shortId(entryId)}.diff`,
            query: sessionPath,
            fragment: `${entryId}:${this.made}`,
        });
        this.plans.set(uri.toString(), text);
        return uri;
    }

    provideTextDocumentContent(uri: vscode.Uri): string {
        return this.plans.get(uri.toString()) ?? '# Rewind plan unavailable: run "Rewind Files to Here…" again\n';
    }
}

/** Explanations (`sessiond-explain:/NAME ENTRY@LEAF.md`), whole, as the explain command got them. */
class ExplainProvider implements vscode.TextDocumentContentProvider {
    private readonly texts = new Map<string, string>();

    add(sessionPath: string, explained: ExplainResult, model: SessionModel): vscode.Uri {
        const e = explained as unknown as { entryId: string; leafId?: string | null; inContext?: boolean; contextEntry?: boolean; reason?: { kind?: string } | string };
        const uri = vscode.Uri.from({
            scheme: EXPLAIN_SCHEME,
            path: `/${path.basename(sessionPath, '.jsonl')} ${shortId(e.entryId)}@${shortId(e.leafId ?? 'none')}.md`,
            query: sessionPath,
        });
        const decider = explainDecider(explained);
        const preview = (id: EntryId) => {
            const n = model.node(id);
            return n ? ` (${n.role ?? n.type}: ${n.preview})` : '';
        };
        const lines = [
            `# ${shortId(e.entryId)} at leaf ${shortId(e.leafId ?? '(none)')}: ${e.inContext ? 'in the context' : 'not in the context'}`,
            '',
            renderExplain(explained),
            '',
            `* entry: ${e.entryId}${preview(e.entryId)}`,
            `* leaf: ${e.leafId ?? '(none)'}`,
            `* reaches the model: ${e.inContext ? 'yes' : 'no'}${e.contextEntry !== undefined ? `; a context entry: ${e.contextEntry ? 'yes' : 'no'}` : ''}`,
            `* why: ${typeof e.reason === 'string' ? e.reason : e.reason?.kind ?? ''}`,
            decider ? `* decided by: ${decider}${preview(decider)} — "Show ${shortId(decider)}" selects it in the Sessions view` : '',
            '',
        ];
        this.texts.set(uri.toString(), lines.filter((l, i) => l !== '' || lines[i - 1] !== '').join('\n'));
        return uri;
    }

    provideTextDocumentContent(uri: vscode.Uri): string {
        return this.texts.get(uri.toString()) ?? '# Explanation unavailable\n\nRun "Explain" again.\n';
    }
}

/** Sessions under every root the daemon reads (`session/list` answers for one root at a time). */
async function listSessions(client: SessiondClient): Promise<SessionSummary[]> {
    const roots = client.roots;
    if (roots.length === 0) return (await client.list()).sessions;
    const lists = await Promise.all(roots.map((r) => client.list(r).then((l) => l.sessions, () => [] as SessionSummary[])));
    return lists.flat();
}

/**
 * Where a context preview opens: the column already showing one, else beside the active editor,
 * else the first column (Beside with no editor open leaves an empty first column).
 */
function previewColumn(): vscode.ViewColumn {
    const shown = vscode.window.visibleTextEditors.find((e) => e.document.uri.scheme === CONTEXT_SCHEME);
    if (shown?.viewColumn !== undefined) return shown.viewColumn;
    return vscode.window.activeTextEditor ? vscode.ViewColumn.Beside : vscode.ViewColumn.Active;
}

/**
 * An error for a notification: the daemon's message with every session path cut to its file
 * name (full paths push the actionable part out of the toast), and the JSON-RPC code. A path
 * outside the roots says how to add one here: the `sessiond.roots` setting, where the daemon's
 * message names its command line.
 */
export function errorText(err: unknown): string {
    const text = err instanceof Error ? err.message : String(err);
    let short = text.replace(/(?:\/[^\s/:'"`()]+)+\/([^\s/:'"`()]+\.jsonl)/g, '$1');
    if (err instanceof ResponseError && err.code === -33002) {
        short = `${short.replace(/ \(add its directory:[^)]*\)$/, '')} (add its directory to the sessiond.roots setting)`;
    }
    return err instanceof ResponseError ? `${short} (code ${err.code})` : short;
}

export function activate(context: vscode.ExtensionContext): void {
    const log = vscode.window.createOutputChannel('sessiond');
    const daemon = new Daemon(log);
    const sessions = new SessionsProvider(daemon);
    const previews = new ContextProvider(daemon, sessions);
    const comparisons = new CompareProvider();
    const explanations = new ExplainProvider();
    const rewinds = new RewindProvider();
    const view = vscode.window.createTreeView('sessiond.sessions', { treeDataProvider: sessions, showCollapseAll: true });
    context.subscriptions.push(
        log,
        daemon,
        view,
        vscode.workspace.registerTextDocumentContentProvider(CONTEXT_SCHEME, previews),
        vscode.workspace.registerTextDocumentContentProvider(COMPARE_SCHEME, comparisons),
        vscode.workspace.registerTextDocumentContentProvider(EXPLAIN_SCHEME, explanations),
        vscode.workspace.registerTextDocumentContentProvider(REWIND_SCHEME, rewinds),
    );
    const graphs = new GraphPanels(
        vscode.Uri.joinPath(context.extensionUri, 'media'),
        {
            load: async (p) => ({ model: await sessions.model(p), client: await daemon.get() }),
            reveal: async (p, id) => void (await revealEntry(p, id, false)),
            showContext: async (p, id, column) => {
                const doc = await vscode.workspace.openTextDocument(ContextProvider.uri(p, id, false));
                await vscode.window.showTextDocument(doc, { preview: true, preserveFocus: true, viewColumn: column });
            },
            setLeaf: async (p, id) => {
                const model = await sessions.model(p);
                model.setActiveLeaf(id);
                sessions.refresh(sessions.sessionNode(p));
                graphs.refresh(p);
                await revealEntry(p, id, false);
            },
        },
        log,
    );
    context.subscriptions.push(graphs);
    context.subscriptions.push(
        view.onDidExpandElement((e) => sessions.expanded.add(e.element.key)),
        view.onDidCollapseElement((e) => sessions.expanded.delete(e.element.key)),
    );

    daemon.onStart((client) => {
        client.onDidChange(async (change) => {
            const model = sessions.models.get(change.path);
            if (!model) return;
            const summary = model.applyDidChange(change);
            for (const id of summary.needEntry) {
                try {
                    model.applyEntry((await client.entry(change.path, id)).entry);
                } catch (err) {
                    log.appendLine(`session/entry ${id}: ${errorText(err)}`);
                }
            }
            sessions.refresh(sessions.sessionNode(change.path));
            previews.refresh(change.path, true);
            graphs.refresh(change.path);
            if (sessions.following.has(change.path) && change.leafId) {
                await revealLeaf(change.path, change.leafId);
            }
        });
        client.onDidReload(async (p) => {
            const model = sessions.models.get(p.path);
            if (!model) return;
            log.appendLine(`${p.path}: reloaded (${p.reason})`);
            sessions.stopped.delete(p.path);
            model.applyDidReload(p);
            sessions.refresh(sessions.sessionNode(p.path));
            previews.refresh(p.path, false);
            graphs.refresh(p.path);
        });
        client.onDidCorrupt((p) => {
            // The daemon reads nothing after a corrupt line until the file is reloaded: the row
            // says so rather than "following".
            const why = `stopped at corrupt line ${p.line}`;
            sessions.stopped.set(p.path, why);
            log.appendLine(`${p.path}: line ${p.line} (byte ${p.offset}) is corrupt: ${p.message || p.kind}; later lines are not read until the file is repaired or replaced`);
            sessions.refresh(sessions.sessionNode(p.path));
            void vscode.window.showWarningMessage(
                `sessiond: ${path.basename(p.path)}: ${why} (${p.kind}); later lines are not read until the file is repaired or replaced. The view keeps the entries before it.`,
            );
        });
        client.onFileMissing((p) => {
            log.appendLine(`${p.path}: file missing since ${p.since}`);
            void vscode.window.showWarningMessage(`sessiond: ${p.path} is gone (deleted or moved); showing its last known state until it is back`);
        });
        client.onFileRestored((p) => {
            log.appendLine(`${p.path}: file is back`);
        });
        client.onDidChangeList((p) => {
            sessions.applyListChange(p.changed, p.removed);
        });
        client.onDidChangeLiveMode((p) => {
            log.appendLine(`${p.path}: followed by ${p.liveMode}`);
            if (p.liveMode !== 'events') {
                void vscode.window.showInformationMessage(`sessiond: ${p.path} is no longer followed live (${p.liveMode}); updates may be late`);
            }
        });
    });

    /**
     * Selects an entry's row in the Sessions view (the whole tree loaded first, so that the row's
     * branches and folds are known) and shows the context there: where a graph node, a lost
     * fact of an audit or a link in a tooltip jumps to.
     */
    async function showEntry(p: string, id: EntryId, focus: boolean): Promise<void> {
        const node = await revealEntry(p, id, focus);
        await vscode.commands.executeCommand('sessiond.showContext', node);
    }

    /** Selects an entry's row in the Sessions view (the whole tree loaded first); the active leaf stays. */
    async function revealEntry(p: string, id: EntryId, focus: boolean): Promise<Node> {
        const model = await sessions.model(p);
        const client = await daemon.get();
        await loadAll(model, (start) => client.tree({ path: model.path, depth: TREE_PAGE_DEPTH, limit: TREE_PAGE_LIMIT, ...start }));
        const node = sessions.rowNode(model.path, { kind: 'entry', id });
        await view.reveal(node, { select: true, focus, expand: false }).then(undefined, (err) => log.appendLine(`reveal ${id}: ${errorText(err)}`));
        return node;
    }

    /** Shows the leaf's row, expanding its branches, so a followed session shows its new end. */
    async function revealLeaf(p: string, leafId: EntryId): Promise<void> {
        if (!sessions.models.get(p)?.node(leafId)) return;
        await view.reveal(sessions.rowNode(p, { kind: 'entry', id: leafId }), { select: false, focus: false, expand: false }).then(undefined, (err) => {
            log.appendLine(`reveal ${leafId}: ${errorText(err)}`);
        });
    }

    /** The session path and entry a command was invoked on (from the view, or the selection). */
    function target(n?: Node): { path: string; entryId: EntryId | undefined } | undefined {
        const node = n ?? view.selection[0];
        if (!node || node.type === 'agent' || node.type === 'project') {
            void vscode.window.showInformationMessage('sessiond: select a session or an entry in the Sessions view first');
            return undefined;
        }
        return { path: node.path, entryId: node.type === 'row' && (node.item.kind === 'entry' || node.item.kind === 'branch') ? node.item.id : undefined };
    }

    /** The entry a command acts on; undefined (and the user told so) where none is selected. */
    function entryTarget(n: Node | undefined, what: string): { path: string; entryId: EntryId } | undefined {
        const t = target(n);
        if (!t?.entryId) {
            void vscode.window.showInformationMessage(`sessiond: ${what} needs an entry`);
            return undefined;
        }
        return { path: t.path, entryId: t.entryId };
    }

    /** The session a command acts on and its leaf: the entry chosen in the view, else the session's active leaf. */
    async function leafTarget(n: Node | undefined): Promise<{ path: string; model: SessionModel; leafId: EntryId | undefined } | undefined> {
        const t = target(n);
        if (!t) return undefined;
        const model = await sessions.model(t.path);
        return { path: t.path, model, leafId: t.entryId ?? model.activeLeafId ?? undefined };
    }

    /**
     * Whether a write that appends is refused for the session (said to the user): a Claude Code
     * transcript takes none (its only write is a fork), an older pi file none until forked.
     */
    function refused(model: SessionModel, what: string): boolean {
        if (model.appendable) return false;
        const why =
            model.format === 'claude-code'
                ? `a Claude Code transcript takes no ${what.replace(/^an? /, '')}: sessiond reads it and never writes to it; "Fork Session Here…" makes a new session to continue`
                : `${path.basename(model.path)} is a version-${model.version ?? '?'} session file and sessiond writes ${what} to version-3 files only: fork it to a version-3 file first ("Fork Session Here…")`;
        void vscode.window.showInformationMessage(`sessiond: ${why}`);
        return true;
    }

    const command = (name: string, f: (n?: Node) => Promise<void>) =>
        context.subscriptions.push(
            vscode.commands.registerCommand(name, async (n?: Node) => {
                try {
                    await f(n);
                } catch (err) {
                    void vscode.window.showErrorMessage(`sessiond: ${errorText(err)}`);
                }
            }),
        );

    command('sessiond.refresh', async () => sessions.relist());
    command('sessiond.showGraph', async (n) => {
        const t = target(n);
        if (!t) return;
        await graphs.show(t.path);
    });
    command('sessiond.showLog', async () => log.show(true));

    /** After a new daemon: every model re-opens on next use, the view and every preview re-read. */
    function reopenAll(): void {
        for (const m of sessions.models.values()) m.reset();
        sessions.relist();
        for (const p of sessions.models.keys()) {
            previews.refresh(p, false);
            graphs.refresh(p);
        }
    }

    // A crash restarts the daemon at once, but not in a loop: a second crash within a minute
    // waits for "Restart Daemon".
    let lastCrash = 0;
    daemon.onCrash((e) => {
        const how = e.signal ? `signal ${e.signal}` : `exit code ${e.code}`;
        const again = Date.now() - lastCrash > 60_000;
        lastCrash = Date.now();
        if (again) {
            void daemon.get().then(reopenAll, () => undefined);
        }
        const text = again
            ? `sessiond: the daemon stopped unexpectedly (${how}); it was started again and the sessions re-opened`
            : `sessiond: the daemon stopped unexpectedly again (${how}); see the sessiond output, then run "sessiond: Restart Daemon"`;
        void vscode.window.showWarningMessage(text, 'Show Log', 'Restart Daemon').then((a) => {
            if (a === 'Show Log') log.show(true);
            if (a === 'Restart Daemon') void vscode.commands.executeCommand('sessiond.restart');
        });
    });

    command('sessiond.restart', async () => {
        await daemon.restart();
        await daemon.get();
        reopenAll();
        void vscode.window.showInformationMessage('sessiond: the daemon was restarted and the sessions re-opened');
    });

    command('sessiond.open', async (n) => {
        let p = n && (n.type === 'session' || n.type === 'row') ? n.path : undefined;
        if (!p) {
            const listed = await listSessions(await daemon.get());
            const browse = { label: '$(folder-opened) Open a session file…', path: '' };
            const picked = await vscode.window.showQuickPick(
                [browse, ...listed.map((s) => ({ label: sessionLabel(s.path, s), description: [AGENT_TITLES[s.format], s.cwd ?? ''].filter(Boolean).join(' · '), detail: `${s.path}${s.modified ? ` · ${s.modified}` : ''}`, path: s.path }))],
                { placeHolder: 'Session to open' },
            );
            if (!picked) return;
            p = picked.path;
            if (!p) {
                const files = await vscode.window.showOpenDialog({ canSelectMany: false, filters: { 'pi sessions and Claude Code transcripts': ['jsonl'] } });
                if (!files?.[0]) return;
                p = files[0].fsPath;
            }
        }
        const model = await sessions.model(p);
        const node = sessions.addSession(model.path);
        await view.reveal(node, { select: true, focus: true, expand: true }).then(undefined, () => undefined);
    });

    command('sessiond.search', async () => {
        const client = await daemon.get();
        const pick = vscode.window.createQuickPick<vscode.QuickPickItem & { hit?: SearchHit }>();
        pick.title = 'Search Sessions';
        pick.placeholder = 'Words (all must match), "a phrase", prefix*, -excluded, a OR b';
        pick.matchOnDescription = false;
        pick.matchOnDetail = false;
        let timer: NodeJS.Timeout | undefined;
        let asked = 0;
        const ask = async (query: string) => {
            const mine = ++asked;
            if (!query.trim()) {
                pick.items = [];
                return;
            }
            pick.busy = true;
            try {
                const r = await client.search({ query, limit: 50 });
                if (mine !== asked) return;
                pick.items = r.hits.length ? r.hits.map(searchItem) : [{ label: 'No session entry matches', alwaysShow: true }];
            } catch (err) {
                if (mine === asked) pick.items = [{ label: `$(error) ${errorText(err)}`, alwaysShow: true }];
            } finally {
                if (mine === asked) pick.busy = false;
            }
        };
        pick.onDidChangeValue((value) => {
            if (timer) clearTimeout(timer);
            timer = setTimeout(() => void ask(value), SEARCH_DEBOUNCE_MS);
        });
        const chosen = new Promise<SearchHit | undefined>((resolve) => {
            pick.onDidAccept(() => {
                resolve(pick.selectedItems[0]?.hit);
                pick.hide();
            });
            pick.onDidHide(() => {
                if (timer) clearTimeout(timer);
                resolve(undefined);
                pick.dispose();
            });
        });
        pick.show();
        const hit = await chosen;
        if (!hit) return;
        // The session in the Sessions view at the hit's entry, and the context there.
        const model = await sessions.model(hit.path);
        sessions.addSession(model.path);
        await loadAll(model, (start) => client.tree({ path: model.path, depth: TREE_PAGE_DEPTH, limit: TREE_PAGE_LIMIT, ...start }));
        const row = sessions.rowNode(model.path, { kind: 'entry', id: hit.entryId });
        await view.reveal(row, { select: true, focus: true, expand: true }).then(undefined, (err) => log.appendLine(`reveal ${hit.entryId}: ${errorText(err)}`));
        await vscode.commands.executeCommand('sessiond.showContext', row);
    });

    command('sessiond.showContext', async (n) => {
        const t = target(n);
        if (!t) return;
        const model = await sessions.model(t.path);
        if (t.entryId) model.setActiveLeaf(t.entryId);
        sessions.refresh(sessions.sessionNode(t.path));
        graphs.refresh(t.path);
        const following = sessions.following.has(t.path) && !t.entryId;
        const doc = await vscode.workspace.openTextDocument(ContextProvider.uri(t.path, model.activeLeafId, following));
        await vscode.window.showTextDocument(doc, { preview: true, preserveFocus: true, viewColumn: previewColumn() });
    });

    command('sessiond.explain', async (n) => {
        const t = entryTarget(n, 'explain');
        if (!t) return;
        const model = await sessions.model(t.path);
        const client = await daemon.get();
        const leafId = model.activeLeafId ?? undefined;
        const e = await client.explain(leafId ? { path: t.path, entryId: t.entryId, leafId } : { path: t.path, entryId: t.entryId });
        // Whole, where it can be read: a document beside the view (never a cut toast), with the
        // entry that decides it one action away.
        const uri = explanations.add(t.path, e, model);
        const doc = await vscode.workspace.openTextDocument(uri);
        await vscode.window.showTextDocument(doc, { preview: true, preserveFocus: true, viewColumn: previewColumn() });
        const decider = explainDecider(e);
        if (decider) {
            const show = `Show ${shortId(decider)}`;
            const choice = await vscode.window.showInformationMessage(`sessiond: ${shortId(t.entryId)} is ${e.inContext ? '' : 'not '}in the context at ${shortId(String(e.leafId ?? ''))}; ${shortId(decider)} decides it`, show);
            if (choice === show) await revealEntry(t.path, decider, true);
        }
    });

    context.subscriptions.push(
        vscode.commands.registerCommand('sessiond.revealEntry', async (p?: string, id?: EntryId) => {
            if (typeof p !== 'string' || typeof id !== 'string') return;
            try {
                await showEntry(p, id, true);
            } catch (err) {
                void vscode.window.showErrorMessage(`sessiond: ${errorText(err)}`);
            }
        }),
    );

    command('sessiond.compare', async (n) => {
        const t = entryTarget(n, 'compare');
        if (!t) return;
        const model = await sessions.model(t.path);
        const current = model.activeLeafId;
        if (!current) {
            void vscode.window.showInformationMessage('sessiond: the session has no active leaf to compare with');
            return;
        }
        const client = await daemon.get();
        const [c, contextA, contextB] = await Promise.all([
            client.compareBranches({ path: t.path, leafA: current, leafB: t.entryId }),
            client.contextAt({ path: t.path, leafId: current }),
            client.contextAt({ path: t.path, leafId: t.entryId }),
        ]);
        // VS Code's own diff editor on the two contexts, as the context preview renders them
        // (messages only one side holds listed one line each past a size the diff editor
        // compares quickly: renderComparedContexts).
        const sides = renderComparedContexts(contextA, { path: t.path, name: model.name, leafId: current }, contextB, { path: t.path, name: model.name, leafId: t.entryId });
        await vscode.commands.executeCommand(
            'vscode.diff',
            comparisons.addSide(t.path, current, t.entryId, sides.a),
            comparisons.addSide(t.path, t.entryId, current, sides.b),
            `Context ${shortId(current)} ↔ ${shortId(t.entryId)}`,
            { preview: false, viewColumn: previewColumn() },
        );
        const report = comparisons.add(t.path, current, t.entryId, renderComparison(c, { path: t.path, name: model.name }));
        const choice = await vscode.window.showInformationMessage(`sessiond: ${comparisonSummary(c)}`, 'Open Report');
        if (choice === 'Open Report') {
            const doc = await vscode.workspace.openTextDocument(report);
            await vscode.window.showTextDocument(doc, { preview: true, preserveFocus: false, viewColumn: vscode.ViewColumn.Beside });
        }
    });

    command('sessiond.showAudit', async (n) => {
        const t = entryTarget(n, 'the summary audit');
        if (!t) return;
        const client = await daemon.get();
        const e = await client.explain({ path: t.path, entryId: t.entryId });
        const audit = auditOf(e);
        if (!audit) {
            void vscode.window.showInformationMessage(`sessiond: no audit for ${shortId(t.entryId)}: ${renderExplain(e)}`);
            return;
        }
        const picked = await vscode.window.showQuickPick(auditItems(audit.audit), {
            title: `Summary audit of ${shortId(t.entryId)}: ${auditHeadline(audit.audit)}`,
            placeHolder: `${auditSourceText(audit) || 'a summary'}; a fact to jump to the entry it came from`,
            matchOnDescription: true,
        });
        if (!picked?.probe.entryId) return;
        await showEntry(t.path, picked.probe.entryId, true);
    });

    command('sessiond.verify', async (n) => {
        const t = await leafTarget(n);
        if (!t) return;
        const client = await daemon.get();
        const leafId = t.leafId;
        const report = await client.verifyResume(leafId ? { path: t.path, leafId } : { path: t.path });
        const picked = await vscode.window.showQuickPick(verifyItems(report), {
            title: `Verify Before Resuming: ${verifySummary(report)}`,
            placeHolder: 'A finding to open (its file, or its entry in the Sessions view)',
            matchOnDescription: true,
            matchOnDetail: true,
        });
        if (!picked) return;
        const f = picked.finding;
        const actions = [f.path ? 'Open File' : undefined, f.entryId ? 'Show Entry' : undefined].filter((a): a is string => !!a);
        const action = actions.length > 1 ? await vscode.window.showInformationMessage(f.message, ...actions) : actions[0];
        if (action === 'Open File' && f.path) {
            if (fs.existsSync(f.path) && fs.statSync(f.path).isFile()) {
                await vscode.window.showTextDocument(vscode.Uri.file(f.path), { preview: true });
            } else {
                void vscode.window.showWarningMessage(`sessiond: ${f.path} is not a file now`);
            }
        } else if (action === 'Show Entry' && f.entryId) {
            await view.reveal(sessions.rowNode(t.path, { kind: 'entry', id: f.entryId }), { select: true, focus: true, expand: false }).then(undefined, (err) => {
                log.appendLine(`reveal ${f.entryId}: ${errorText(err)}`);
            });
        }
    });

    command('sessiond.fork', async (n) => {
        const t = entryTarget(n, 'fork');
        if (!t) return;
        const position = await vscode.window.showQuickPick(
            [
                { label: 'At this entry', description: 'the new session ends with it', value: 'at' as const },
                { label: 'Before this entry', description: 'the new session ends at its parent (to ask again)', value: 'before' as const },
            ],
            { placeHolder: `Fork ${t.entryId}` },
        );
        if (!position) return;
        const client = await daemon.get();
        const forked = await client.fork({ path: t.path, entryId: t.entryId, position: position.value });
        // Listed at once with what the daemon reads of it (its format, its project), not only
        // when the list change arrives.
        sessions.addSession(forked.path);
        sessions.relist();
        const choice = await vscode.window.showInformationMessage(`sessiond: forked into ${forked.path}`, 'Show Context');
        if (choice) await vscode.commands.executeCommand('sessiond.showContext', sessions.sessionNode(forked.path));
    });

    command('sessiond.label', async (n) => {
        const t = entryTarget(n, 'label');
        if (!t) return;
        const model = await sessions.model(t.path);
        if (refused(model, 'a label')) return;
        const text = await vscode.window.showInputBox({
            prompt: `Label for ${t.entryId} (empty removes it)`,
            value: model.marks(t.entryId).label ?? '',
        });
        if (text === undefined) return;
        const client = await daemon.get();
        await client.label({ path: t.path, targetId: t.entryId, label: text.trim() === '' ? null : text.trim(), expectedLeafId: model.defaultLeafId });
    });

    command('sessiond.compact', async (n) => {
        const t = await leafTarget(n);
        if (!t) return;
        if (refused(t.model, 'a compaction')) return;
        const client = await daemon.get();
        const leafId = t.leafId;
        const base = { path: t.path, expectedLeafId: t.model.defaultLeafId, ...(leafId ? { leafId } : {}) };
        const dry = await client.compact({ ...base, dryRun: true });
        if (isNothingToCompact(dry)) {
            void vscode.window.showInformationMessage(`sessiond: ${renderCompact(dry, true)}`);
            return;
        }
        const lost = retentionOf(dry).lost.length;
        const go = await vscode.window.showWarningMessage(
            renderCompact(dry, true),
            { modal: true, detail: lost ? `${lost} retention probe(s) would be lost.` : 'Nothing the probes look for would be lost.' },
            'Compact',
        );
        if (go !== 'Compact') return;
        const done = await client.compact({ ...base, dryRun: false });
        void vscode.window.showInformationMessage(`sessiond: ${renderCompact(done, false)}`);
    });

    command('sessiond.rewind', async (n) => {
        const t = entryTarget(n, 'rewind');
        if (!t) return;
        const model = await sessions.model(t.path);
        if (model.format !== 'pi' && model.format !== 'claude-code') {
            void vscode.window.showInformationMessage('sessiond: only pi sessions and Claude Code transcripts are rewound');
            return;
        }
        const client = await daemon.get();
        const base = { path: t.path, to: t.entryId };
        // The dry run's diff is shown before anything is asked.
        const dry = await client.rewind({ ...base, dryRun: true });
        const doc = await vscode.workspace.openTextDocument(rewinds.add(t.path, t.entryId, renderRewind(dry)));
        await vscode.window.showTextDocument(doc, { preview: true, viewColumn: previewColumn() });
        const changes = rewindChanges(dry);
        let force = false;
        if (dry.refusal?.kind === 'drift') {
            const go = await vscode.window.showWarningMessage(
                `sessiond: ${rewindRefusalText(dry.refusal)}`,
                { modal: true, detail: 'The diff shows what would change; forcing overwrites the changes made since the session (a backup is kept).' },
                'Rewind Files (Force)',
            );
            if (go !== 'Rewind Files (Force)') return;
            force = true;
        } else if (dry.refusal) {
            void vscode.window.showWarningMessage(`sessiond: ${rewindRefusalText(dry.refusal)}`);
            return;
        } else if (changes === 0) {
            void vscode.window.showInformationMessage(`sessiond: rewind to ${dry.entryId}: nothing to change`);
            return;
        } else {
            const go = await vscode.window.showWarningMessage(
                `sessiond: rewind ${changes} file${changes === 1 ? '' : 's'} to ${dry.entryId}?`,
                { modal: true, detail: 'The diff shows what changes. Each file is backed up first; `sessiond rewind --undo DIR` puts them back.' },
                'Rewind Files',
            );
            if (go !== 'Rewind Files') return;
        }
        const done = await client.rewind({ ...base, force });
        if (done.refusal) {
            void vscode.window.showWarningMessage(`sessiond: ${rewindRefusalText(done.refusal)}`);
            return;
        }
        void vscode.window.showInformationMessage(
            `sessiond: rewound ${rewindChanges(done)} file(s) to ${done.entryId}; backup ${done.backupDir} (\`sessiond rewind --undo ${done.backupDir}\` puts them back)`,
        );
    });

    command('sessiond.follow', async (n) => {
        const t = target(n);
        if (!t) return;
        const model = await sessions.model(t.path);
        if (sessions.following.has(t.path)) {
            sessions.following.delete(t.path);
            sessions.refresh(sessions.sessionNode(t.path));
            void vscode.window.showInformationMessage(`sessiond: stopped following ${path.basename(t.path)}`);
            return;
        }
        sessions.following.add(t.path);
        model.setActiveLeaf(undefined);
        sessions.refresh(sessions.sessionNode(t.path));
        const doc = await vscode.workspace.openTextDocument(ContextProvider.uri(t.path, model.activeLeafId, true));
        await vscode.window.showTextDocument(doc, { preview: false, preserveFocus: true, viewColumn: previewColumn() });
        if (model.defaultLeafId) await revealLeaf(t.path, model.defaultLeafId);
    });

    context.subscriptions.push(
        vscode.workspace.onDidChangeConfiguration(async (e) => {
            if (!e.affectsConfiguration('sessiond')) return;
            // A new daemon from the new settings, without reloading the window. The view is
            // redrawn whether it starts or not: its sessions, or the welcome text and a message
            // naming the setting (from getChildren), so a wrong sessiond.path is said once and a
            // fixed one recovers.
            log.appendLine('the sessiond settings changed: starting the daemon again');
            await daemon.restart();
            reopenAll();
            const started = await daemon.get().then(
                () => true,
                () => false,
            );
            if (started) void vscode.window.showInformationMessage('sessiond: the settings changed; the daemon was restarted and the sessions re-opened');
        }),
    );
}

export function deactivate(): void {
    // The daemon is stopped through the extension's subscriptions.
}
