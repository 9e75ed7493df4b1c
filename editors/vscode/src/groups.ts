//! The Sessions view's top levels: sessions grouped by the agent that wrote them (pi, Claude
//! Code, Codex), then by project (the working directory they ran in). Pure: no `vscode`, no I/O.

import { SessionSummary } from './protocol';

/** A session file as listed by `session/list`, or only its path (opened by hand, not read yet). */
export type SessionRow = Partial<SessionSummary> & { path: string };

/** The agents in the order the view shows them. */
export type Agent = SessionSummary['format'];
export const AGENTS: readonly Agent[] = ['pi', 'claude-code', 'codex'];

/** How the view names an agent. */
export const AGENT_TITLES: Record<Agent, string> = { pi: 'pi', 'claude-code': 'Claude Code', codex: 'Codex' };

/** A project: the sessions that ran in one working directory (`cwd: null`: none recorded). */
export interface ProjectGroup {
    agent: Agent;
    cwd: string | null;
    sessions: SessionRow[];
}

/** An agent and its projects. */
export interface AgentGroup {
    agent: Agent;
    projects: ProjectGroup[];
    /** How many sessions its projects hold. */
    count: number;
}

/** A row's agent: the format `session/list` or `session/open` said; a row not read yet counts as pi's. */
export function agentOf(row: SessionRow): Agent {
    return row.format ?? 'pi';
}

/** The key of the project group a row belongs to (stable across listings). */
export function projectKey(agent: Agent, cwd: string | null | undefined): string {
    return `p:${agent}:${cwd ?? ''}`;
}

/** The key of an agent group. */
export function agentKey(agent: Agent): string {
    return `a:${agent}`;
}

/** The newest modification time of a row, as a sortable string ('' when unknown). */
function modified(row: SessionRow): string {
    return String(row.modified ?? '');
}

/**
 * Groups rows by agent ({@link AGENTS} order, agents without sessions left out), then by
 * project (the project with the newest session first; the sessions without a cwd last), each
 * project's sessions newest first.
 */
export function groupSessions(rows: SessionRow[]): AgentGroup[] {
    const groups: AgentGroup[] = [];
    for (const agent of AGENTS) {
        const mine = rows.filter((r) => agentOf(r) === agent).sort((a, b) => modified(b).localeCompare(modified(a)));
        if (mine.length === 0) continue;
        const byCwd = new Map<string | null, SessionRow[]>();
        for (const r of mine) {
            const cwd = r.cwd ?? null;
            const list = byCwd.get(cwd) ?? [];
            list.push(r);
            byCwd.set(cwd, list);
        }
        const projects = [...byCwd].map(([cwd, sessions]) => ({ agent, cwd, sessions }));
        projects.sort((a, b) => {
            if ((a.cwd === null) !== (b.cwd === null)) return a.cwd === null ? 1 : -1;
            return modified(b.sessions[0]).localeCompare(modified(a.sessions[0])) || String(a.cwd).localeCompare(String(b.cwd));
        });
        groups.push({ agent, projects, count: mine.length });
    }
    return groups;
}

/** A project row's label: the last part of its directory (the whole directory is its description). */
export function projectLabel(cwd: string | null): string {
    if (cwd === null) return '(no working directory)';
    const parts = cwd.split(/[\\/]/).filter(Boolean);
    return parts[parts.length - 1] ?? cwd;
}
