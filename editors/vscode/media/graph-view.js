// The branch graph webview: draws the laid-out graph (src/graph.ts, posted by the extension) as
// SVG themed with VS Code's colours. It fills the panel when it opens and again when the panel
// is resized: the whole graph when it can be read so, else a readable zoom around the active
// leaf with no empty band where the picture is larger than the panel (after a pan or zoom a
// resize keeps the zoom and only closes such bands; Fit or 0 shows the whole graph again); pan by dragging or Shift+arrows,
// zoom with the wheel or +/-. Every node is focusable (Tab, or the arrow keys along the tree);
// a click or Enter chooses it: what it is, in full, beside the picture, with its actions (the
// context at it, its row in the Sessions view, making it the active leaf: only that moves the
// leaf). A click on a fold opens it one level (its user messages as landmarks), again closes it.
// A summary's audit is listed beside the picture while it is chosen or focused, each fact a
// button that shows the entry it came from. A Claude Code tool call that started a subagent's
// own transcript carries a link (↳ subagent …; click or Enter) that opens that transcript's
// graph; a subagent's graph has a header button that opens the graph of the transcript that
// started it; a sidechain written in the file hangs below the call that started it, dotted.
// @ts-check
(function () {
    // eslint-disable-next-line no-undef
    const vscode = acquireVsCodeApi();
    const svgNs = 'http://www.w3.org/2000/svg';
    const svg = /** @type {SVGSVGElement} */ (document.getElementById('graph'));
    const status = /** @type {HTMLElement} */ (document.getElementById('status'));
    const details = /** @type {HTMLElement} */ (document.getElementById('details'));
    const parentButton = /** @type {HTMLButtonElement | null} */ (document.getElementById('parent'));
    const W = 230;
    const H = 50;
    /** Below this zoom the text cannot be read: opening and resizing never go lower. */
    const READABLE = 0.6;
    /** Screen pixels kept around the picture (a label stands above its node). */
    const MARGIN = 20;
    let view = { x: 0, y: 0, k: 1 };
    /** @type {any} */
    let graph;
    const saved = vscode.getState() || {};
    /** The chosen node's key (kept across redraws and reloads). */
    let chosen = saved.chosen;
    /** True until the user pans or zooms: a resize then fits again. */
    let auto = true;
    /** After a fold is opened or closed: keep that node where it was on screen. */
    let anchor;

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

    /**
     * The zooms at which the graph's nodes span the panel's width (`kw`) and its height (`kh`),
     * `MARGIN` kept on each side, and the one at which the whole graph fits (`k`).
     */
    function fitScale() {
        const r = svg.getBoundingClientRect();
        const kw = (r.width - 2 * MARGIN) / (graph.maxX - graph.minX + W);
        const kh = (r.height - 2 * MARGIN) / (graph.maxY + H);
        return { r, kw, kh, k: Math.min(2, kw, kh) };
    }

    /** The whole graph, filling the panel on one axis and centred on the other. */
    function fit() {
        if (!graph) return;
        const { r, k } = fitScale();
        view = { k: Math.max(0.02, k), x: 0, y: 0 };
        fill(r);
        apply();
    }

    /**
     * On opening and on resize: the whole graph when it can be read so (`fit`); else the panel
     * covered at a readable zoom (the larger of the zooms that span its width and its height, up
     * to natural size), around the active leaf, the picture's edges never inside the panel where
     * it is larger than the panel (no empty band above the root or below the leaf).
     */
    function autoView() {
        if (!graph) return;
        const { r, kw, kh, k } = fitScale();
        if (k >= READABLE) return fit();
        const kk = Math.max(READABLE, Math.min(1, Math.max(kw, kh)));
        const focus = graph.nodes.find((n) => n.selectedLeaf) ?? graph.nodes.find((n) => n.defaultLeaf) ?? graph.nodes[0];
        view = { k: kk, x: r.width / 2 - focus.x * kk, y: r.height / 2 - focus.y * kk };
        fill(r);
        apply();
    }

    /**
     * Moves the view so that, on each axis, the picture covers the panel where it is larger
     * than the panel, and is centred where it is smaller.
     */
    function fill(r) {
        const k = view.k;
        const axis = (pos, lo, hi, size) => {
            const a = lo * k - MARGIN;
            const b = hi * k + MARGIN;
            if (b - a <= size) return (size - (b - a)) / 2 - a;
            return Math.min(-a, Math.max(size - b, pos));
        };
        view.x = axis(view.x, graph.minX - W / 2, graph.maxX + W / 2, r.width);
        view.y = axis(view.y, -H / 2, graph.maxY + H / 2, r.height);
    }

    /** A Claude Code uuid's first 8 characters, as the Sessions view shows it; other ids as they are. */
    function shortId(id) {
        return /^[0-9a-f]{8}-[0-9a-f]{4}-/.test(id) ? id.slice(0, 8) : id;
    }

    /** "1 leaf", "3 leaves": a count with its noun in the singular where it is one. */
    function count(n, one, many) {
        return `${n} ${n === 1 ? one : many}`;
    }

    function short(text, n) {
        const chars = [...(text || '')];
        return chars.length > n ? `${chars.slice(0, n - 1).join('')}…` : chars.join('');
    }

    /** The node in words (the same text as src/graph.ts describeNode, posted with it). */
    function describe(n) {
        return n.description || n.key;
    }

    function marksOf(n) {
        const m = [];
        if (n.selectedLeaf) m.push('◉ active leaf');
        if (n.defaultLeaf) m.push('◀ resume leaf');
        else if (n.leaf) m.push('◀ leaf');
        if (n.keptBy) m.push(`▶ kept from here (${n.keptBy.map(shortId).join(', ')})`);
        if (n.branchPoint) m.push('branches here');
        return m.join(' ');
    }

    function draw() {
        svg.textContent = '';
        const world = el('g', { id: 'world' }, svg);
        const edges = el('g', { class: 'edges' }, world);
        const pos = new Map(graph.nodes.map((n) => [n.key, n]));
        const curve = (a, b, cls) => {
            const y1 = a.y + H / 2;
            const y2 = b.y - H / 2;
            const m = (y1 + y2) / 2;
            return el('path', { d: `M${a.x},${y1} C${a.x},${m} ${b.x},${m} ${b.x},${y2}`, class: cls }, edges);
        };
        for (const e of graph.edges) {
            const a = pos.get(e.from);
            const b = pos.get(e.to);
            if (a && b) curve(a, b, `edge${e.onPath ? ' on-path' : ''}`);
        }
        // A compact boundary and the line it compacted (Claude Code): dashed.
        for (const e of graph.logicalEdges ?? []) {
            const a = pos.get(e.from);
            const b = pos.get(e.to);
            if (!a || !b) continue;
            el('title', {}, curve(a, b, 'edge logical')).textContent = `${e.to} compacts the conversation at ${e.compacted}`;
        }
        // A sidechain written in the file and the tool call that started it (Claude Code): dotted.
        for (const e of graph.sidechainEdges ?? []) {
            const a = pos.get(e.from);
            const b = pos.get(e.to);
            if (!a || !b) continue;
            el('title', {}, curve(a, b, 'edge sidechain')).textContent = `sidechain ${e.to} started by tool_use ${e.toolUseId} of ${e.from}`;
        }
        const nodes = el('g', { class: 'nodes' }, world);
        for (const n of graph.nodes) {
            const classes = ['node', n.kind, `type-${n.type}`];
            if (n.audit) classes.push('summary');
            if (n.opened) classes.push('opened');
            if (n.inContext) classes.push('in-context');
            if (n.onPath) classes.push('on-path');
            if (n.selectedLeaf) classes.push('selected-leaf');
            if (n.defaultLeaf) classes.push('default-leaf');
            if (n.leaf) classes.push('leaf');
            if (n.branchPoint) classes.push('branch-point');
            if (n.key === chosen) classes.push('chosen');
            const g = el('g', {
                class: classes.join(' '),
                transform: `translate(${n.x - W / 2} ${n.y - H / 2})`,
                tabindex: 0,
                role: 'button',
                'aria-label': describe(n),
                'aria-expanded': n.kind === 'fold' ? String(!!n.opened) : undefined,
                'data-key': n.key,
            }, nodes);
            if (n.kind !== 'fold') g.removeAttribute('aria-expanded');
            el('rect', { width: W, height: H, rx: n.kind === 'fold' ? 14 : 4 }, g);
            if (n.keptBy) el('rect', { class: 'kept-bar', x: 0, y: 0, width: 5, height: H }, g);
            const title = el('text', { x: 9, y: 14, class: 'title' }, g);
            title.textContent =
                n.kind === 'fold'
                    ? short(`┆ ${n.count} entries ${n.opened ? '▾' : '▸'} ${n.title}`, 36)
                    : short(`${n.title} ${shortId(n.id)}`, 36);
            const sub = el('text', { x: 9, y: 29, class: 'preview' }, g);
            let text = n.preview;
            if (n.kind === 'fold') text = `${shortId(n.id)}…${shortId(n.lastId)}${n.inContext ? ' · in context' : n.onPath ? ' · on path' : ''}`;
            if (n.name) text = `name: ${n.name}`;
            sub.textContent = short(text, 38);
            const marks = marksOf(n);
            if (n.subagent) {
                // The link to the subagent's own transcript: its graph opens on click or Enter.
                const link = el('g', { class: 'subagent-link', tabindex: 0, role: 'link', 'data-path': n.subagent.path, 'aria-label': `Open the graph of subagent agent-${n.subagent.agentId} (${n.subagent.path})` }, g);
                el('text', { x: 9, y: 44 }, link).textContent = short(`↳ subagent agent-${n.subagent.agentId}${marks ? ` · ${marks}` : ''}`, 38);
                el('title', {}, link).textContent = `Open the graph of ${n.subagent.path}`;
            } else {
                const third = el('text', { x: 9, y: 44, class: 'marks' }, g);
                const side = n.startedBy ? `⇠ started by ${shortId(n.startedBy.id)}` : n.sidechain ? `↳ sidechain ${shortId(n.sidechain.id)}` : '';
                const all = [side, marks].filter(Boolean).join(' · ');
                third.textContent = short(n.audit ? `audit: lost ${n.audit.lost} of ${n.audit.kept + n.audit.lost}${all ? ` · ${all}` : ''}` : all, 38);
            }
            if (n.label) {
                const tag = el('text', { x: W - 4, y: -4, class: 'label', 'text-anchor': 'end' }, g);
                tag.textContent = `[${short(n.label, 30)}]`;
            }
            el('title', {}, g).textContent = describe(n);
        }
        apply();
        const drawn = graph.nodes.filter((n) => !n.opened).length;
        const name = graph.name ? `${graph.name} · ` : '';
        const counts = [count(graph.entryCount, 'entry', 'entries'), count(graph.leafCount, 'leaf', 'leaves'), `${count(drawn, 'node', 'nodes')} drawn`];
        status.textContent = `${name}${counts.join(' · ')} · ${count(graph.contextCount, 'entry', 'entries')} in context at ${graph.selectedLeafId ?? '(none)'}`;
        if (parentButton) {
            const p = graph.parent;
            parentButton.hidden = !p;
            if (p) {
                parentButton.textContent = `↰ started by tool_use ${p.toolUseId ?? '(unknown)'}: open parent's graph`;
                parentButton.title = p.path;
                parentButton.setAttribute('aria-label', `Subagent agent-${p.agentId}, started by tool_use ${p.toolUseId ?? 'unknown'} of ${p.path}: open that transcript's graph`);
            }
        }
        showDetails();
    }

    function button(text, cls, onClick, label) {
        const b = document.createElement('button');
        b.textContent = text;
        if (cls) b.className = cls;
        if (label) b.setAttribute('aria-label', label);
        b.addEventListener('click', onClick);
        return b;
    }

    /** The chosen node beside the picture: all it is, its actions, its audit. */
    function showDetails() {
        const n = chosen && graph.nodes.find((x) => x.key === chosen);
        if (!n) {
            details.hidden = true;
            return;
        }
        const opening = details.hidden;
        details.textContent = '';
        const h = document.createElement('h2');
        h.textContent = n.kind === 'fold' ? `${n.count} entries, ${shortId(n.id)} to ${shortId(n.lastId)}` : `${n.title} ${shortId(n.id)}`;
        const p = document.createElement('p');
        p.textContent = describe(n);
        details.append(h, p);
        if (n.preview && n.kind === 'entry') {
            const pre = document.createElement('p');
            pre.className = 'muted';
            pre.textContent = n.preview;
            details.append(pre);
        }
        const actions = document.createElement('div');
        actions.className = 'actions';
        if (n.kind === 'fold') {
            actions.append(button(n.opened ? 'Close' : 'Open one level', '', () => toggle(n)));
        } else {
            actions.append(button('Show Context Here', '', () => vscode.postMessage({ type: 'context', id: n.id }), `Show the context at ${n.id} beside the graph`));
            actions.append(button('Show in Sessions View', 'secondary', () => vscode.postMessage({ type: 'reveal', id: n.id })));
            if (!n.selectedLeaf) actions.append(button('Make Active Leaf', 'secondary', () => vscode.postMessage({ type: 'leaf', id: n.id }), `Make ${n.id} the active leaf`));
            if (n.subagent) actions.append(button("Open Subagent's Graph", '', () => openGraph(n.subagent.path), `Open the graph of subagent agent-${n.subagent.agentId}`));
            if (n.startedBy) actions.append(button('Show Tool Call', 'secondary', () => chooseAndFocus(n.startedBy.id), `Show the tool call ${n.startedBy.id} that started this sidechain`));
            if (n.sidechain) actions.append(button('Show Sidechain', 'secondary', () => chooseAndFocus(n.sidechain.id), `Show the sidechain ${n.sidechain.id} this call started`));
        }
        details.append(actions);
        if (n.audit) {
            const a = n.audit;
            const ah = document.createElement('h2');
            ah.textContent = `Audit of ${n.title} ${shortId(n.id)}`;
            const ap = document.createElement('p');
            ap.className = 'muted';
            ap.textContent = [a.headline, a.source].filter(Boolean).join('; ');
            details.append(ah, ap);
            const list = document.createElement('ul');
            for (const probe of a.probes) {
                const li = document.createElement('li');
                const b = button(`${probe.status === 'lost' ? '✗ lost' : '✓ kept'} ${probe.kind}: ${probe.text}${probe.entryId ? ` ← ${probe.entryId}` : ''}`, probe.status, () => {
                    vscode.postMessage({ type: 'reveal', id: probe.entryId });
                    vscode.postMessage({ type: 'context', id: probe.entryId });
                });
                if (probe.entryId) b.setAttribute('aria-label', `${probe.status} ${probe.kind} ${probe.text}, from entry ${probe.entryId}`);
                else b.disabled = true;
                li.append(b);
                list.append(li);
            }
            details.append(list);
        }
        details.hidden = false;
        // The pane takes width from the picture.
        if (opening && auto) autoView();
    }

    /** Opens the graph of a transcript this one links to (a subagent's, or the parent's). */
    function openGraph(path) {
        vscode.postMessage({ type: 'graph', path });
    }

    /** Chooses the entry node `key` and focuses it. */
    function chooseAndFocus(key) {
        choose(key);
        const t = svg.querySelector(`[data-key="${CSS.escape(key)}"]`);
        if (t instanceof SVGElement) t.focus();
    }

    function choose(key) {
        chosen = key;
        vscode.setState({ chosen });
        for (const g of svg.querySelectorAll('.node')) g.classList.toggle('chosen', g.getAttribute('data-key') === key);
        showDetails();
    }

    function toggle(n) {
        const r = svg.getBoundingClientRect();
        anchor = { key: n.key, sx: n.x * view.k + view.x, sy: n.y * view.k + view.y, w: r.width };
        auto = false;
        vscode.postMessage({ type: 'toggle', key: n.key });
    }

    /** Moves focus along the tree: up to the parent, down to the first child, left/right to siblings. */
    function move(fromKey, key) {
        const parent = graph.edges.find((e) => e.to === fromKey)?.from;
        const children = graph.edges.filter((e) => e.from === fromKey).map((e) => e.to);
        const siblings = graph.edges.filter((e) => e.from === parent).map((e) => e.to);
        let target;
        if (key === 'ArrowUp') target = parent;
        if (key === 'ArrowDown') target = children[0];
        if (key === 'ArrowLeft' || key === 'ArrowRight') target = siblings[siblings.indexOf(fromKey) + (key === 'ArrowLeft' ? -1 : 1)];
        if (!target) return;
        const t = svg.querySelector(`[data-key="${CSS.escape(target)}"]`);
        if (!(t instanceof SVGElement)) return;
        t.focus();
        const m = graph.nodes.find((x) => x.key === target);
        const r = svg.getBoundingClientRect();
        const sx = m.x * view.k + view.x;
        const sy = m.y * view.k + view.y;
        if (sx < 40 || sx > r.width - 40 || sy < 40 || sy > r.height - 40) {
            view.x = r.width / 2 - m.x * view.k;
            view.y = r.height / 2 - m.y * view.k;
            apply();
        }
    }

    const nodeOf = (ev) => /** @type {Element} */ (ev.target).closest('.node');
    const linkOf = (ev) => /** @type {Element} */ (ev.target).closest('.subagent-link');
    const byKey = (k) => graph?.nodes.find((x) => x.key === k);
    svg.addEventListener('click', (ev) => {
        const link = linkOf(ev);
        if (link) {
            openGraph(link.getAttribute('data-path'));
            return;
        }
        const g = nodeOf(ev);
        if (!g) return;
        const n = byKey(g.getAttribute('data-key'));
        if (!n) return;
        choose(n.key);
        if (n.kind === 'fold') toggle(n);
    });
    svg.addEventListener('keydown', (ev) => {
        const link = linkOf(ev);
        if (link && (ev.key === 'Enter' || ev.key === ' ')) {
            ev.preventDefault();
            openGraph(link.getAttribute('data-path'));
            return;
        }
        const g = nodeOf(ev);
        const n = g && byKey(g.getAttribute('data-key'));
        if (n && (ev.key === 'Enter' || ev.key === ' ')) {
            ev.preventDefault();
            choose(n.key);
            if (n.kind === 'fold') toggle(n);
        } else if (n && !ev.shiftKey && ev.key.startsWith('Arrow')) {
            ev.preventDefault();
            move(n.key, ev.key);
        }
    });
    svg.addEventListener('focusin', (ev) => {
        const g = nodeOf(ev);
        const n = g && byKey(g.getAttribute('data-key'));
        if (n && n.audit && n.key !== chosen) choose(n.key);
    });
    document.addEventListener('keydown', (ev) => {
        if (/** @type {Element} */ (ev.target).closest?.('#details')) return;
        const step = 60;
        if (ev.key === '+' || ev.key === '=') zoom(1.25);
        else if (ev.key === '-') zoom(0.8);
        else if (ev.key === '0') {
            auto = true;
            fit();
        } else if (ev.shiftKey && ev.key.startsWith('Arrow')) {
            auto = false;
            if (ev.key === 'ArrowLeft') view.x += step;
            if (ev.key === 'ArrowRight') view.x -= step;
            if (ev.key === 'ArrowUp') view.y += step;
            if (ev.key === 'ArrowDown') view.y -= step;
            apply();
        } else return;
        ev.preventDefault();
    });
    function zoom(f, cx, cy) {
        auto = false;
        const r = svg.getBoundingClientRect();
        const x = cx ?? r.width / 2;
        const y = cy ?? r.height / 2;
        const k = Math.max(0.02, Math.min(4, view.k * f));
        view.x = x - ((x - view.x) * k) / view.k;
        view.y = y - ((y - view.y) * k) / view.k;
        view.k = k;
        apply();
    }
    svg.addEventListener(
        'wheel',
        (ev) => {
            ev.preventDefault();
            const r = svg.getBoundingClientRect();
            zoom(ev.deltaY < 0 ? 1.15 : 1 / 1.15, ev.clientX - r.left, ev.clientY - r.top);
        },
        { passive: false },
    );
    let drag;
    svg.addEventListener('pointerdown', (ev) => {
        if (nodeOf(ev)) return;
        drag = { x: ev.clientX - view.x, y: ev.clientY - view.y };
        svg.setPointerCapture(ev.pointerId);
    });
    svg.addEventListener('pointermove', (ev) => {
        if (!drag) return;
        auto = false;
        view.x = ev.clientX - drag.x;
        view.y = ev.clientY - drag.y;
        apply();
    });
    svg.addEventListener('pointerup', () => {
        drag = undefined;
    });
    document.getElementById('zoom-in')?.addEventListener('click', () => zoom(1.25));
    document.getElementById('zoom-out')?.addEventListener('click', () => zoom(0.8));
    parentButton?.addEventListener('click', () => {
        if (graph?.parent) openGraph(graph.parent.path);
    });
    document.getElementById('fit')?.addEventListener('click', () => {
        auto = true;
        fit();
    });
    new ResizeObserver(() => {
        if (!graph) return;
        if (auto) return autoView();
        // After a pan, a zoom or a fold opened: the zoom kept, the picture moved only as far
        // as it takes to leave no empty band where it is larger than the panel.
        fill(svg.getBoundingClientRect());
        apply();
    }).observe(svg);

    let drawnOnce = false;
    window.addEventListener('message', (ev) => {
        const msg = ev.data;
        if (msg.type !== 'graph') return;
        graph = msg.graph;
        draw();
        if (anchor) {
            // The fold just opened or closed stays where it was; what it holds hangs below it.
            const n = byKey(anchor.key);
            if (n) {
                view.x = anchor.sx - n.x * view.k;
                view.y = anchor.sy - n.y * view.k;
                apply();
            }
            anchor = undefined;
        } else if (!drawnOnce || auto) {
            autoView();
        }
        drawnOnce = true;
    });
    vscode.postMessage({ type: 'ready' });
})();
