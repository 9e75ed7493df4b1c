-- sessiond.actions: what the commands and the view mappings do. Each action acts on the
-- session of the current buffer (sessions.resolve) and, where it takes an entry, on the id
-- given or else the entry under the cursor. Every daemon call is asynchronous.
local client = require("sessiond.client")
local config = require("sessiond.config")
local sessions = require("sessiond.sessions")
local tree = require("sessiond.tree")
local view = require("sessiond.view")

local M = {}

local notify = client.notify
local ERROR, WARN = vim.log.levels.ERROR, vim.log.levels.WARN

local function fail(err)
  notify(type(err) == "table" and err.message or tostring(err), ERROR)
end

local function is_nil(v)
  return v == nil or v == vim.NIL
end

--- cb(s, id): the current buffer's session and `id` or the entry under the cursor. With
--- `need_entry`, says what to do when there is no entry.
local function target(id, need_entry, what, cb)
  local cursor_id = view.entry_at()
  sessions.resolve(function(err, s)
    if err then
      return fail(err)
    end
    local e = (id and id ~= "") and id or cursor_id
    if need_entry and not e then
      return fail(what .. " needs an entry: put the cursor on one in :SessiondTree, or give its id (<Tab> completes)")
    end
    cb(s, e)
  end)
end

-- Open -----------------------------------------------------------------------------------

function M.open(path, bang, cb)
  path = (path and path ~= "") and path or vim.api.nvim_buf_get_name(0)
  if path == "" or path:match("^sessiond://") then
    return fail("no file to open: run :SessiondOpen FILE (or :SessiondList)")
  end
  sessions.open(path, { allowCorrupt = bang }, function(err, r)
    if err then
      return fail(err)
    end
    local msg = ("%s: %s, %s"):format(sessions.title(sessions.sessions[r.path]),
      sessions.count(r.entryCount, "entry", "entries"), sessions.count(#r.leaves, "leaf", "leaves"))
    if r.pending then
      msg = msg .. " (still being created)"
    end
    if r.diagnostics and #r.diagnostics > 0 then
      msg = msg .. (" (read leniently: %s skipped)"):format(sessions.count(#r.diagnostics, "problem"))
    end
    if not is_nil(r.agent) then
      msg = msg .. (" · agent running (%s, pid %d)"):format(r.agent.command, r.agent.pid)
    end
    notify(msg)
    if cb then
      cb(r)
    end
  end)
end

-- Tree -----------------------------------------------------------------------------------

function M.tree(path)
  local function show(s)
    tree.show(s)
  end
  if path and path ~= "" then
    return sessions.open(path, {}, function(err, r)
      if err then
        return fail(err)
      end
      show(sessions.sessions[r.path])
    end)
  end
  sessions.resolve(function(err, s)
    if err then
      return fail(err)
    end
    show(s)
  end)
end

-- Context --------------------------------------------------------------------------------

local MAX_PART = 4000

local function str(v)
  if type(v) == "string" then
    return v
  end
  if is_nil(v) then
    return ""
  end
  return vim.json.encode(v)
end

local function cut(s)
  if #s > MAX_PART then
    return s:sub(1, MAX_PART) .. ("… (%s more)"):format(sessions.count(#s - MAX_PART, "byte"))
  end
  return s
end

local function role_title(m)
  if m.role == "toolResult" then
    return "tool result: " .. str(m.toolName) .. (m.isError and " (error)" or "")
  elseif m.role == "bashExecution" then
    return "bash: " .. str(m.command)
  elseif m.role == "custom" then
    return "custom: " .. str(m.customType)
  elseif m.role == "compactionSummary" then
    return "compaction summary"
      .. (type(m.tokensBefore) == "number" and (" (%s before)"):format(sessions.count(m.tokensBefore, "token")) or "")
  elseif m.role == "branchSummary" then
    return "branch summary"
  elseif m.role == "assistant" then
    return "assistant" .. (type(m.model) == "string" and (" (" .. m.model .. ")") or "")
  end
  return str(m.role)
end

local function message_lines(m)
  if m.role == "compactionSummary" or m.role == "branchSummary" then
    return { cut(str(m.summary)) }
  end
  if m.role == "bashExecution" then
    local out = { cut(str(m.output)) }
    if not is_nil(m.exitCode) then
      table.insert(out, "(exit code " .. str(m.exitCode) .. ")")
    end
    return out
  end
  local content = m.content
  if type(content) == "string" then
    return { cut(content) }
  end
  if type(content) ~= "table" then
    return { "(no content)" }
  end
  local out = {}
  for _, part in ipairs(content) do
    local t = type(part) == "table" and part.type or nil
    if t == "text" then
      table.insert(out, cut(str(part.text)))
    elseif t == "thinking" then
      table.insert(out, "> thinking: " .. (cut(str(part.thinking)):gsub("\n", "\n> ")))
    elseif t == "toolCall" then
      table.insert(out, ("→ %s(%s)  [%s]"):format(str(part.name), cut(str(part.arguments or {})), str(part.id)))
    elseif t == "tool_use" then
      -- Claude Code's (Anthropic's) blocks.
      table.insert(out, ("→ %s(%s)  [%s]"):format(str(part.name), cut(str(part.input or {})), str(part.id)))
    elseif t == "tool_result" then
      local body = part.content
      if type(body) == "table" then
        local texts = {}
        for _, b in ipairs(body) do
          table.insert(texts, type(b) == "table" and b.type == "text" and str(b.text) or ("[" .. str(b.type) .. "]"))
        end
        body = table.concat(texts, "\n")
      end
      table.insert(out, ("← result of %s%s: %s"):format(str(part.tool_use_id), part.is_error == true and " (error)" or "",
        cut(str(body))))
    elseif t == "image" then
      local mime = part.mimeType or (type(part.source) == "table" and part.source.media_type) or nil
      table.insert(out, "[image " .. str(mime) .. "]")
    else
      table.insert(out, "[" .. str(t) .. "]")
    end
  end
  if m.role == "assistant" and type(m.errorMessage) == "string" then
    table.insert(out, "(error: " .. m.errorMessage .. ")")
  end
  return #out > 0 and out or { "(empty)" }
end

--- One line about a context or open diagnostic.
function M.diagnostic_text(d)
  if d.kind == "corrupt" then
    local c = d.corruption
    return ("%s (line %d%s; %s)"):format(c.message, c.line, c.id and (", entry " .. c.id) or "", str(d.action))
  end
  local what = d.kind == "orphanToolResult" and "a tool result without its call" or "a tool call without its result"
  return ("%s (entry %s, tool call %s)"):format(what, str(d.entryId), str(d.toolCallId))
end

--- The context document: heading, then one section per message naming its entry.
--- Returns lines, ids (lnum → entry id: every line of a message's section).
function M.render_context(ctx, s)
  local lines, ids = {}, {}
  local function add(l, id)
    for piece in (l .. "\n"):gmatch("(.-)\n") do
      table.insert(lines, piece)
      if id then
        ids[#lines] = id
      end
    end
  end
  add("# Context — " .. sessions.title(s))
  add("")
  add("- file: " .. s.path .. " (" .. sessions.agent_title(s.format) .. ")")
  add("- leaf: " .. str(ctx.leafId) .. (ctx.leafId == s.leafId and " (the resume leaf)" or ""))
  local model = "(none)"
  if type(ctx.model) == "string" then
    model = ctx.model
  elseif type(ctx.model) == "table" then
    model = table.concat(vim.tbl_filter(function(x)
      return type(x) == "string"
    end, { ctx.model.provider, ctx.model.modelId }), "/")
  end
  add("- model: " .. model)
  if s.format ~= "claude-code" then
    add("- thinking level: " .. (type(ctx.thinkingLevel) == "string" and ctx.thinkingLevel or "(not set)"))
  end
  add(("- messages: %d · entries in context: %d%s"):format(ctx.messageCount, #ctx.entryIds,
    type(ctx.tokenEstimate) == "number" and (" · token estimate: %d"):format(ctx.tokenEstimate) or ""))
  for _, d in ipairs(ctx.diagnostics or {}) do
    add("- warning: " .. M.diagnostic_text(d))
  end
  for i, m in ipairs(ctx.messages or {}) do
    -- A Claude Code message may be several lines of the transcript (one response's blocks, a
    -- prompt with its attachments): its lines stand for the first.
    local id, named = ctx.messageEntryIds[i], nil
    if type(id) == "table" then
      named = (#id == 1 and "entry " or "entries ") .. table.concat(vim.tbl_map(str, id), ", ")
      id = id[1]
    else
      named = "entry " .. str(id)
    end
    add("")
    add(("## %d. %s  (%s)"):format((ctx.offset or 0) + i, role_title(m), named), id)
    add("", id)
    for _, l in ipairs(message_lines(m)) do
      add(l, id)
    end
  end
  return lines, ids
end

-- Context views: path → the leaf asked for (nil: the resume leaf, followed as it moves).
local context_leaf = {}
local context_pending = {}

local function fill_loclist(win, buf, s, ctx)
  local items = {}
  for _, d in ipairs(ctx.diagnostics or {}) do
    if d.kind == "corrupt" then
      table.insert(items, { filename = s.path, lnum = d.corruption.line, text = M.diagnostic_text(d), type = "W" })
    else
      table.insert(items, {
        bufnr = buf, lnum = view.line_of(buf, d.entryId) or 1, text = M.diagnostic_text(d), type = "W",
      })
    end
  end
  vim.fn.setloclist(win, {}, "r", { title = "sessiond context diagnostics: " .. sessions.title(s), items = items })
  return #items
end

local function draw_context(s, leaf, show, cb)
  local params = { path = s.path, fields = "full" }
  if leaf then
    params.leafId = leaf
  end
  client.request("session/contextAt", params, function(err, ctx)
    if err then
      fail(err)
      return cb and cb(err)
    end
    local buf, created = view.buffer("context", s.path, "markdown")
    if created then
      require("sessiond.mappings").apply(buf, "context")
    end
    local win
    if show then
      win = view.show(buf, config.options.context.split)
      vim.wo[win].foldenable = false
    end
    local keep = {}
    for _, w in ipairs(view.windows(buf)) do
      keep[w] = vim.api.nvim_win_get_cursor(w)
    end
    local lines, ids = M.render_context(ctx, s)
    view.set_lines(buf, lines, ids)
    vim.b[buf].sessiond_leaf = ctx.leafId
    for w, c in pairs(keep) do
      if not show then
        pcall(vim.api.nvim_win_set_cursor, w, { math.min(c[1], #lines), c[2] })
      end
    end
    if show then
      vim.api.nvim_win_set_cursor(win, { 1, 0 })
    end
    local n = 0
    for _, w in ipairs(view.windows(buf)) do
      n = fill_loclist(w, buf, s, ctx)
    end
    if show then
      notify(("context at %s: %s%s%s"):format(str(ctx.leafId), sessions.count(ctx.messageCount, "message"),
        type(ctx.tokenEstimate) == "number" and (", ~%s"):format(sessions.count(ctx.tokenEstimate, "token")) or "",
        n > 0 and (" · %s in the location list (:lopen)"):format(sessions.count(n, "diagnostic")) or ""))
    end
    vim.api.nvim_exec_autocmds("User", { pattern = "SessiondContextShown", data = { path = s.path, leafId = ctx.leafId } })
    if cb then
      cb(nil, ctx, buf)
    end
  end)
end

--- Shows what the model sees at `leaf` (nil: at the entry under the cursor in a view, else
--- the active leaf). Makes that leaf the session's active leaf.
function M.context(leaf)
  target(leaf, false, "context", function(s, id)
    local default = not id or id == s.leafId
    s.activeLeaf = (not default) and id or nil
    context_leaf[s.path] = (not default) and id or nil
    draw_context(s, context_leaf[s.path], true)
    -- The tree marks the active leaf and its path.
    if view.existing("tree", s.path) then
      tree.refresh(s)
    end
  end)
end

sessions.listen(function(event, path)
  if event == "open" then
    return
  end
  if event == "change" and not config.options.follow then
    return
  end
  local s = sessions.sessions[path]
  if not s or not view.existing("context", path) then
    return
  end
  if event == "reload" then
    context_leaf[path] = s.activeLeaf
  end
  -- Bursts of appended entries: one fetch.
  sessions.after_burst(context_pending, path, function()
    if sessions.sessions[path] and view.existing("context", path) then
      draw_context(sessions.sessions[path], context_leaf[path], false)
    end
  end)
end)

-- Explain --------------------------------------------------------------------------------

-- path → the entry the last explanation pointed to (for `gr`).
M.last_reference = {}

local REF_KEYS = { "compactionId", "byCompactionId", "editId", "boundaryId", "branchEntryId", "divergesAt" }

--- The sentence, capitalized and ended, and the entry the reason points to (or nil).
function M.explain_text(r)
  local text = r.text:sub(1, 1):upper() .. r.text:sub(2)
  if not text:match("%.$") then
    text = text .. "."
  end
  local ref
  for _, k in ipairs(REF_KEYS) do
    if type(r.reason) == "table" and type(r.reason[k]) == "string" then
      ref = r.reason[k]
      break
    end
  end
  return text, ref
end

--- Whether `entry` reaches the model at `leaf` (default: the active leaf), and why not; on a
--- summary, its audit in the audit buffer (sessiond.audit).
function M.explain(entry, leaf, cb)
  target(entry, true, "explain", function(s, id)
    local params = { path = s.path, entryId = id, leafId = leaf or sessions.active_leaf(s) }
    if is_nil(params.leafId) then
      params.leafId = nil
    end
    client.request("session/explain", params, function(err, r)
      if err then
        return fail(err)
      end
      local text, ref = M.explain_text(r)
      if ref then
        M.last_reference[s.path] = ref
        local d = tree.data[s.path]
        local n = d and d.nodes[ref]
        text = text .. ("\n→ %s %s %s%s"):format(ref, n and tree.kind(n) or "", n and n.preview or "",
          view.existing("tree", s.path) and "  (" .. config.options.mappings.referenced .. " jumps to it)" or "")
      end
      notify(text)
      -- A summary (a compaction, a branch summary): what it replaced and what it kept.
      local audit = require("sessiond.audit")
      if audit.has_audit(r) then
        audit.show(s, r)
      end
      if cb then
        cb(r, text)
      end
    end)
  end)
end

-- Writes ---------------------------------------------------------------------------------

--- Forks the path to `entry` into a new session file ("at", or "before" a user message).
function M.fork(entry, before, cb)
  target(entry, true, "fork", function(s, id)
    local params = { path = s.path, entryId = id, position = before and "before" or "at" }
    client.request("session/fork", params, function(err, r)
      if err then
        return fail(err)
      end
      sessions.open(r.path, {}, function(oerr)
        if oerr then
          return fail(oerr)
        end
        -- Commands in this buffer keep acting on the source session.
        sessions.current = s.path
        notify(("forked %s %s into %s (%s): :SessiondTree %s shows it"):format(
          before and "before" or "at", id, r.path, sessions.count(r.entryCount, "entry", "entries"),
          vim.fn.fnameescape(r.path)))
        if cb then
          cb(r)
        end
      end)
    end)
  end)
end

local function label_request(s, id, text, retried, cb)
  local params = { path = s.path, targetId = id, label = text, expectedLeafId = s.leafId }
  if text == nil then
    params.label = vim.NIL
  end
  if is_nil(s.leafId) then
    params.expectedLeafId = vim.NIL
  end
  client.request("session/label", params, function(err, r)
    -- A label changes no context: when others appended meanwhile, label the new state.
    if err and err.code == -33010 and not retried and err.data then
      s.leafId = err.data.currentLeafId
      return label_request(s, id, text, true, cb)
    end
    if err then
      return fail(err)
    end
    notify(text and ("labelled %s %q"):format(id, text) or ("removed the label of %s"):format(id))
    if cb then
      cb(r)
    end
  end)
end

--- Sets the label of `entry` to `text` (nil: asks; "" or `clear`: removes it).
function M.label(entry, text, clear, cb)
  target(entry, true, "label", function(s, id)
    if not sessions.supports(s, "label") then
      return fail(sessions.unsupported_text(s, "label"))
    end
    if clear then
      return label_request(s, id, nil, false, cb)
    end
    if text and text ~= "" then
      return label_request(s, id, text, false, cb)
    end
    local d = tree.data[s.path]
    local current = d and d.nodes[id] and d.nodes[id].label
    vim.ui.input({ prompt = ("Label for %s (empty removes it): "):format(id), default = is_nil(current) and "" or current },
      function(input)
        if input == nil then
          return
        end
        input = vim.trim(input)
        label_request(s, id, input ~= "" and input or nil, false, cb)
      end)
  end)
end

local NOTHING = {
  emptyPath = "the path is empty",
  leafIsCompaction = "the leaf is already a compaction",
  nothingBeforeCut = "the session is too small",
}

--- A short report of a compaction or its dry run.
function M.compact_text(c, dry)
  if c.nothingToCompact then
    return "nothing to compact: " .. (NOTHING[c.reason] or c.reason)
  end
  local kept, lost = {}, {}
  for _, p in ipairs((c.retention or {}).probes or {}) do
    table.insert(p.status == "lost" and lost or kept, p)
  end
  local text = ("%s the context of %s from %d to %s (summarizing %s, keeping from %s). Retention: %d kept, %d lost.")
    :format(dry and "compaction would take" or "compacted", str(c.leafId), c.tokensBefore,
      sessions.count(c.tokensAfter, "token"), sessions.count(c.messagesToSummarize or 0, "message"),
      str(c.firstKeptEntryId), #kept, #lost)
  if #lost > 0 then
    local names = {}
    for i = 1, math.min(8, #lost) do
      table.insert(names, lost[i].kind .. " " .. lost[i].text)
    end
    text = text .. " Lost: " .. table.concat(names, "; ") .. (#lost > 8 and "; …" or "")
  end
  return text
end

--- Compacts the path to `entry` (default: the entry under the cursor, else the active
--- leaf): a dry run first, then asks, then writes. `force` writes beside a running agent.
function M.compact(entry, force, cb)
  target(entry, false, "compact", function(s, id)
    if not sessions.supports(s, "compact") then
      return fail(sessions.unsupported_text(s, "compact"))
    end
    local leaf = id or sessions.active_leaf(s)
    local base = { path = s.path }
    if not is_nil(leaf) then
      base.leafId = leaf
    end
    client.request("session/compact", vim.tbl_extend("force", base, { dryRun = true }), function(err, dry)
      if err then
        return fail(err)
      end
      if dry.nothingToCompact then
        notify(M.compact_text(dry, true))
        return cb and cb(dry)
      end
      local report = M.compact_text(dry, true)
      vim.ui.select({ "Compact", "Cancel" }, {
        prompt = "sessiond: " .. report .. " Compact?",
        kind = "sessiond.compact",
      }, function(choice)
        if choice ~= "Compact" then
          notify("compaction cancelled; nothing written")
          return cb and cb(nil)
        end
        local params = vim.tbl_extend("force", base, { expectedLeafId = s.leafId, force = force or nil })
        client.request("session/compact", params, function(cerr, done)
          if cerr then
            return fail(cerr)
          end
          notify(M.compact_text(done, false) .. " New entry " .. str(done.entryId) .. ".")
          if cb then
            cb(done)
          end
        end)
      end)
    end)
  end)
end

-- Methods a daemon may or may not offer --------------------------------------------------

local function gated(method, what, cb)
  client.when_ready(function(err)
    if err then
      return fail(err)
    end
    if not client.offers(method) then
      local v = client.server_info and client.server_info.version or "?"
      return notify(("%s: this sessiond (%s, protocol %s) does not offer %s; update sessiond to use it"):format(
        what, v, client.info and client.info.protocolVersion or "?", method), WARN)
    end
    cb()
  end)
end

-- Graph ----------------------------------------------------------------------------------

--- :SessiondGraph [LEAF]: the branch graph of the current session, the context at LEAF (else
--- the active leaf) marked; cb(err, buf).
function M.graph(leaf, cb)
  sessions.resolve(function(err, s)
    if err then
      return fail(err)
    end
    gated("session/graph", "graph", function()
      require("sessiond.graph").show(s, leaf, cb)
    end)
  end)
end

--- Quickfix items for a session/verifyResume result: warn and fail findings.
function M.verify_items(r, session_path)
  local items = {}
  for _, f in ipairs(r.findings or {}) do
    if f.status ~= "ok" then
      local text = ("[%s] %s: %s"):format(f.status, str(f.kind), str(f.message))
      if type(f.entryId) == "string" then
        text = text .. " (entry " .. f.entryId .. ")"
      end
      if type(f.evidence) == "string" and f.evidence ~= "" then
        text = text .. " — " .. f.evidence
      end
      table.insert(items, {
        filename = type(f.path) == "string" and f.path or session_path,
        lnum = 1,
        text = text,
        type = f.status == "fail" and "E" or "W",
      })
    end
  end
  return items
end

--- Checks, before resuming at `entry` (default: cursor entry, else the active leaf), what
--- may have changed since (session/verifyResume); findings go to the quickfix list.
function M.verify(entry, cb)
  target(entry, false, "verify", function(s, id)
    gated("session/verifyResume", "verify", function()
      local leaf = id or sessions.active_leaf(s)
      local params = { path = s.path }
      if not is_nil(leaf) then
        params.leafId = leaf
      end
      client.request("session/verifyResume", params, function(err, r)
        if err then
          return fail(err)
        end
        local items = M.verify_items(r, s.path)
        local c = r.counts or {}
        local title = ("sessiond verify %s at %s: %d ok, %d warn, %d fail"):format(sessions.title(s), str(r.leafId),
          c.ok or 0, c.warn or 0, c.fail or 0)
        vim.fn.setqflist({}, "r", { title = title, items = items })
        if #items > 0 then
          notify(title .. " (:copen lists them)", (c.fail or 0) > 0 and ERROR or WARN)
        else
          notify(title .. ": nothing needs attention before resuming")
        end
        if cb then
          cb(r, items)
        end
      end)
    end)
  end)
end

--- Searches the sessions under the roots (session/search); hits go to the quickfix list.
function M.search(query, cb)
  if not query or query == "" then
    return fail("search needs words to look for: :SessiondSearch WORDS")
  end
  gated("session/search", "search", function()
    client.request("session/search", { query = query, limit = 200 }, function(err, r)
      if err then
        return fail(err)
      end
      local hits = r.hits or (vim.islist(r) and r) or {}
      local items = {}
      for _, h in ipairs(hits) do
        table.insert(items, {
          filename = h.path,
          lnum = type(h.line) == "number" and h.line or 1,
          text = ("%s: %s"):format(str(h.entryId), str(h.snippet)),
        })
      end
      vim.fn.setqflist({}, "r", { title = "sessiond search: " .. query, items = items })
      notify(("%s for %q%s"):format(sessions.count(#items, "hit"), query, #items > 0 and " (:copen lists them)" or ""))
      if cb then
        cb(r, items)
      end
    end)
  end)
end

-- List -----------------------------------------------------------------------------------

--- The name a listed session goes by: its name, else its first prompt, else its file name.
local function session_name(x)
  return type(x.name) == "string" and x.name
    or type(x.firstMessage) == "string" and x.firstMessage
    or vim.fs.basename(x.path)
end

--- The last part of a project's directory ("(no working directory)" when none was recorded).
function M.project_label(cwd)
  if type(cwd) ~= "string" or cwd == "" then
    return "(no working directory)"
  end
  local parts = vim.split(cwd, "/", { trimempty = true })
  return parts[#parts] or cwd
end

--- A file size as people read it: "812 B", "4.1 KiB", "952 KiB", "3.4 MiB" (a small file's
--- growth shows).
function M.size_text(n)
  if type(n) ~= "number" then
    return ""
  end
  if n < 1024 then
    return ("%d B"):format(n)
  elseif n < 10 * 1024 then
    return ("%.1f KiB"):format(n / 1024)
  elseif n < 1024 * 1024 then
    return ("%d KiB"):format(math.floor(n / 1024 + 0.5))
  end
  return ("%.1f MiB"):format(n / (1024 * 1024))
end

--- For sessions whose lines would read alike (copies of one session: same agent, project
--- and name), where each file is: the shortest tail of its path that no other of them shares
--- ("s.jsonl", else "copies/s.jsonl", …). path → text; sessions unlike any other are absent.
function M.tell_apart(list)
  local groups = {}
  for _, x in ipairs(list) do
    local key = table.concat({ str(x.format), str(x.cwd), session_name(x) }, "\0")
    groups[key] = groups[key] or {}
    table.insert(groups[key], x.path)
  end
  local out = {}
  for _, paths in pairs(groups) do
    if #paths > 1 then
      local parts = {}
      for i, p in ipairs(paths) do
        parts[i] = vim.split(p, "/", { trimempty = true })
      end
      for i, p in ipairs(paths) do
        local mine = parts[i]
        for depth = 1, #mine do
          local tail = table.concat(mine, "/", #mine - depth + 1)
          local shared = false
          for j, other in ipairs(parts) do
            if j ~= i and #other >= depth and table.concat(other, "/", #other - depth + 1) == tail then
              shared = true
              break
            end
          end
          if not shared or depth == #mine then
            out[p] = tail
            break
          end
        end
      end
    end
  end
  return out
end

--- One picker line (and one line of the sessions view): agent › project, then the session (a
--- subagent under its parent: ↳) and, when other sessions read alike, `where` its file is
--- (M.tell_apart) right after its name, where a narrow window still shows it; then entries and
--- leaves (and the corrupt spots a strict read refuses: `sessiond check` says where), tokens,
--- size, modified.
function M.session_line(x, where)
  local counts = type(x.entryCount) == "number"
      and ("%s, %s"):format(sessions.count(x.entryCount, "entry", "entries"),
        sessions.count(x.leafCount or 0, "leaf", "leaves"))
    or ""
  if type(x.corruptions) == "number" and x.corruptions > 0 then
    counts = ("%s, ⚠ %s"):format(counts, sessions.count(x.corruptions, "corrupt spot", "corrupt spots"))
  end
  local tokens = type(x.tokenEstimate) == "number" and ("~" .. sessions.count(x.tokenEstimate, "token")) or ""
  local name = session_name(x)
  if type(x.subagent) == "table" then
    name = "  ↳ subagent " .. (type(x.subagent.agentType) == "string" and (x.subagent.agentType .. ": ") or "") .. name
  end
  if where then
    name = ("%s (%s)"):format(name, where)
  end
  return ("%s › %s  ·  %s  ·  %s  ·  %s  ·  %s  ·  %s"):format(
    sessions.agent_title(x.format or "pi"),
    M.project_label(x.cwd),
    name,
    counts,
    tokens,
    M.size_text(x.size),
    (str(x.modified):sub(1, 16):gsub("T", " "))
  )
end

--- Orders listed sessions as the picker groups them: by agent (pi, then Claude Code), then by
--- project (its working directory; the project with the newest session first, none last),
--- each project's sessions newest first, a subagent's transcript right under its parent.
function M.group_sessions(list)
  local by_path, children = {}, {}
  for _, x in ipairs(list) do
    by_path[x.path] = x
  end
  local tops = {}
  for _, x in ipairs(list) do
    local parent = type(x.subagent) == "table" and x.subagent.parentPath or nil
    if parent and by_path[parent] then
      children[parent] = children[parent] or {}
      table.insert(children[parent], x)
    else
      table.insert(tops, x)
    end
  end
  -- Newest first; the same time by path, so that every list of the same rows reads alike.
  local function newer(a, b)
    if str(a.modified) ~= str(b.modified) then
      return str(a.modified) > str(b.modified)
    end
    return a.path < b.path
  end
  local out = {}
  for _, agent in ipairs(sessions.AGENTS) do
    local projects, order = {}, {}
    for _, x in ipairs(tops) do
      if (x.format or "pi") == agent then
        local key = type(x.cwd) == "string" and x.cwd or ""
        if not projects[key] then
          projects[key] = {}
          table.insert(order, key)
        end
        table.insert(projects[key], x)
      end
    end
    for _, key in ipairs(order) do
      table.sort(projects[key], newer)
    end
    table.sort(order, function(a, b)
      if (a == "") ~= (b == "") then
        return b == ""
      end
      local na, nb = str(projects[a][1].modified), str(projects[b][1].modified)
      if na ~= nb then
        return na > nb
      end
      return a < b
    end)
    for _, key in ipairs(order) do
      for _, x in ipairs(projects[key]) do
        table.insert(out, x)
        local kids = children[x.path] or {}
        table.sort(kids, newer)
        vim.list_extend(out, kids)
      end
    end
  end
  return out
end

local function telescope_pick(list, line, on_choice)
  local ok_p, pickers = pcall(require, "telescope.pickers")
  if not ok_p then
    return false
  end
  local finders = require("telescope.finders")
  local conf = require("telescope.config").values
  local actions = require("telescope.actions")
  local state = require("telescope.actions.state")
  pickers.new({}, {
    prompt_title = "sessiond sessions",
    finder = finders.new_table({
      results = list,
      entry_maker = function(x)
        return { value = x, display = line(x), ordinal = line(x), path = x.path }
      end,
    }),
    sorter = conf.generic_sorter({}),
    previewer = conf.file_previewer({}),
    attach_mappings = function(bufnr)
      actions.select_default:replace(function()
        local e = state.get_selected_entry()
        actions.close(bufnr)
        on_choice(e and e.value)
      end)
      return true
    end,
  }):find()
  return true
end

--- Every session under every root the daemon reads (session/list answers for one root at a
--- time); cb(err, sessions, roots). A root that cannot be listed is left out.
function M.list_all(cb)
  client.when_ready(function(err)
    if err then
      return cb(err)
    end
    local roots = (client.info and client.info.roots) or {}
    if #roots == 0 then
      return client.request("session/list", vim.empty_dict(), function(lerr, r)
        if lerr then
          return cb(lerr)
        end
        cb(nil, r.sessions, { r.root })
      end)
    end
    local left, all, seen, first_err = #roots, {}, {}, nil
    for _, root in ipairs(roots) do
      client.request("session/list", { root = root }, function(lerr, r)
        if lerr then
          first_err = first_err or lerr
        else
          for _, x in ipairs(r.sessions or {}) do
            if not seen[x.path] then
              seen[x.path] = true
              table.insert(all, x)
            end
          end
        end
        left = left - 1
        if left == 0 then
          if #all == 0 and first_err then
            return cb(first_err)
          end
          cb(nil, all, roots)
        end
      end)
    end
  end)
end

--- Picks a session under the roots (pi's and Claude Code's, grouped by agent, then project)
--- and shows its tree.
function M.list(cb)
  M.list_all(function(err, list, roots)
    if err then
      return fail(err)
    end
    if #list == 0 then
      return notify(("no sessions under %s"):format(table.concat(vim.tbl_map(str, roots), ", ")), WARN)
    end
    list = M.group_sessions(list)
    local where = M.tell_apart(list)
    local function line(x)
      return M.session_line(x, where[x.path])
    end
    local function chosen(x)
      if not x then
        return
      end
      sessions.open(x.path, {}, function(oerr, o)
        if oerr then
          return fail(oerr)
        end
        tree.show(sessions.sessions[o.path])
        if cb then
          cb(o)
        end
      end)
    end
    local use_telescope = config.options.picker == "telescope"
      or (config.options.picker == "auto" and pcall(require, "telescope"))
    if use_telescope and telescope_pick(list, line, chosen) then
      return
    end
    vim.ui.select(list, {
      prompt = ("sessiond: sessions under %s (by agent, then project)"):format(table.concat(vim.tbl_map(str, roots), ", ")),
      format_item = line,
      kind = "sessiond.session",
    }, chosen)
  end)
end

-- Jumps in the tree view -----------------------------------------------------------------

local function jump(find, what)
  local buf = vim.api.nvim_get_current_buf()
  local path = vim.b[buf].sessiond_path
  local id = view.entry_at(buf)
  if not path or not id then
    return fail(what .. ": put the cursor on an entry of the tree")
  end
  local to = find(path, id)
  if not to then
    return notify(what .. ": none from " .. id)
  end
  local lnum = view.line_of(buf, to)
  if not lnum then
    return notify(what .. ": " .. to .. " is not in this view yet (R fetches it)")
  end
  vim.cmd("normal! m'")
  vim.api.nvim_win_set_cursor(0, { lnum, 0 })
  vim.cmd("silent! normal! zv")
end

-- M.jump_parent, M.jump_next_branch, M.jump_prev_branch, M.jump_leaf: to what the tree's
-- navigation function finds from the entry under the cursor.
for name, to in pairs({
  parent = { "parent", "parent" },
  next_branch = { "next_branch_point", "next branch point" },
  prev_branch = { "prev_branch_point", "previous branch point" },
  leaf = { "leaf_below", "leaf" },
}) do
  M["jump_" .. name] = function()
    jump(tree[to[1]], to[2])
  end
end
function M.jump_referenced()
  jump(function(path)
    return M.last_reference[path]
  end, "referenced entry (explain an entry first)")
end

function M.refresh()
  sessions.resolve(function(err, s)
    if err then
      return fail(err)
    end
    local kind = vim.b.sessiond_view
    if kind == "context" then
      return draw_context(s, context_leaf[s.path], false)
    end
    tree.refresh(s)
  end)
end

function M.restart()
  client.restart()
end

return M
