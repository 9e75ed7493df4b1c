// The branch graph webview: draws the laid-out graph (src/graph.ts, posted by the extension) as
// SVG themed with VS Code's colours; pan (drag, arrow keys with Shift), zoom (wheel, +/-, 0 to
// fit); every node is focusable (Tab, or arrow keys along the tree) and Enter or a click selects
// its entry in the Sessions view and shows its context there. A summary with an audit (a
// compaction, a branch summary, a compact boundary) shows it beside the picture while focused:
// what it kept and lost, each fact a button that selects the entry it came from.
// @ts-check
(function () {
    // eslint-disable-next-line no-undef
    const vscode = acquireVsCodeApi();
    const svgNs = 'http://www.w3.org/2000/svg';
    const svg = /** @type {SVGSVGElement} */ (document.getElementById('graph'));
    const status = /** @type {HTMLElement} */ (document.getElementById('status'));
    const auditPane = /** @type {HTMLElement} */ (document.getElementById('audit'));
    /** The summary whose audit the pane shows. */
    let auditId;
    const W = 190;
    const H = 40;
    let view = { x: 0, y: 0, k: 1 };
    /** @type {any} */
    let graph;
    let focusedId = vscode.getState()?.focusedId;
    let fitted = false;

    function el(name, attrs, parent) {
        const e = document.createElementNS(svgNs, name);
        for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
        if (parent) parent.appendChild(e);
        return e;
    }

    function apply() {
        const g = svg.querySelector('#world');
        if (g) g.setAttribute('transform', `translate(${view.x} ${view.y}) scale(${view.k})`);
    }

    function fit() {
        if (!graph) return;
        const r = svg.getBoundingClientRect();
        const w = graph.maxX - graph.minX + W + 40;
        const h = graph.maxY + H + 40;
        const k = Math.max(0.05, Math.min(1, r.width / w, r.height / h));
        view = { k, x: (r.width - (graph.maxX + graph.minX) * k) / 2, y: 20 };
        apply();
    }

    /** A Claude Code uuid's first 8 characters, as the Sessions view shows it; other ids as they are. */
    function shortId(id) {
        return /^[0-9a-f]{8}-[0-9a-f]{4}-/.test(id) ? id.slice(0, 8) : id;
    }

    function short(text, n) {
        const chars = [...(text || '')];
        return chars.length > n ? `${chars.slice(0, n - 1).join('')}…` : chars.join('');
    }

    function describe(n) {
        const parts = [n.kind === 'fold' ? `${n.ids.length} folded entries from ${n.id}` : `${n.title} ${n.id}`, n.preview];
        if (n.label) parts.push(`label ${n.label}`);
        if (n.name) parts.push(`names the session ${n.name}`);
        if (n.summarizes) parts.push(`compaction summarizing ${n.summarizes.count} entries${n.summarizes.firstId ? ` ${n.summarizes.firstId} to ${n.summarizes.lastId}` : ''}, first kept ${n.summarizes.firstKeptEntryId ?? 'none'}`);
        if (n.type === 'branch_summary') parts.push('branch summary');
        if (n.audit) parts.push(`audit: ${n.audit.headline}`);
        const compacted = (graph.logicalEdges ?? []).find((e) => e.to === n.id);
        if (compacted) parts.push(`compacts the conversation at ${compacted.compacted}`);
        if (n.branchPoint) parts.push('branch point');
        if (n.selectedLeaf) parts.push('selected leaf');
        if (n.defaultLeaf) parts.push('resume leaf');
        else if (n.leaf) parts.push('leaf');
        if (n.inContext) parts.push(n.kind === 'fold' ? `${n.inContext} in context` : 'in context');
        return parts.filter(Boolean).join('; ');
    }

    function draw() {
        svg.textContent = '';
        const world = el('g', { id: 'world' }, svg);
        const edges = el('g', { class: 'edges' }, world);
        const pos = new Map(graph.nodes.map((n) => [n.id, n]));
        for (const e of graph.edges) {
            const a = pos.get(e.from);
            const b = pos.get(e.to);
            if (!a || !b) continue;
            const y1 = a.y + H / 2;
            const y2 = b.y - H / 2;
            const m = (y1 + y2) / 2;
            el('path', { d: `M${a.x},${y1} C${a.x},${m} ${b.x},${m} ${b.x},${y2}`, class: `edge${e.onPath ? ' on-path' : ''}` }, edges);
        }
        // A compact boundary and the line it compacted (Claude Code): dashed, from the line's
        // node down (or up) to the boundary that starts the next tree.
        for (const e of graph.logicalEdges ?? []) {
            const a = pos.get(e.from);
            const b = pos.get(e.to);
            if (!a || !b) continue;
            const y1 = a.y + H / 2;
            const y2 = b.y - H / 2;
            const m = (y1 + y2) / 2;
            const line = el('path', { d: `M${a.x},${y1} C${a.x},${m} ${b.x},${m} ${b.x},${y2}`, class: 'edge logical' }, edges);
            el('title', {}, line).textContent = `${e.to} compacts the conversation at ${e.compacted}`;
        }
        const nodes = el('g', { class: 'nodes' }, world);
        for (const n of graph.nodes) {
            const classes = ['node', n.kind, `type-${n.type}`];
            if (n.audit) classes.push('summary');
            if (n.inContext) classes.push('in-context');
            if (n.onPath) classes.push('on-path');
            if (n.selectedLeaf) classes.push('selected-leaf');
            if (n.defaultLeaf) classes.push('default-leaf');
            if (n.leaf) classes.push('leaf');
            if (n.branchPoint) classes.push('branch-point');
            const g = el('g', {
                class: classes.join(' '),
                transform: `translate(${n.x - W / 2} ${n.y - H / 2})`,
                tabindex: 0,
                role: 'button',
                'aria-label': describe(n),
                'data-id': n.id,
            }, nodes);
            el('rect', { width: W, height: H, rx: n.kind === 'fold' ? 14 : 4 }, g);
            const title = el('text', { x: 8, y: 15, class: 'title' }, g);
            const marks = [];
            if (n.selectedLeaf) marks.push('◉');
            if (n.defaultLeaf) marks.push('◀ default');
            else if (n.leaf) marks.push('◀ leaf');
            title.textContent = short(`${n.kind === 'fold' ? '┆ ' : ''}${n.title}${n.kind === 'entry' ? ` ${shortId(n.id)}` : ''} ${marks.join(' ')}`, 30);
            const sub = el('text', { x: 8, y: 31, class: 'preview' }, g);
            let text = n.preview;
            if (n.summarizes) text = `summarizes ${n.summarizes.count} (${n.summarizes.firstId ?? '–'}…${n.summarizes.lastId ?? '–'})`;
            if (n.name) text = `name: ${n.name}`;
            if (n.audit) text = `lost ${n.audit.lost} of ${n.audit.kept + n.audit.lost} · ${text}`;
            sub.textContent = short(text, 32);
            if (n.label) {
                const tag = el('text', { x: W - 4, y: -4, class: 'label', 'text-anchor': 'end' }, g);
                tag.textContent = `[${short(n.label, 24)}]`;
            }
            const tip = el('title', {}, g);
            tip.textContent = describe(n);
        }
        apply();
        status.textContent = `${graph.name ? `${graph.name} · ` : ''}${graph.entryCount} entries · ${graph.leafCount} leaves · ${graph.nodes.length} nodes drawn · ${graph.nodes.reduce((s, n) => s + n.inContext, 0)} entries in context at ${graph.selectedLeafId ?? '(none)'}`;
        if (focusedId) {
            const f = svg.querySelector(`[data-id="${focusedId}"]`);
            if (f instanceof SVGElement) f.focus({ preventScroll: true });
        }
        showAudit(auditId);
    }

    /** Shows the audit of the summary `id` beside the picture (hidden when it has none). */
    function showAudit(id) {
        const n = id && graph.nodes.find((x) => x.id === id);
        if (!n || !n.audit) {
            if (id === undefined) auditPane.hidden = true;
            return;
        }
        auditId = id;
        const a = n.audit;
        auditPane.textContent = '';
        const h = document.createElement('h2');
        h.textContent = `Audit of ${n.title} ${shortId(n.id)}`;
        const p = document.createElement('p');
        p.textContent = [a.headline, a.source].filter(Boolean).join('; ');
        auditPane.append(h, p);
        const list = document.createElement('ul');
        for (const probe of a.probes) {
            const li = document.createElement('li');
            const b = document.createElement('button');
            b.className = probe.status;
            b.textContent = `${probe.status === 'lost' ? '✗ lost' : '✓ kept'} ${probe.kind}: ${probe.text}${probe.entryId ? ` ← ${probe.entryId}` : ''}`;
            if (probe.entryId) {
                b.setAttribute('aria-label', `${probe.status} ${probe.kind} ${probe.text}, from entry ${probe.entryId}`);
                b.addEventListener('click', () => vscode.postMessage({ type: 'select', id: probe.entryId }));
            } else {
                b.disabled = true;
            }
            li.append(b);
            list.append(li);
        }
        auditPane.append(list);
        const opening = auditPane.hidden;
        auditPane.hidden = false;
        // The pane takes width from the picture: fit it again the first time the pane opens.
        if (opening) fit();
    }

    function select(id) {
        focusedId = id;
        vscode.setState({ focusedId });
        vscode.postMessage({ type: 'select', id });
    }

    /** Moves focus along the tree: up to the parent, down to the first child, left/right to siblings. */
    function move(fromId, key) {
        const n = graph.nodes.find((x) => x.id === fromId);
        if (!n) return;
        const parent = graph.edges.find((e) => e.to === fromId)?.from;
        const children = graph.edges.filter((e) => e.from === fromId).map((e) => e.to);
        const siblings = graph.edges.filter((e) => e.from === parent).map((e) => e.to);
        let target;
        if (key === 'ArrowUp') target = parent;
        if (key === 'ArrowDown') target = children[0];
        if (key === 'ArrowLeft' || key === 'ArrowRight') {
            const i = siblings.indexOf(fromId);
            target = siblings[i + (key === 'ArrowLeft' ? -1 : 1)];
        }
        if (!target) return;
        const t = svg.querySelector(`[data-id="${target}"]`);
        if (t instanceof SVGElement) {
            focusedId = target;
            vscode.setState({ focusedId });
            t.focus();
            const m = graph.nodes.find((x) => x.id === target);
            const r = svg.getBoundingClientRect();
            const sx = m.x * view.k + view.x;
            const sy = m.y * view.k + view.y;
            if (sx < 40 || sx > r.width - 40 || sy < 40 || sy > r.height - 40) {
                view.x = r.width / 2 - m.x * view.k;
                view.y = r.height / 2 - m.y * view.k;
                apply();
            }
        }
    }

    svg.addEventListener('focusin', (ev) => {
        const g = /** @type {Element} */ (ev.target).closest('.node');
        const id = g?.getAttribute('data-id');
        const n = id && graph?.nodes.find((x) => x.id === id);
        if (n && n.audit) showAudit(id);
    });
    svg.addEventListener('click', (ev) => {
        const g = /** @type {Element} */ (ev.target).closest('.node');
        if (g) select(g.getAttribute('data-id'));
    });
    svg.addEventListener('keydown', (ev) => {
        const g = /** @type {Element} */ (ev.target).closest('.node');
        if (g && (ev.key === 'Enter' || ev.key === ' ')) {
            ev.preventDefault();
            select(g.getAttribute('data-id'));
        } else if (g && !ev.shiftKey && ev.key.startsWith('Arrow')) {
            ev.preventDefault();
            move(g.getAttribute('data-id'), ev.key);
        }
    });
    document.addEventListener('keydown', (ev) => {
        const step = 60;
        if (ev.key === '+' || ev.key === '=') zoom(1.25);
        else if (ev.key === '-') zoom(0.8);
        else if (ev.key === '0') fit();
        else if (ev.shiftKey && ev.key.startsWith('Arrow')) {
            if (ev.key === 'ArrowLeft') view.x += step;
            if (ev.key === 'ArrowRight') view.x -= step;
            if (ev.key === 'ArrowUp') view.y += step;
            if (ev.key === 'ArrowDown') view.y -= step;
            apply();
        } else return;
        ev.preventDefault();
    });
    function zoom(f, cx, cy) {
        const r = svg.getBoundingClientRect();
        const x = cx ?? r.width / 2;
        const y = cy ?? r.height / 2;
        const k = Math.max(0.02, Math.min(4, view.k * f));
        view.x = x - ((x - view.x) * k) / view.k;
        view.y = y - ((y - view.y) * k) / view.k;
        view.k = k;
        apply();
    }
    svg.addEventListener('wheel', (ev) => {
        ev.preventDefault();
        const r = svg.getBoundingClientRect();
        zoom(ev.deltaY < 0 ? 1.15 : 1 / 1.15, ev.clientX - r.left, ev.clientY - r.top);
    }, { passive: false });
    let drag;
    svg.addEventListener('pointerdown', (ev) => {
        if (/** @type {Element} */ (ev.target).closest('.node')) return;
        drag = { x: ev.clientX - view.x, y: ev.clientY - view.y };
        svg.setPointerCapture(ev.pointerId);
    });
    svg.addEventListener('pointermove', (ev) => {
        if (!drag) return;
        view.x = ev.clientX - drag.x;
        view.y = ev.clientY - drag.y;
        apply();
    });
    svg.addEventListener('pointerup', () => {
        drag = undefined;
    });
    for (const [id, f] of [['zoom-in', () => zoom(1.25)], ['zoom-out', () => zoom(0.8)], ['fit', fit]]) {
        document.getElementById(id)?.addEventListener('click', f);
    }

    window.addEventListener('message', (ev) => {
        const msg = ev.data;
        if (msg.type === 'graph') {
            graph = msg.graph;
            draw();
            if (!fitted) {
                fit();
                fitted = true;
            }
        }
    });
    vscode.postMessage({ type: 'ready' });
})();
