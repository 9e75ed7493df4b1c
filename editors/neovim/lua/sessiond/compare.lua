-- sessiond.compare: `:SessiondDiff [LEAF_A [LEAF_B]]`, two leaves of a session compared. A tab
-- page shows what the model sees at A and at B side by side (the context view's document,
-- `sessiond://diff-a/PATH` and `sessiond://diff-b/PATH`, in `:diffthis` mode) over the report of
-- session/compareBranches in a scratch buffer (`sessiond://compare/PATH`, filetype
-- `sessiondcompare`): the fork point, what each side did, and the context entries at one leaf and
-- not at the other with the reason. <CR> on a line naming an entry (a report line, a message of
-- either context) jumps to it in the tree; q closes the tab page.
local client = require("sessiond.client")
local sessions = require("sessiond.sessions")
local view = require("sessiond.view")

local M = {}

local function fail(err)
  client.notify(type(err) == "table" and err.message or tostring(err), vim.log.levels.ERROR)
end

local function str(v)
  if v == nil or v == vim.NIL then
    return "-"
  end
  return tostring(v)
end

-- "1 entry", "2 entries".
local function count(n, one, many)
  return ("%d %s"):format(n, n == 1 and one or many)
end

-- "edit 1, read 2" from {name: count}, by name.
local function calls(t)
  local names = vim.tbl_keys(type(t) == "table" and t or {})
  table.sort(names)
  return table.concat(vim.tbl_map(function(n)
    return n .. " " .. t[n]
  end, names), ", ")
end

local function side_line(label, side)
  side = type(side) == "table" and side or {}
  local parts = {
    count(side.entries or 0, "entry", "entries") .. " after the fork point",
    count(side.userTurns or 0, "user turn", "user turns"),
    count(side.assistantMessages or 0, "assistant message", "assistant messages"),
  }
  local c = calls(side.toolCalls)
  if c ~= "" then
    table.insert(parts, "tool calls: " .. c)
  end
  if type(side.filesChanged) == "table" and #side.filesChanged > 0 then
    table.insert(parts, count(#side.filesChanged, "file", "files") .. " changed")
  end
  if type(side.tokenEstimate) == "number" then
    table.insert(parts, ("context ~%s at the leaf"):format(count(side.tokenEstimate, "token", "tokens")))
  end
  -- Each setting once: how often it changed and where it ended.
  local last, changes, order = {}, {}, {}
  for _, ch in ipairs(side.settingChanges or {}) do
    local k = str(ch.setting)
    if not changes[k] then
      table.insert(order, k)
    end
    changes[k] = (changes[k] or 0) + 1
    last[k] = ch
  end
  for _, k in ipairs(order) do
    table.insert(parts, ("%s → %s (%s%s)"):format(k == "model" and "model" or "thinking level", str(last[k].value),
      str(last[k].id), changes[k] > 1 and (", the last of %d changes"):format(changes[k]) or ""))
  end
  return label .. ": " .. table.concat(parts, " · ")
end

--- The report of compareBranches result `r` on session `s`: lines and ids (lnum → the entry
--- the line names). Pure.
function M.render(r, s)
  local lines, ids = {}, {}
  local function add(l, id)
    table.insert(lines, l)
    if type(id) == "string" then
      ids[#lines] = id
    end
  end
  local function entry(e, extra)
    local kind = (type(e.role) == "string" and e.role) or str(e.type)
    add(("  %s %s  %s"):format(str(e.id), kind, extra or (type(e.preview) == "string" and e.preview or "")), e.id)
  end
  add("# Comparison — " .. sessions.title(s))
  add("")
  add("- A: " .. str(r.leafA), r.leafA)
  add("- B: " .. str(r.leafB), r.leafB)
  if type(r.forkPointId) == "string" then
    add("- fork point: " .. r.forkPointId .. " (the last entry both paths share)", r.forkPointId)
  else
    add("- fork point: none (the paths share no entry: two roots)")
  end
  add("- " .. side_line("A did", r.sideA))
  add("- " .. side_line("B did", r.sideB))
  for _, k in ipairs({ "thinkingLevel", "model" }) do
    local d = r[k]
    if type(d) == "table" then
      add(("- %s: A %s, B %s"):format(k == "model" and "model" or "thinking level", str(d.a), str(d.b)))
    end
  end
  local only_a, only_b = r.contextOnlyA or {}, r.contextOnlyB or {}
  local changed = r.contextChanged or {}
  local common = r.contextCommon or 0
  add(("- context: %s at A, %d at B; %d the same at both, %d reaching the model differently"):format(
    count(common + #changed + #only_a, "entry", "entries"), common + #changed + #only_b, common, #changed))
  for _, d in ipairs(r.diagnostics or {}) do
    add("- warning: " .. require("sessiond.actions").diagnostic_text(d))
  end
  add("- <CR> on an entry jumps to it in the tree")
  local function section(title, list, f)
    add("")
    add(("## %s (%d)"):format(title, #list))
    for _, e in ipairs(list) do
      f(e)
    end
  end
  for _, side in ipairs({ "A", "B" }) do
    local files = (r["side" .. side] or {}).filesChanged or {}
    if #files > 0 then
      add("")
      add(("## Files changed on %s (%d)"):format(side, #files))
      for _, f in ipairs(files) do
        add("  " .. f)
      end
    end
  end
  section("On A only, after the fork point", r.onlyA or {}, entry)
  section("On B only, after the fork point", r.onlyB or {}, entry)
  section("Context at A, not at B", only_a, function(e)
    entry(e, e.text)
  end)
  section("Context at B, not at A", only_b, function(e)
    entry(e, e.text)
  end)
  section("Context at both, reaching the model differently", changed, function(e)
    entry(e, e.text)
  end)
  return lines, ids
end

-- The leaf `:SessiondDiff` compares by default: the context view's leaf, else the entry under
-- the cursor.
local function cursor_leaf()
  if vim.b.sessiond_view == "context" and type(vim.b.sessiond_leaf) == "string" then
    return vim.b.sessiond_leaf
  end
  return view.entry_at()
end

-- The tab page showing the comparison of `path`, if one does.
local function find_tab(path)
  local a = view.existing("diff-a", path)
  if not a then
    return nil
  end
  for _, tab in ipairs(vim.api.nvim_list_tabpages()) do
    for _, w in ipairs(vim.api.nvim_tabpage_list_wins(tab)) do
      if vim.api.nvim_win_get_buf(w) == a then
        return tab
      end
    end
  end
end

-- Lays out the comparison tab page: A | B in diff mode above, the report below. Returns the
-- windows {a, b, report}.
local function layout(path, bufs)
  local tab = find_tab(path)
  if tab then
    vim.api.nvim_set_current_tabpage(tab)
    vim.cmd("only")
  else
    vim.cmd("tabnew")
  end
  local wa = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(wa, bufs.a)
  vim.cmd("rightbelow vsplit")
  local wb = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(wb, bufs.b)
  vim.cmd("botright split")
  local wr = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(wr, bufs.report)
  vim.api.nvim_win_set_height(wr, math.max(8, math.floor(vim.o.lines / 3)))
  for _, w in ipairs({ wa, wb }) do
    vim.api.nvim_win_call(w, function()
      vim.wo.wrap = false
      vim.cmd("diffthis")
    end)
  end
  vim.wo[wr].diff = false
  vim.wo[wr].wrap = false
  vim.wo[wr].foldenable = false
  return { a = wa, b = wb, report = wr }
end

--- <CR> in the report or a context: to the entry of the line under the cursor, in the tree view.
function M.jump()
  local buf = vim.api.nvim_get_current_buf()
  local s = sessions.sessions[vim.b[buf].sessiond_path or ""]
  local id = view.entry_at(buf)
  if not s or not id then
    return client.notify("put the cursor on a line of the report naming an entry", vim.log.levels.WARN)
  end
  -- The tree opens in the tab page the comparison came from when it shows there.
  require("sessiond.tree").reveal(s, id)
end

local function report_mappings(buf)
  local maps = require("sessiond.config").options.mappings or {}
  local jump = maps.context or "<CR>"
  if jump and jump ~= "" then
    vim.keymap.set("n", jump, M.jump, { buffer = buf, nowait = true, silent = true,
      desc = "sessiond: jump to this entry in the tree view" })
  end
  if maps.close and maps.close ~= "" then
    vim.keymap.set("n", maps.close, "<Cmd>tabclose<CR>", { buffer = buf, nowait = true, silent = true,
      desc = "sessiond: close the comparison" })
  end
end

--- Compares leaf `a` (default: the leaf under the cursor) with leaf `b` (default: the active
--- leaf) of the current buffer's session; cb(err, {result, wins, bufs}).
function M.diff(a, b, cb)
  cb = cb or function() end
  local under = cursor_leaf()
  sessions.resolve(function(err, s)
    if err then
      fail(err)
      return cb(err)
    end
    a = (a and a ~= "") and a or under
    b = (b and b ~= "") and b or sessions.active_leaf(s)
    if not a or a == vim.NIL or not b or b == vim.NIL then
      local e = { message = "diff needs a leaf: put the cursor on one in :SessiondTree, or give its id (:SessiondDiff A [B], <Tab> completes)" }
      fail(e)
      return cb(e)
    end
    if not client.offers("session/compareBranches") and client.ready then
      local e = { message = "this sessiond does not offer session/compareBranches; update sessiond to use :SessiondDiff" }
      fail(e)
      return cb(e)
    end
    local results, left, first_err = {}, 3, nil
    local function done()
      left = left - 1
      if left > 0 then
        return
      end
      if first_err then
        fail(first_err)
        return cb(first_err)
      end
      local actions = require("sessiond.actions")
      local bufs = {}
      for _, side in ipairs({ "a", "b" }) do
        local buf, made = view.buffer("diff-" .. side, s.path, "markdown")
        if made then
          report_mappings(buf)
        end
        local lines, ids = actions.render_context(results[side], s)
        view.set_lines(buf, lines, ids)
        vim.b[buf].sessiond_leaf = results[side].leafId
        bufs[side] = buf
      end
      local rbuf, created = view.buffer("compare", s.path, "sessiondcompare")
      if created then
        report_mappings(rbuf)
      end
      local lines, ids = M.render(results.report, s)
      view.set_lines(rbuf, lines, ids)
      bufs.report = rbuf
      local wins = layout(s.path, bufs)
      vim.api.nvim_set_current_win(wins.report)
      vim.api.nvim_win_set_cursor(wins.report, { 1, 0 })
      local r = results.report
      client.notify(("compared %s with %s: fork point %s, %s on A only, %s on B only"):format(a, b,
        str(r.forkPointId), count(#(r.onlyA or {}), "entry", "entries"), count(#(r.onlyB or {}), "entry", "entries")))
      vim.api.nvim_exec_autocmds("User", { pattern = "SessiondDiffShown", data = { path = s.path, leafA = a, leafB = b } })
      cb(nil, { result = r, wins = wins, bufs = bufs })
    end
    local function collect(key)
      return function(e, r)
        if e then
          first_err = first_err or e
        else
          results[key] = r
        end
        done()
      end
    end
    client.request("session/compareBranches", { path = s.path, leafA = a, leafB = b }, collect("report"))
    client.request("session/contextAt", { path = s.path, leafId = a, fields = "full" }, collect("a"))
    client.request("session/contextAt", { path = s.path, leafId = b, fields = "full" }, collect("b"))
  end)
end

return M
