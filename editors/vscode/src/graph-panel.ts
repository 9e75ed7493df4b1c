//! The branch graph as a webview panel per session: the layout from graph.ts, drawn by
//! media/graph-view.js; redrawn when the session changes or another leaf is selected; a node
//! chosen in the picture (click, Enter) is selected in the Sessions view.

import * as path from 'node:path';
import * as vscode from 'vscode';
import { SessiondClient } from './client';
import { Graph, GraphAudit, layoutGraph } from './graph';
import { loadAll, SessionModel } from './model';
import { EntryId } from './protocol';
import { auditHeadline, auditOf, auditProbes, auditSourceText, contextEntryIds, PROBE_KINDS } from './render';

/** How the panels reach the session: its model with the whole tree loaded, and the daemon. */
export interface GraphSource {
    load(sessionPath: string): Promise<{ model: SessionModel; client: SessiondClient }>;
    /** Selects an entry in the Sessions view and shows its context (the graph redraws at it). */
    select(sessionPath: string, id: EntryId): Promise<void>;
}

/** Nodes in one `session/tree` page for the graph. */
const GRAPH_PAGE_LIMIT = 10_000;

export class GraphPanels implements vscode.Disposable {
    private readonly panels = new Map<string, vscode.WebviewPanel>();
    private readonly firstKept = new Map<string, Record<EntryId, EntryId | null>>();
    /** Each session's compact boundaries' `logicalParentUuid` (`null`: none). */
    private readonly logical = new Map<string, Record<EntryId, EntryId | null>>();
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

    /** Opens (or shows) the graph of a session. */
    async show(sessionPath: string): Promise<void> {
        const known = this.panels.get(sessionPath);
        if (known) {
            known.reveal(undefined, true);
            await this.update(sessionPath);
            return;
        }
        const panel = vscode.window.createWebviewPanel('sessiond.graph', `Graph: ${path.basename(sessionPath, '.jsonl')}`, { viewColumn: vscode.ViewColumn.Beside, preserveFocus: false }, {
            enableScripts: true,
            localResourceRoots: [this.media],
            retainContextWhenHidden: true,
        });
        this.panels.set(sessionPath, panel);
        panel.onDidDispose(() => this.panels.delete(sessionPath));
        panel.webview.onDidReceiveMessage(async (msg: { type: string; id?: string }) => {
            if (msg.type === 'ready') await this.update(sessionPath);
            if (msg.type === 'select' && msg.id) {
                await this.source.select(sessionPath, msg.id).catch((err: unknown) => this.log.appendLine(`graph select ${msg.id}: ${String(err)}`));
            }
        });
        panel.webview.html = this.html(panel.webview);
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
            const nodes = model.allNodes();
            const kept = this.firstKept.get(sessionPath) ?? {};
            for (const n of nodes) {
                if (n.type !== 'compaction' || n.id in kept) continue;
                const e = (await client.entry(model.path, n.id)).entry as { firstKeptEntryId?: string };
                kept[n.id] = e.firstKeptEntryId ?? null;
            }
            this.firstKept.set(sessionPath, kept);
            const logical = this.logical.get(sessionPath) ?? {};
            if (model.format === 'claude-code') {
                for (const n of nodes) {
                    if (n.parentId !== null || n.id in logical || !model.isSummary(n.id)) continue;
                    const e = (await client.entry(model.path, n.id)).entry as { logicalParentUuid?: unknown };
                    logical[n.id] = typeof e.logicalParentUuid === 'string' ? e.logicalParentUuid : null;
                }
            }
            this.logical.set(sessionPath, logical);
            const audits = this.audits.get(sessionPath) ?? new Map<EntryId, GraphAudit | null>();
            for (const n of nodes) {
                if (!model.isSummary(n.id) || audits.has(n.id)) continue;
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
            const leaf = model.activeLeafId;
            const ctx = leaf ? await client.contextAt({ path: model.path, leafId: leaf }) : undefined;
            const graph = layoutGraph({
                nodes,
                defaultLeafId: model.defaultLeafId,
                selectedLeafId: leaf,
                inContext: contextEntryIds(ctx),
                firstKept: kept,
                logicalParents: Object.fromEntries(Object.entries(logical).filter((e): e is [EntryId, EntryId] => e[1] !== null)),
                name: model.name,
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
  #graph { flex: 1; width: 100%; height: 100%; cursor: grab; }
  #audit { width: 340px; overflow: auto; padding: 6px 10px; border-left: 1px solid var(--vscode-panel-border); font-size: 12px; }
  #audit[hidden] { display: none; }
  #audit h2 { font-size: 13px; margin: 4px 0; }
  #audit p { margin: 4px 0; color: var(--vscode-descriptionForeground); }
  #audit ul { list-style: none; padding: 0; margin: 4px 0; }
  #audit li { margin: 2px 0; }
  #audit button { width: 100%; text-align: left; color: var(--vscode-foreground); background: none; border: 1px solid transparent; padding: 2px 4px; cursor: pointer; font: inherit; overflow-wrap: anywhere; }
  #audit button:hover, #audit button:focus-visible { border-color: var(--vscode-focusBorder); outline: none; }
  #audit .lost { color: var(--vscode-errorForeground); }
  #audit .kept { color: var(--vscode-charts-green); }
  .edge { fill: none; stroke: var(--vscode-editorLineNumber-foreground); stroke-width: 1.5; }
  .edge.on-path { stroke: var(--vscode-charts-blue); stroke-width: 3; }
  .edge.logical { stroke: var(--vscode-charts-orange); stroke-dasharray: 6 4; }
  .node rect { fill: var(--vscode-editorWidget-background); stroke: var(--vscode-editorWidget-border, var(--vscode-panel-border)); stroke-width: 1; }
  .node.fold rect { fill: var(--vscode-editor-background); stroke-dasharray: 4 3; }
  .node.in-context rect { fill: var(--vscode-editor-selectionHighlightBackground, var(--vscode-editorWidget-background)); stroke: var(--vscode-charts-blue); stroke-width: 2; }
  .node.type-compaction rect { stroke: var(--vscode-charts-orange); stroke-width: 2.5; }
  .node.type-branch_summary rect { stroke: var(--vscode-charts-purple); stroke-width: 2.5; }
  .node.summary rect { stroke: var(--vscode-charts-orange); stroke-width: 2.5; }
  .node.branch-point rect { stroke: var(--vscode-charts-yellow); }
  .node.leaf rect { stroke: var(--vscode-charts-green); }
  .node.selected-leaf rect { stroke: var(--vscode-focusBorder); stroke-width: 3.5; }
  .node:focus { outline: none; }
  .node:focus rect { stroke: var(--vscode-focusBorder); stroke-width: 3; }
  .node text { fill: var(--vscode-foreground); font-size: 11px; pointer-events: none; }
  .node .title { font-weight: 600; }
  .node .preview { fill: var(--vscode-descriptionForeground); }
  .node .label { fill: var(--vscode-charts-yellow); font-weight: 600; }
  .node { cursor: pointer; }
</style>
</head>
<body>
<header role="toolbar" aria-label="Graph">
  <button id="zoom-in" aria-label="Zoom in">+</button>
  <button id="zoom-out" aria-label="Zoom out">−</button>
  <button id="fit" aria-label="Fit to window">Fit</button>
  <span id="status" role="status" aria-live="polite"></span>
</header>
<div id="main">
<svg id="graph" role="tree" aria-label="Session branch graph" xmlns="http://www.w3.org/2000/svg"></svg>
<aside id="audit" aria-label="Summary audit" hidden></aside>
</div>
<script src="${script}"></script>
</body>
</html>`;
    }

    dispose(): void {
        for (const t of this.pending.values()) clearTimeout(t);
        for (const p of this.panels.values()) p.dispose();
    }
}
