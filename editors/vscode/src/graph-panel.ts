//! The branch graph as a webview panel per session (one panel per session, shown again when
//! asked again): the daemon's graph (`session/graph`) laid out by graph.ts and drawn by
//! media/graph-view.js; redrawn when the session changes or another leaf is made active. A
//! click selects a node and says everything about it beside the picture; it never moves the
//! active leaf: "Make Active Leaf" does, and "Show Context Here" previews the context at the
//! node in another column, beside the graph. A click on a fold opens it one level. A Claude Code
//! tool call that started a subagent's own transcript opens that transcript's graph; a
//! subagent's graph opens the graph of the transcript that started it.

import * as path from 'node:path';
import * as vscode from 'vscode';
import { SessiondClient } from './client';
import { Graph, GraphAudit, layoutGraph, linkedPaths, loadDaemonGraph } from './graph';
import { loadAll, SessionModel } from './model';
import { EntryId } from './protocol';
import { auditHeadline, auditOf, auditProbes, auditSourceText, PROBE_KINDS } from './render';

/** How the panels reach the session: its model with the whole tree loaded, the daemon, the views. */
export interface GraphSource {
    load(sessionPath: string): Promise<{ model: SessionModel; client: SessiondClient }>;
    /** Selects an entry's row in the Sessions view; the active leaf stays. */
    reveal(sessionPath: string, id: EntryId): Promise<void>;
    /** Shows the context at an entry in `column`; the active leaf stays. */
    showContext(sessionPath: string, id: EntryId, column: vscode.ViewColumn): Promise<void>;
    /** Makes an entry the session's active leaf (the views and the graph redraw at it). */
    setLeaf(sessionPath: string, id: EntryId): Promise<void>;
}

/** Nodes in one `session/tree` page and rows in one `session/graph` page for the graph. */
const GRAPH_PAGE_LIMIT = 10_000;

/** A message from the webview. */
interface ViewMessage {
    type: 'ready' | 'toggle' | 'reveal' | 'context' | 'leaf' | 'graph';
    id?: string;
    key?: string;
    /** `graph`: the transcript whose graph to open (a subagent's, or the parent's). */
    path?: string;
}


export class GraphPanels implements vscode.Disposable {
    private readonly panels = new Map<string, vscode.WebviewPanel>();
    /** Each session's folds opened in its picture. */
    private readonly opened = new Map<string, Set<string>>();
    /** Each session's summaries' audits (`null`: the daemon gave none), read once per summary. */
    private readonly audits = new Map<string, Map<EntryId, GraphAudit | null>>();
    private readonly pending = new Map<string, NodeJS.Timeout>();
    /** The last graph posted per session (the tests and the log read it). */
    readonly last = new Map<string, Graph>();

    constructor(
        private readonly media: vscode.Uri,
        private readonly source: GraphSource,
        private readonly log: vscode.OutputChannel,
    ) {}

    /** The column of a session's graph panel, when it is open. */
    column(sessionPath: string): vscode.ViewColumn | undefined {
        return this.panels.get(sessionPath)?.viewColumn;
    }

    /** Opens the graph of a session, or shows the one already open (redrawn). */
    async show(sessionPath: string): Promise<void> {
        const known = this.panels.get(sessionPath);
        if (known) {
            known.reveal(known.viewColumn, false);
            await this.update(sessionPath);
            return;
        }
        // Beside the editors once; a second session's graph joins the column of the first.
        const other = [...this.panels.values()][0]?.viewColumn;
        const panel = vscode.window.createWebviewPanel('sessiond.graph', `Graph: ${path.basename(sessionPath, '.jsonl')}`, { viewColumn: other ?? vscode.ViewColumn.Beside, preserveFocus: false }, {
            enableScripts: true,
            localResourceRoots: [this.media],
            retainContextWhenHidden: true,
        });
        this.panels.set(sessionPath, panel);
        panel.onDidDispose(() => {
            this.panels.delete(sessionPath);
            this.opened.delete(sessionPath);
        });
        panel.webview.onDidReceiveMessage(async (msg: ViewMessage) => {
            try {
                if (msg.type === 'ready') await this.update(sessionPath);
                if (msg.type === 'toggle' && msg.key) {
                    const open = this.opened.get(sessionPath) ?? new Set<string>();
                    if (open.has(msg.key)) {
                        // Closing a fold closes what was opened inside it.
                        for (const k of foldsWithin(msg.key, this.last.get(sessionPath))) open.delete(k);
                    } else {
                        open.add(msg.key);
                    }
                    this.opened.set(sessionPath, open);
                    await this.update(sessionPath);
                }
                if (msg.type === 'reveal' && msg.id) await this.source.reveal(sessionPath, msg.id);
                if (msg.type === 'context' && msg.id) await this.source.showContext(sessionPath, msg.id, this.besideColumn(panel));
                if (msg.type === 'leaf' && msg.id) await this.source.setLeaf(sessionPath, msg.id);
                // Only a transcript this graph links to: the webview names no other file.
                if (msg.type === 'graph' && msg.path && linkedPaths(this.last.get(sessionPath)).has(msg.path)) await this.show(msg.path);
            } catch (err: unknown) {
                this.log.appendLine(`graph ${msg.type} ${msg.id ?? msg.key ?? ''}: ${err instanceof Error ? err.message : String(err)}`);
            }
        });
        panel.webview.html = this.html(panel.webview);
    }

    /** A column beside the graph for previews: one already showing a context, else the next. */
    private besideColumn(panel: vscode.WebviewPanel): vscode.ViewColumn {
        const mine = panel.viewColumn ?? vscode.ViewColumn.One;
        const shown = vscode.window.visibleTextEditors.find((e) => e.document.uri.scheme === 'sessiond-context' && e.viewColumn !== undefined && e.viewColumn !== mine);
        if (shown?.viewColumn !== undefined) return shown.viewColumn;
        return mine + 1;
    }

    /** Redraws a session's graph soon (changes come in bursts while an agent writes). */
    refresh(sessionPath: string): void {
        if (!this.panels.has(sessionPath)) return;
        clearTimeout(this.pending.get(sessionPath));
        this.pending.set(
            sessionPath,
            setTimeout(() => {
                this.pending.delete(sessionPath);
                void this.update(sessionPath);
            }, 150),
        );
    }

    private async update(sessionPath: string): Promise<void> {
        const panel = this.panels.get(sessionPath);
        if (!panel) return;
        try {
            const { model, client } = await this.source.load(sessionPath);
            await loadAll(model, (start) => client.tree({ path: model.path, depth: 1_000_000, limit: GRAPH_PAGE_LIMIT, ...start }));
            const leaf = model.activeLeafId;
            const daemon = await loadDaemonGraph((offset) => client.graph({ path: model.path, ...(leaf ? { leafId: leaf } : {}), offset, limit: GRAPH_PAGE_LIMIT }));
            const audits = this.audits.get(sessionPath) ?? new Map<EntryId, GraphAudit | null>();
            for (const n of daemon.nodes) {
                if (n.kind !== 'entry' || !model.isSummary(n.id) || audits.has(n.id)) continue;
                const a = auditOf(await client.explain({ path: model.path, entryId: n.id }));
                audits.set(
                    n.id,
                    a
                        ? {
                              headline: auditHeadline(a.audit),
                              source: auditSourceText(a),
                              kept: a.audit.kept,
                              lost: a.audit.lost,
                              probes: auditProbes(a.audit).map((p) => ({ kind: PROBE_KINDS[p.kind] ?? p.kind, text: p.text, entryId: p.entryId, status: p.status })),
                          }
                        : null,
                );
            }
            this.audits.set(sessionPath, audits);
            const graph = layoutGraph({
                daemon,
                entries: model.allNodes(),
                open: this.opened.get(sessionPath),
                audits: Object.fromEntries([...audits].filter((e): e is [EntryId, GraphAudit] => e[1] !== null)),
            });
            this.last.set(sessionPath, graph);
            panel.title = `Graph: ${model.name ?? path.basename(sessionPath, '.jsonl')}`;
            await panel.webview.postMessage({ type: 'graph', graph });
        } catch (err) {
            this.log.appendLine(`graph ${sessionPath}: ${err instanceof Error ? err.message : String(err)}`);
        }
    }

    private html(webview: vscode.Webview): string {
        const script = webview.asWebviewUri(vscode.Uri.joinPath(this.media, 'graph-view.js'));
        const csp = `default-src 'none'; style-src ${webview.cspSource} 'unsafe-inline'; script-src ${webview.cspSource};`;
        return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Branch graph</title>
<style>
  html, body { height: 100%; margin: 0; padding: 0; overflow: hidden; }
  body { display: flex; flex-direction: column; color: var(--vscode-foreground); background: var(--vscode-editor-background); font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); }
  header { display: flex; gap: 6px; align-items: center; padding: 4px 8px; border-bottom: 1px solid var(--vscode-panel-border); }
  header button { color: var(--vscode-button-secondaryForeground); background: var(--vscode-button-secondaryBackground); border: none; padding: 2px 8px; cursor: pointer; }
  header button:focus-visible { outline: 1px solid var(--vscode-focusBorder); }
  #status { color: var(--vscode-descriptionForeground); margin-left: 8px; }
  #main { flex: 1; display: flex; min-height: 0; }
  #graph { flex: 1; min-width: 0; height: 100%; cursor: grab; }
  #details { flex: none; width: min(320px, 40%); box-sizing: border-box; overflow: auto; padding: 6px 10px; border-left: 1px solid var(--vscode-panel-border); font-size: 12px; }
  #details[hidden] { display: none; }
  #details h2 { font-size: 13px; margin: 4px 0; overflow-wrap: anywhere; }
  #details p { margin: 4px 0; overflow-wrap: anywhere; }
  #details .muted { color: var(--vscode-descriptionForeground); }
  #details .actions { display: flex; flex-wrap: wrap; gap: 4px; margin: 6px 0; }
  #details .actions button { color: var(--vscode-button-foreground); background: var(--vscode-button-background); border: none; padding: 3px 8px; cursor: pointer; }
  #details .actions button.secondary { color: var(--vscode-button-secondaryForeground); background: var(--vscode-button-secondaryBackground); }
  #details ul { list-style: none; padding: 0; margin: 4px 0; }
  #details li { margin: 2px 0; }
  #details li button { width: 100%; text-align: left; color: var(--vscode-foreground); background: none; border: 1px solid transparent; padding: 2px 4px; cursor: pointer; font: inherit; overflow-wrap: anywhere; }
  #details li button:hover, #details li button:focus-visible { border-color: var(--vscode-focusBorder); outline: none; }
  #details .lost { color: var(--vscode-errorForeground); }
  #details .kept { color: var(--vscode-charts-green); }
  footer { display: flex; flex-wrap: wrap; gap: 4px 14px; padding: 3px 8px; border-top: 1px solid var(--vscode-panel-border); font-size: 11px; color: var(--vscode-descriptionForeground); }
  footer .sw { display: inline-block; width: 14px; height: 9px; margin-right: 4px; vertical-align: middle; border: 2px solid var(--vscode-editorWidget-border, var(--vscode-panel-border)); border-radius: 2px; }
  footer .sw.ctx { border-color: var(--vscode-charts-blue); background: var(--vscode-editor-selectionHighlightBackground); }
  footer .sw.path { border: none; height: 3px; background: var(--vscode-charts-blue); }
  footer .sw.fold { border-style: dashed; border-radius: 6px; }
  footer .sw.comp { border-color: var(--vscode-charts-orange); }
  footer .sw.bsum { border-color: var(--vscode-charts-purple); }
  footer .sw.leaf { border-color: var(--vscode-charts-green); }
  footer .sw.kept { border: none; height: 3px; background: var(--vscode-charts-orange); }
  .edge { fill: none; stroke: var(--vscode-editorLineNumber-foreground); stroke-width: 1.5; }
  .edge.on-path { stroke: var(--vscode-charts-blue); stroke-width: 3; }
  .edge.logical { stroke: var(--vscode-charts-orange); stroke-dasharray: 6 4; }
  .node rect { fill: var(--vscode-editorWidget-background); stroke: var(--vscode-editorWidget-border, var(--vscode-panel-border)); stroke-width: 1; }
  .node.fold rect { fill: var(--vscode-editor-background); stroke-dasharray: 4 3; }
  .node.opened rect { stroke-dasharray: 1 3; opacity: 0.7; }
  .node.in-context rect { fill: var(--vscode-editor-selectionHighlightBackground, var(--vscode-editorWidget-background)); stroke: var(--vscode-charts-blue); stroke-width: 2; }
  .node.type-compaction rect { stroke: var(--vscode-charts-orange); stroke-width: 2.5; }
  .node.type-branch_summary rect { stroke: var(--vscode-charts-purple); stroke-width: 2.5; }
  .node.summary rect { stroke: var(--vscode-charts-orange); stroke-width: 2.5; }
  .node.branch-point rect { stroke: var(--vscode-charts-yellow); }
  .node.leaf rect { stroke: var(--vscode-charts-green); stroke-width: 2; }
  .node.selected-leaf rect { stroke: var(--vscode-focusBorder); stroke-width: 3.5; }
  .node.chosen rect { stroke: var(--vscode-focusBorder); stroke-width: 3; stroke-dasharray: none; }
  .node .kept-bar { fill: var(--vscode-charts-orange); }
  .node:focus { outline: none; }
  .node:focus rect { stroke: var(--vscode-focusBorder); stroke-width: 3; }
  .node text { fill: var(--vscode-foreground); font-size: 11px; pointer-events: none; }
  .node .title { font-weight: 600; }
  .node .preview { fill: var(--vscode-descriptionForeground); }
  .node .marks { fill: var(--vscode-charts-green); font-weight: 600; }
  .node .label { fill: var(--vscode-charts-yellow); font-weight: 600; }
  .node { cursor: pointer; }
  .edge.sidechain { stroke: var(--vscode-charts-purple); stroke-dasharray: 2 4; }
  .node .subagent-link text { fill: var(--vscode-textLink-foreground); text-decoration: underline; pointer-events: auto; cursor: pointer; }
  .node .subagent-link:focus { outline: none; }
  .node .subagent-link:focus text { fill: var(--vscode-textLink-activeForeground); font-weight: 600; }
  #parent[hidden] { display: none; }
</style>
</head>
<body>
<header role="toolbar" aria-label="Graph">
  <button id="zoom-in" aria-label="Zoom in">+</button>
  <button id="zoom-out" aria-label="Zoom out">−</button>
  <button id="fit" aria-label="Fit to window">Fit</button>
  <button id="parent" hidden></button>
  <span id="status" role="status" aria-live="polite"></span>
</header>
<div id="main">
<svg id="graph" role="tree" aria-label="Session branch graph" xmlns="http://www.w3.org/2000/svg"></svg>
<aside id="details" aria-label="Selected node" hidden></aside>
</div>
<footer id="legend" aria-label="Legend">
  <span><span class="sw ctx"></span>reaches the model at the active leaf</span>
  <span><span class="sw path"></span>path to the active leaf</span>
  <span><span class="sw fold"></span>folded run (click: open one level)</span>
  <span><span class="sw comp"></span>compaction</span>
  <span><span class="sw kept"></span>a compaction keeps from here</span>
  <span><span class="sw bsum"></span>branch summary</span>
  <span><span class="sw leaf"></span>leaf (◀ resume leaf, ◉ active leaf)</span>
  <span>↳ subagent: click to open its graph</span>
</footer>
<script src="${script}"></script>
</body>
</html>`;
    }

    dispose(): void {
        for (const t of this.pending.values()) clearTimeout(t);
        for (const p of this.panels.values()) p.dispose();
    }
}

/** The fold `key` and every fold opened inside it (to close them together). */
function foldsWithin(key: string, graph: Graph | undefined): Set<string> {
    const out = new Set([key]);
    for (let grew = true; grew; ) {
        grew = false;
        for (const n of graph?.nodes ?? []) {
            if (n.kind === 'fold' && n.within !== undefined && out.has(n.within) && !out.has(n.key)) {
                out.add(n.key);
                grew = true;
            }
        }
    }
    return out;
}
