//! A typed client for `sessiond serve`: spawns the daemon, speaks JSON-RPC 2.0 with LSP
//! framing through vscode-jsonrpc, runs the LSP lifecycle and exposes one method per request
//! and one event per server notification. No `vscode` import, so Node alone can test it.

import { ChildProcess, spawn } from 'node:child_process';
import {
    createMessageConnection,
    Disposable,
    Emitter,
    Event,
    MessageConnection,
    ResponseError,
    StreamMessageReader,
    StreamMessageWriter,
} from 'vscode-jsonrpc/node';
import {
    CompactParams,
    CompactResult,
    RewindParams,
    RewindResult,
    CompareBranchesParams,
    CompareBranchesResult,
    ContextAtParams,
    ContextAtResult,
    DidChangeListParams,
    DidChangeLiveModeParams,
    DidChangeParams,
    DidCorruptParams,
    DidReloadParams,
    EntryId,
    EntryResult,
    ExplainParams,
    VerifyResumeParams,
    VerifyResumeResult,
    ExplainResult,
    FileMissingParams,
    FileRestoredParams,
    ForkParams,
    InitializeParams,
    InitializeResult,
    ForkResult,
    GraphParams,
    GraphResult,
    LabelParams,
    ListResult,
    Methods,
    SearchParams,
    SearchResult,
    OpenResult,
    TreeParams,
    TreeResult,
    WriteResult,
} from './protocol';

export { ResponseError };

/** How to start the daemon. */
export interface StartOptions {
    /** The `sessiond` executable (a path, or a name looked up on PATH). */
    binary: string;
    /** Session roots: passed as `--root` arguments and as `initializationOptions.roots`. */
    roots: string[];
    /** Extra arguments after `serve`. */
    extraArgs?: string[];
    env?: NodeJS.ProcessEnv;
    cwd?: string;
    /** Receives the daemon's stderr (its logs), decoded as UTF-8. */
    onStderr?: (text: string) => void;
    /** How long `initialize` may take before the start fails, in milliseconds (default 10 000). */
    initializeTimeoutMs?: number;
}

export type { InitializeResult };

/** The daemon's exit: code or signal, and the last lines it wrote to stderr. */
export interface ExitInfo {
    code: number | null;
    signal: NodeJS.Signals | null;
    stderrTail: string;
}

/** Keeps the last few kilobytes of the daemon's stderr for error messages. */
const STDERR_TAIL_BYTES = 4096;

/**
 * One running daemon. Create with {@link SessiondClient.start}; end with {@link SessiondClient.stop}.
 * Requests reject with vscode-jsonrpc's `ResponseError` (`code`, `message`, `data`) when the
 * daemon answers with an error, and with a plain `Error` when the daemon is gone.
 */
export class SessiondClient implements Disposable {
    private readonly didChangeEmitter = new Emitter<DidChangeParams>();
    private readonly didReloadEmitter = new Emitter<DidReloadParams>();
    private readonly didCorruptEmitter = new Emitter<DidCorruptParams>();
    private readonly fileMissingEmitter = new Emitter<FileMissingParams>();
    private readonly fileRestoredEmitter = new Emitter<FileRestoredParams>();
    private readonly didChangeLiveModeEmitter = new Emitter<DidChangeLiveModeParams>();
    private readonly didChangeListEmitter = new Emitter<DidChangeListParams>();
    private readonly exitEmitter = new Emitter<ExitInfo>();
    private stderrTail = '';
    private exitInfo: ExitInfo | undefined;
    private readonly exited: Promise<ExitInfo>;
    private stopping = false;

    /** New entries were appended to an open session. */
    readonly onDidChange: Event<DidChangeParams> = this.didChangeEmitter.event;
    /** An open session was read again from the start (truncated, replaced, rewritten). */
    readonly onDidReload: Event<DidReloadParams> = this.didReloadEmitter.event;
    /** New bytes of an open session are corrupt; the session keeps its last good state. */
    readonly onDidCorrupt: Event<DidCorruptParams> = this.didCorruptEmitter.event;
    /** An open session's file is gone (deleted, moved away); the session keeps its last good state. */
    readonly onFileMissing: Event<FileMissingParams> = this.fileMissingEmitter.event;
    /** An open session's file is back after {@link onFileMissing}. */
    readonly onFileRestored: Event<FileRestoredParams> = this.fileRestoredEmitter.event;
    /** How the daemon follows an open session changed (`events`, `polling`, `requests`). */
    readonly onDidChangeLiveMode: Event<DidChangeLiveModeParams> = this.didChangeLiveModeEmitter.event;
    /** Sessions under the listed roots appeared, changed or went away (after the first `session/list`). */
    readonly onDidChangeList: Event<DidChangeListParams> = this.didChangeListEmitter.event;
    /** The daemon process ended (also after {@link stop}). */
    readonly onExit: Event<ExitInfo> = this.exitEmitter.event;

    /** Set once `initialize` has been answered. */
    initializeResult: InitializeResult | undefined;

    /**
     * The session roots the daemon reads under (`capabilities.experimental.sessiond.roots`),
     * each once: the daemon lists a directory given both as `--root` and in
     * `initializationOptions.roots` once.
     */
    get roots(): string[] {
        return this.initializeResult?.capabilities.experimental.sessiond.roots ?? [];
    }

    private constructor(
        private readonly process: ChildProcess,
        private readonly connection: MessageConnection,
        onStderr: ((text: string) => void) | undefined,
    ) {
        process.stderr?.setEncoding('utf8');
        process.stderr?.on('data', (text: string) => {
            this.stderrTail = (this.stderrTail + text).slice(-STDERR_TAIL_BYTES);
            onStderr?.(text);
        });
        this.exited = new Promise((resolve) => {
            // 'close' comes after stderr has been read to its end, so the tail is complete.
            process.on('close', (code, signal) => {
                this.exitInfo = { code, signal, stderrTail: this.stderrTail };
                // Pending requests would otherwise wait forever on a dead pipe.
                this.connection.dispose();
                this.exitEmitter.fire(this.exitInfo);
                resolve(this.exitInfo);
            });
        });
        connection.onNotification(Methods.didChange, (p: DidChangeParams) => this.didChangeEmitter.fire(p));
        connection.onNotification(Methods.didReload, (p: DidReloadParams) => this.didReloadEmitter.fire(p));
        connection.onNotification(Methods.didCorrupt, (p: DidCorruptParams) => this.didCorruptEmitter.fire(p));
        connection.onNotification(Methods.fileMissing, (p: FileMissingParams) => this.fileMissingEmitter.fire(p));
        connection.onNotification(Methods.fileRestored, (p: FileRestoredParams) => this.fileRestoredEmitter.fire(p));
        connection.onNotification(Methods.didChangeLiveMode, (p: DidChangeLiveModeParams) => this.didChangeLiveModeEmitter.fire(p));
        connection.onNotification(Methods.didChangeList, (p: DidChangeListParams) => this.didChangeListEmitter.fire(p));
        // A broken pipe after the daemon died is reported through onExit, not as a crash.
        connection.onError(() => undefined);
        process.stdin?.on('error', () => undefined);
    }

    /**
     * Spawns `BINARY serve --root R...` and runs `initialize` + `initialized`. Rejects when the
     * binary cannot be started, exits early, or does not answer `initialize` in time; the error
     * message carries the daemon's stderr.
     */
    static async start(options: StartOptions): Promise<SessiondClient> {
        const args = ['serve', ...options.roots.flatMap((r) => ['--root', r]), ...(options.extraArgs ?? [])];
        const child = spawn(options.binary, args, {
            cwd: options.cwd,
            env: options.env ?? process.env,
            stdio: ['pipe', 'pipe', 'pipe'],
        });
        await new Promise<void>((resolve, reject) => {
            child.once('spawn', () => resolve());
            child.once('error', (err) => reject(new Error(`cannot start ${options.binary}: ${err.message}`)));
        });
        if (!child.stdout || !child.stdin) {
            throw new Error(`cannot start ${options.binary}: no stdio pipes`);
        }
        const connection = createMessageConnection(
            new StreamMessageReader(child.stdout),
            new StreamMessageWriter(child.stdin),
        );
        const client = new SessiondClient(child, connection, options.onStderr);
        connection.listen();
        try {
            await client.initialize(options.roots, options.initializeTimeoutMs ?? 10_000);
        } catch (err) {
            child.kill();
            await client.exited;
            throw err;
        }
        return client;
    }

    private async initialize(roots: string[], timeoutMs: number): Promise<void> {
        const params: InitializeParams = {
            processId: process.pid,
            clientInfo: { name: 'sessiond-vscode' },
            rootUri: null,
            capabilities: {},
            initializationOptions: { roots },
        };
        const request = this.connection.sendRequest<InitializeResult>('initialize', params);
        let timer: NodeJS.Timeout | undefined;
        const failure = new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`sessiond did not answer initialize within ${timeoutMs} ms${this.stderrNote()}`)), timeoutMs);
            void this.exited.then((e) => reject(new Error(`sessiond exited during initialize (${describeExit(e)})${this.stderrNote()}`)));
        });
        try {
            this.initializeResult = await Promise.race([request, failure]);
        } catch (err) {
            // A dead daemon rejects the request before 'close' reports how it ended: wait briefly.
            await Promise.race([this.exited, new Promise((r) => setTimeout(r, 1000))]);
            if (this.exitInfo) throw new Error(`sessiond exited during initialize (${describeExit(this.exitInfo)})${this.stderrNote()}`);
            throw err;
        } finally {
            clearTimeout(timer);
        }
        await this.connection.sendNotification('initialized', {});
    }

    private stderrNote(): string {
        const tail = this.stderrTail.trim();
        return tail ? `: ${tail}` : '';
    }

    /** Whether the daemon process is still running. */
    get running(): boolean {
        return this.exitInfo === undefined;
    }

    /** Sends a request; rejects with a clear error when the daemon has exited. */
    async request<R>(method: string, params?: object): Promise<R> {
        if (this.exitInfo) {
            throw new Error(`sessiond is not running (${describeExit(this.exitInfo)})${this.stderrNote()}`);
        }
        return params === undefined
            ? this.connection.sendRequest<R>(method)
            : this.connection.sendRequest<R>(method, params);
    }

    /** `session/open`: reads the session and starts following it. */
    open(path: string, allowCorrupt?: boolean): Promise<OpenResult> {
        return this.request(Methods.open, allowCorrupt === undefined ? { path } : { path, allowCorrupt });
    }

    /** `session/close`: stops following the session. */
    close(path: string): Promise<unknown> {
        return this.request(Methods.close, { path });
    }

    /** `session/tree`: a page of the tree (the roots, or the subtree below `fromId`). */
    tree(params: TreeParams): Promise<TreeResult> {
        return this.request(Methods.tree, params);
    }

    /** `session/entry`: one entry, parsed and as written in the file. */
    entry(path: string, id: EntryId): Promise<EntryResult> {
        return this.request(Methods.entry, { path, id });
    }

    /** `session/contextAt`: what the model sees at a leaf (pi's buildSessionContext). */
    contextAt(params: ContextAtParams): Promise<ContextAtResult> {
        return this.request(Methods.contextAt, params);
    }

    /** `session/verifyResume`: the leaf checked against the world now (files, git, programs, credentials). */
    verifyResume(params: VerifyResumeParams): Promise<VerifyResumeResult> {
        return this.request(Methods.verifyResume, params);
    }

    /** `session/explain`: whether an entry reaches the model at a leaf, and if not why. */
    explain(params: ExplainParams): Promise<ExplainResult> {
        return this.request(Methods.explain, params);
    }

    /** `session/compareBranches`: where two leaves' branches part, what each did, and how their contexts differ. */
    compareBranches(params: CompareBranchesParams): Promise<CompareBranchesResult> {
        return this.request(Methods.compareBranches, params);
    }

    /** `session/graph`: one page of the branch graph as the daemon draws it (folds, ranges, context). */
    graph(params: GraphParams): Promise<GraphResult> {
        return this.request(Methods.graph, params);
    }

    /** `session/search`: full-text hits across the sessions under the roots. */
    search(params: SearchParams): Promise<SearchResult> {
        return this.request(Methods.search, params);
    }

    /** `session/list`: session files under one root (default: the first root). */
    list(root?: string): Promise<ListResult> {
        return this.request(Methods.list, root === undefined ? {} : { root });
    }

    /** `session/fork`: a new session file holding the path to an entry. */
    fork(params: ForkParams): Promise<ForkResult> {
        return this.request(Methods.fork, params);
    }

    /** `session/label`: appends a label entry (fenced by `expectedLeafId`). */
    label(params: LabelParams): Promise<WriteResult> {
        return this.request(Methods.label, params);
    }

    /** `session/compact`: a compaction with its retention report, or only the report (`dryRun`). */
    compact(params: CompactParams): Promise<CompactResult> {
        return this.request(Methods.compact, params);
    }

    /** `session/rewind`: the files put back to an entry, or (`dryRun`) the plan alone. */
    rewind(params: RewindParams): Promise<RewindResult> {
        return this.request(Methods.rewind, params);
    }

    /**
     * `shutdown` then `exit`, and waits for the process to end. Kills it when it has not ended
     * within `timeoutMs`. Safe to call twice and after the daemon died.
     */
    async stop(timeoutMs = 5_000): Promise<ExitInfo> {
        if (!this.stopping && !this.exitInfo) {
            this.stopping = true;
            try {
                await Promise.race([this.connection.sendRequest('shutdown'), this.exited]);
                if (!this.exitInfo) {
                    await this.connection.sendNotification('exit');
                }
            } catch {
                // The daemon died mid-shutdown: the kill below and `exited` settle it.
            }
            const timer = setTimeout(() => this.process.kill('SIGKILL'), timeoutMs);
            await this.exited;
            clearTimeout(timer);
        }
        return this.exited;
    }

    dispose(): void {
        void this.stop();
    }
}

/** `code 3` or `signal SIGKILL`. */
export function describeExit(e: ExitInfo): string {
    return e.signal ? `signal ${e.signal}` : `code ${e.code}`;
}
