//! A stand-in for the `vscode` module, just large enough to activate extension.ts under Node
//! and drive it: it records what the extension registers (tree view, content provider,
//! commands) and what it shows (messages, documents), and answers prompts from a script.

import Module = require('node:module');
import { Emitter } from 'vscode-jsonrpc/node';

/** What the extension did, for tests to inspect. */
export interface Recorded {
    treeDataProvider: any;
    contentProviders: Map<string, any>;
    commands: Map<string, (...args: any[]) => any>;
    messages: Array<{ level: 'info' | 'warning' | 'error'; text: string }>;
    documents: Array<{ uri: Uri; text: string }>;
    /** Answers for showQuickPick / showInputBox / modal warnings, taken in order; a function
     * answers a quick pick by choosing among its items. */
    answers: unknown[];
    /** Every quick pick shown: its items and options. */
    quickPicks: Array<{ items: any[]; options: any }>;
    /** Every element the Sessions view was asked to reveal. */
    revealed: unknown[];
    /** Every quick pick made with createQuickPick, to type into and accept. */
    quickPickWidgets: StubQuickPick[];
    /** Every `vscode.diff` asked for: the two sides as their providers render them, and the title. */
    diffs: Array<{ left: { uri: Uri; text: string }; right: { uri: Uri; text: string }; title: string }>;
}

/** `createQuickPick`'s widget: a test types with {@link StubQuickPick.type} and chooses with
 * {@link StubQuickPick.accept}. */
export class StubQuickPick {
    title = '';
    placeholder = '';
    value = '';
    busy = false;
    items: any[] = [];
    selectedItems: any[] = [];
    matchOnDescription = true;
    matchOnDetail = true;
    shown = false;
    private readonly changed = new Emitter<string>();
    private readonly accepted = new Emitter<void>();
    private readonly hidden = new Emitter<void>();
    onDidChangeValue = this.changed.event;
    onDidAccept = this.accepted.event;
    onDidHide = this.hidden.event;
    show(): void {
        this.shown = true;
    }
    hide(): void {
        if (!this.shown) return;
        this.shown = false;
        this.hidden.fire();
    }
    dispose(): void {
        this.shown = false;
    }
    /** The user typed: the value changes as VS Code reports it. */
    type(value: string): void {
        this.value = value;
        this.changed.fire(value);
    }
    /** The user chose `item` and pressed Enter. */
    accept(item: any): void {
        this.selectedItems = [item];
        this.accepted.fire();
    }
}

class Uri {
    constructor(
        readonly scheme: string,
        readonly path: string,
        readonly query: string,
        readonly fragment: string,
    ) {}
    static from(c: { scheme: string; path?: string; query?: string; fragment?: string }): Uri {
        return new Uri(c.scheme, c.path ?? '', c.query ?? '', c.fragment ?? '');
    }
    static file(p: string): Uri {
        return new Uri('file', p, '', '');
    }
    static joinPath(base: Uri, ...parts: string[]): Uri {
        return new Uri(base.scheme, [base.path, ...parts].join('/'), '', '');
    }
    static parse(s: string): Uri {
        const m = /^([^:]+):([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/.exec(s);
        if (!m) throw new Error(`bad uri ${s}`);
        return new Uri(m[1], decodeURIComponent(m[2]), decodeURIComponent(m[3] ?? ''), decodeURIComponent(m[4] ?? ''));
    }
    get fsPath(): string {
        return this.path;
    }
    toString(): string {
        return `${this.scheme}:${encodeURIComponent(this.path)}?${encodeURIComponent(this.query)}#${encodeURIComponent(this.fragment)}`;
    }
}

class TreeItem {
    id?: string;
    description?: string;
    tooltip?: string;
    contextValue?: string;
    iconPath?: unknown;
    command?: unknown;
    resourceUri?: Uri;
    constructor(
        readonly label: string,
        readonly collapsibleState: number,
    ) {}
}

class MarkdownString {
    isTrusted: unknown;
    constructor(public value = '') {}
    appendMarkdown(text: string): MarkdownString {
        this.value += text;
        return this;
    }
    appendText(text: string): MarkdownString {
        this.value += text.replace(/[\\`*_{}[\]()#+\-.!]/g, '\\$&');
        return this;
    }
}

class ThemeIcon {
    constructor(readonly id: string) {}
}

/** Installs the stand-in as `vscode` for every later `require('vscode')`. */
export function installVscodeStub(settings: Record<string, unknown>): Recorded {
    const recorded: Recorded = {
        treeDataProvider: undefined,
        contentProviders: new Map(),
        commands: new Map(),
        messages: [],
        documents: [],
        answers: [],
        quickPicks: [],
        revealed: [],
        quickPickWidgets: [],
        diffs: [],
    };
    const render = async (uri: Uri) => ({ uri, text: String(await recorded.contentProviders.get(uri.scheme).provideTextDocumentContent(uri)) });
    const disposable = { dispose: () => undefined };
    const answer = async () => recorded.answers.shift();
    const message = (level: 'info' | 'warning' | 'error') => async (text: string, ...rest: unknown[]) => {
        recorded.messages.push({ level, text });
        return rest.some((r) => typeof r === 'string') ? answer() : undefined;
    };
    const vscode = {
        Uri,
        TreeItem,
        ThemeIcon,
        MarkdownString,
        EventEmitter: Emitter,
        TreeItemCollapsibleState: { None: 0, Collapsed: 1, Expanded: 2 },
        ViewColumn: { Active: -1, Beside: -2, One: 1 },
        ProgressLocation: { Notification: 15 },
        window: {
            visibleTextEditors: [],
            activeTextEditor: undefined,
            createOutputChannel: () => ({ append: () => undefined, appendLine: () => undefined, dispose: () => undefined }),
            createTreeView: (_id: string, options: { treeDataProvider: unknown }) => {
                recorded.treeDataProvider = options.treeDataProvider;
                return {
                    selection: [],
                    reveal: async (element: unknown) => {
                        recorded.revealed.push(element);
                    },
                    onDidExpandElement: () => disposable,
                    onDidCollapseElement: () => disposable,
                    dispose: () => undefined,
                };
            },
            showInformationMessage: message('info'),
            showWarningMessage: message('warning'),
            showErrorMessage: message('error'),
            // A notification with progress: recorded as an error message, open until its task ends.
            withProgress: async (options: { title?: string }, task: (p: unknown, token: unknown) => Promise<unknown>) => {
                recorded.messages.push({ level: 'error', text: options.title ?? '' });
                return task({ report: () => undefined }, { isCancellationRequested: false, onCancellationRequested: () => disposable });
            },
            showQuickPick: async (items: any[] | Promise<any[]>, options: any) => {
                const list = await items;
                recorded.quickPicks.push({ items: list, options });
                const a = recorded.answers.shift();
                return typeof a === 'function' ? a(list) : a;
            },
            createQuickPick: () => {
                const pick = new StubQuickPick();
                recorded.quickPickWidgets.push(pick);
                return pick;
            },
            showInputBox: answer,
            showOpenDialog: answer,
            showTextDocument: async () => undefined,
        },
        workspace: {
            getConfiguration: () => ({ get: (key: string) => settings[key] }),
            onDidChangeConfiguration: () => disposable,
            registerTextDocumentContentProvider: (scheme: string, provider: unknown) => {
                recorded.contentProviders.set(scheme, provider);
                return disposable;
            },
            openTextDocument: async (uri: Uri) => {
                const provider = recorded.contentProviders.get(uri.scheme);
                const text: string = await provider.provideTextDocumentContent(uri);
                recorded.documents.push({ uri, text });
                return { uri, getText: () => text };
            },
        },
        commands: {
            registerCommand: (name: string, f: (...args: any[]) => any) => {
                recorded.commands.set(name, f);
                return disposable;
            },
            executeCommand: async (name: string, ...args: unknown[]) => {
                if (name === 'vscode.diff') {
                    const [left, right, title] = args as [Uri, Uri, string];
                    recorded.diffs.push({ left: await render(left), right: await render(right), title });
                    return undefined;
                }
                return recorded.commands.get(name)?.(...args);
            },
        },
    };
    const load = (Module as any)._load;
    (Module as any)._load = function (request: string, ...rest: unknown[]) {
        return request === 'vscode' ? vscode : load.call(this, request, ...rest);
    };
    return recorded;
}
