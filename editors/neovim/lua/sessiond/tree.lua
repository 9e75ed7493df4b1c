-- sessiond.tree: the session tree as a buffer (filetype `sessiondtree`).
--
-- The whole session is fetched page by page through session/tree (a first page from the
-- roots, then every `next` item — `childrenOf` or `after` — with the same depth and limit,
-- until no page names more), so every entry is a line. The drawing follows `sessiond tree`
-- and pi's /tree: a chain of entries with one child each stays at one indentation; where an
-- entry has several children each child starts a branch (├─ / └─) one level deeper. Runs of
-- three or more entries between landmarks (roots, branch points and the first entry of each
-- branch, leaves, the default and active leaves, labelled entries, compactions, branch
-- summaries, session names) are folds, closed at first, counted by type in the fold text.
--
-- The view follows its session: a didChange or didReload fetches the tree again (bursts are
-- gathered for `follow_delay_ms`) and redraws it with the cursor kept on its entry and the
-- folds the user opened kept open.
local client = require("sessiond.client")
local config = require("sessiond.config")
local sessions = require("sessiond.sessions")
local view = require("sessiond.view")

local M = {}

-- The largest page the daemon serves; depth as deep as a page can reach.
local LIMIT = 10000
local DEPTH = 10000

-- path → {nodes = {id → node}, order = {ids in arrival order}, children = {id → {ids}},
-- roots = {ids}, revision, complete}
M.data = {}
-- bufnr → {folds = {{first, last, text}}, level = {lnum → foldexpr value}}
local folds = {}
local ns = vim.api.nvim_create_namespace("sessiond.tree")
local generation = {} -- path → fetch counter: a newer fetch wins

--- Fetches the whole tree of `path`: cb(err, data). Pages are requested one after another.
function M.fetch(path, cb)
  generation[path] = (generation[path] or 0) + 1
  local gen = generation[path]
  local nodes, order, roots, revision = {}, {}, nil, nil
  local todo = { {} }
  local pages = 0
  local function step()
    local start = table.remove(todo, 1)
    if not start then
      -- Children in pi's order: the page's list when it gave one, else arrival order.
      local children = {}
      for _, id in ipairs(order) do
        local n = nodes[id]
        if n.children then
          children[id] = n.children
        end
      end
      for _, id in ipairs(order) do
        local p = nodes[id].parentId
        if p and p ~= vim.NIL and nodes[p] and not nodes[p].children then
          children[p] = children[p] or {}
          table.insert(children[p], id)
        end
      end
      if not roots then
        roots = {}
        for _, id in ipairs(order) do
          local p = nodes[id].parentId
          if not p or p == vim.NIL then
            table.insert(roots, id)
          end
        end
      end
      local data = {
        nodes = nodes, order = order, children = children, roots = roots,
        revision = revision, pages = pages, count = #order,
      }
      if gen == generation[path] then
        M.data[path] = data
      end
      return cb(nil, data)
    end
    local params = { path = path, depth = DEPTH, limit = LIMIT }
    for k, v in pairs(start) do
      params[k] = v
    end
    client.request("session/tree", params, function(err, page)
      if err then
        return cb(err)
      end
      if gen ~= generation[path] then
        return cb({ message = "superseded", superseded = true })
      end
      pages = pages + 1
      revision = page.revision
      if page.roots then
        roots = page.roots
      end
      for _, n in ipairs(page.nodes) do
        if not nodes[n.id] then
          table.insert(order, n.id)
        end
        nodes[n.id] = n
      end
      for _, nx in ipairs(page.next or {}) do
        table.insert(todo, nx)
      end
      step()
    end)
  end
  step()
end

local function is_nil(v)
  return v == nil or v == vim.NIL
end

--- The type column of an entry: a message's role, else the entry type.
function M.kind(n)
  if n.type == "message" and not is_nil(n.role) then
    return n.role
  end
  return n.type
end

local function set_of(list)
  local s = {}
  for _, v in ipairs(list or {}) do
    s[v] = true
  end
  return s
end

--- Ids from the leaf `leaf` up to its root (a set), using the parent links of `data`.
function M.path_to(data, leaf)
  local on = {}
  local id = leaf
  local guard = 0
  while id and not is_nil(id) and data.nodes[id] and guard <= data.count do
    on[id] = true
    id = data.nodes[id].parentId
    guard = guard + 1
  end
  return on
end

--- Draws `data` (from fetch) for session `s`: returns {lines, ids (lnum → id), folds
--- ({first, last, text}), marks ({lnum, col, end_col, hl})}. Pure: no buffers.
function M.render(data, s, opts)
  opts = opts or {}
  local min_fold = opts.min_fold or 3
  local lines, ids, marks = {}, {}, {}
  local leaves = set_of(s.leaves)
  local default_leaf = s.leafId
  local active = sessions.active_leaf(s)
  local on_path = M.path_to(data, active)
  local width = 4
  for _, n in pairs(data.nodes) do
    width = math.max(width, math.min(24, #M.kind(n)))
  end

  local branch_points, leaf_count = 0, 0
  for _, id in ipairs(data.order) do
    local c = data.children[id]
    if c and #c > 1 then
      branch_points = branch_points + 1
    end
  end
  for _ in pairs(leaves) do
    leaf_count = leaf_count + 1
  end
  table.insert(lines, ("%s · %s · %s · %s"):format(sessions.title(s), sessions.count(data.count, "entry", "entries"),
    sessions.count(leaf_count, "leaf", "leaves"), sessions.count(branch_points, "branch point")))
  local head = ("resume leaf %s (%s)"):format(is_nil(default_leaf) and "-" or default_leaf,
    sessions.default_leaf_text(s))
  if s.activeLeaf and s.activeLeaf ~= default_leaf then
    head = head .. (" · active leaf %s"):format(s.activeLeaf)
  end
  if type(s.agent) == "table" then
    head = head .. (" · agent running (%s, pid %s)"):format(tostring(s.agent.command), tostring(s.agent.pid))
  end
  if s.missingSince then
    head = head .. " · file missing since " .. s.missingSince
  end
  if s.corrupt then
    head = head .. (" · corrupt at line %d"):format(s.corrupt.line)
  end
  table.insert(lines, head)

  local landmark = {}
  local function parent_children(n)
    if is_nil(n.parentId) then
      return nil
    end
    local pc = data.children[n.parentId]
    return pc and #pc or 0
  end
  local function emit(id, prefix)
    local n = data.nodes[id]
    local kind = M.kind(n)
    -- Marks and the label go before the preview (up to 80 characters), where a window of
    -- any width shows them: "id kind ◀ resume leaf [label] preview".
    local line = prefix .. id .. " " .. kind .. string.rep(" ", width - #kind) .. " "
    local tags = {}
    if id == default_leaf then
      table.insert(tags, "resume leaf")
    elseif leaves[id] then
      table.insert(tags, "leaf")
    end
    if s.activeLeaf and id == s.activeLeaf and id ~= default_leaf then
      table.insert(tags, 1, "active")
    end
    if #tags > 0 then
      line = line .. "◀ " .. table.concat(tags, ", ") .. "  "
    end
    if not is_nil(n.label) then
      line = line .. "[" .. n.label .. "] "
    end
    line = line .. (n.preview or "")
    table.insert(lines, line)
    local lnum = #lines
    ids[lnum] = id
    local nc = data.children[id] and #data.children[id] or (n.childCount or 0)
    landmark[lnum] = nc ~= 1
      or parent_children(n) ~= 1
      or id == default_leaf
      or id == active
      or not is_nil(n.label)
      or n.type == "compaction"
      or n.type == "branch_summary"
      or n.type == "session_info"
    if on_path[id] then
      table.insert(marks, { lnum, #prefix, #prefix + #id, "SessiondTreeActivePath" })
    end
  end

  -- Depth-first with an explicit stack: a 100k-entry chain must not recurse.
  local stack = {}
  local function push_children(list, rest)
    for i = #list, 1, -1 do
      local last = i == #list
      table.insert(stack, { list[i], rest .. (last and "└─ " or "├─ "), rest .. (last and "   " or "│  ") })
    end
  end
  if #data.roots == 1 then
    table.insert(stack, { data.roots[1], "", "" })
  else
    push_children(data.roots, "")
  end
  while #stack > 0 do
    local item = table.remove(stack)
    local id, first, rest = item[1], item[2], item[3]
    local prefix = first
    while id do
      emit(id, prefix)
      prefix = rest
      local c = data.children[id] or {}
      if #c == 1 then
        id = c[1]
      else
        push_children(c, rest)
        id = nil
      end
    end
  end
  if data.count < (s.entryCount or 0) then
    table.insert(lines, ("… %s not shown yet (they arrived while the tree was read; R fetches again)")
      :format(sessions.count(s.entryCount - data.count, "entry", "entries")))
  end

  -- Folds: maximal runs of non-landmark lines, at least min_fold long.
  local fold_list = {}
  local lnum = 3
  while lnum <= #lines do
    if ids[lnum] and not landmark[lnum] then
      local first = lnum
      while ids[lnum + 1] and not landmark[lnum + 1] do
        lnum = lnum + 1
      end
      if lnum - first + 1 >= min_fold then
        local counts, kinds, seen = {}, {}, {}
        for l = first, lnum do
          local k = M.kind(data.nodes[ids[l]])
          if not counts[k] then
            table.insert(kinds, k)
            seen[k] = #kinds
          end
          counts[k] = (counts[k] or 0) + 1
        end
        -- Most frequent first; ties in order of appearance (as `sessiond tree` counts them).
        table.sort(kinds, function(a, b)
          if counts[a] ~= counts[b] then
            return counts[a] > counts[b]
          end
          return seen[a] < seen[b]
        end)
        local parts = {}
        for i = 1, math.min(3, #kinds) do
          table.insert(parts, counts[kinds[i]] .. " " .. kinds[i])
        end
        if #kinds > 3 then
          table.insert(parts, "…")
        end
        local prefix = lines[first]:match("^([│├└─ ]*)") or ""
        prefix = prefix:gsub("├─ ", "│  "):gsub("└─ ", "   ")
        table.insert(fold_list, {
          first, lnum,
          ("%s┆ %s folded: %s"):format(prefix, sessions.count(lnum - first + 1, "entry", "entries"),
            table.concat(parts, ", ")),
        })
      end
    end
    lnum = lnum + 1
  end
  return { lines = lines, ids = ids, folds = fold_list, marks = marks }
end

--- foldexpr of tree buffers (v:lua): level 1 inside a fold, ">1" at its first line.
function M.foldexpr(lnum)
  local f = folds[vim.api.nvim_get_current_buf()]
  return f and f.level[lnum] or "0"
end

--- foldtext of tree buffers (v:lua): "┆ N entries folded: counts by type".
function M.foldtext()
  local f = folds[vim.api.nvim_get_current_buf()]
  local start = vim.v.foldstart
  if f and f.text[start] then
    return f.text[start]
  end
  for _, x in ipairs(f and f.list or {}) do
    if x[1] <= start and start <= x[2] then
      return x[3]
    end
  end
  return vim.fn.foldtext()
end

--- Sets the window options a tree window needs (folds through our expr).
function M.setup_window(win)
  vim.wo[win].foldmethod = "expr"
  vim.wo[win].foldexpr = "v:lua.require'sessiond.tree'.foldexpr(v:lnum)"
  vim.wo[win].foldtext = "v:lua.require'sessiond.tree'.foldtext()"
  vim.wo[win].foldenable = true
  vim.wo[win].foldlevel = 0
  vim.wo[win].wrap = false
  vim.wo[win].number = false
  vim.wo[win].relativenumber = false
  vim.wo[win].cursorline = true
  vim.wo[win].list = false
  vim.wo[win].fillchars = "fold: "
end

-- Draws `r` (a render) into `buf`, keeping each window's cursor on its entry and the folds
-- the user opened open.
local function draw(buf, r)
  local before = {}
  local old = folds[buf]
  for _, win in ipairs(view.windows(buf)) do
    local cur = vim.api.nvim_win_get_cursor(win)
    local info = {
      win = win,
      id = view.entry_at(buf, cur[1]),
      lnum = cur[1],
      col = cur[2],
      off = cur[1] - vim.fn.line("w0", win),
      open = {},
    }
    if old then
      vim.api.nvim_win_call(win, function()
        for _, f in ipairs(old.list) do
          if vim.fn.foldclosed(f[1]) == -1 then
            local id = view.entry_at(buf, f[1])
            if id then
              info.open[id] = true
            end
          end
        end
      end)
    end
    table.insert(before, info)
  end

  local level, text = {}, {}
  for _, f in ipairs(r.folds) do
    level[f[1]] = ">1"
    for l = f[1] + 1, f[2] do
      level[l] = "1"
    end
    text[f[1]] = f[3]
  end
  folds[buf] = { level = level, text = text, list = r.folds }
  view.set_lines(buf, r.lines, r.ids)
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for _, m in ipairs(r.marks) do
    vim.api.nvim_buf_set_extmark(buf, ns, m[1] - 1, m[2], { end_col = m[3], hl_group = m[4] })
  end

  for _, b in ipairs(before) do
    if vim.api.nvim_win_is_valid(b.win) then
      vim.api.nvim_win_call(b.win, function()
        vim.cmd("silent! normal! zx")
        for _, f in ipairs(r.folds) do
          if b.open[view.entry_at(buf, f[1])] then
            vim.cmd(("silent! %dfoldopen"):format(f[1]))
          end
        end
        local lnum = (b.id and view.line_of(buf, b.id)) or math.min(b.lnum, #r.lines)
        vim.api.nvim_win_set_cursor(b.win, { lnum, b.col })
        -- Keep the entry where it was on screen.
        local top = math.max(1, lnum - b.off)
        vim.fn.winrestview({ topline = top })
      end)
    end
  end
end

--- Fetches and draws the tree of session `s` into its buffer; cb(err) when done.
function M.refresh(s, cb)
  cb = cb or function() end
  local buf = view.existing("tree", s.path)
  M.fetch(s.path, function(err, data)
    if err then
      if not err.superseded then
        cb(err)
      end
      return
    end
    buf = view.existing("tree", s.path)
    if buf then
      draw(buf, M.render(data, sessions.sessions[s.path] or s, { min_fold = config.options.tree.min_fold }))
    end
    cb(nil, data)
  end)
end

--- Opens (or focuses) the tree view of `s` and draws it; cb(err, buf).
function M.show(s, cb)
  cb = cb or function() end
  local buf, created = view.buffer("tree", s.path, "sessiondtree")
  if created then
    -- Also without `filetype plugin on`.
    require("sessiond.mappings").apply(buf, "tree")
  end
  local opts = config.options.tree
  local win = view.show(buf, opts.split, opts.width)
  M.setup_window(win)
  if vim.api.nvim_buf_line_count(buf) <= 1 then
    view.set_lines(buf, { sessions.title(s) .. " · reading " .. (s.entryCount or 0) .. " entries…" }, {})
  end
  M.refresh(s, function(err)
    if err then
      client.notify(err.message, vim.log.levels.ERROR)
      return cb(err)
    end
    cb(nil, buf)
  end)
end

--- Shows the tree view of `s` (opened if needed) with the cursor on entry `id`, a folded run
--- opened at it; fires `User SessiondRevealed` {path, id}. cb(err, buf).
function M.reveal(s, id, cb)
  cb = cb or function() end
  M.show(s, function(err, tbuf)
    if err then
      return cb(err)
    end
    local lnum = view.line_of(tbuf, id)
    if not lnum then
      client.notify(id .. " is not in the tree view yet (R fetches it)", vim.log.levels.WARN)
      return cb({ message = id .. " is not in the tree view" })
    end
    local win = view.windows(tbuf)[1]
    vim.api.nvim_set_current_win(win)
    vim.cmd("normal! m'")
    vim.api.nvim_win_set_cursor(win, { lnum, 0 })
    vim.cmd("silent! normal! zv")
    vim.api.nvim_exec_autocmds("User", { pattern = "SessiondRevealed", data = { path = s.path, id = id } })
    cb(nil, tbuf)
  end)
end

-- Follow: redraw open tree views when their session changes.
local pending = {}
sessions.listen(function(event, path)
  if not config.options.follow and event == "change" then
    return
  end
  if event == "open" then
    -- Load the tree for id completion even without a view.
    if not M.data[path] and not view.existing("tree", path) then
      M.fetch(path, function() end)
    end
    return
  end
  sessions.after_burst(pending, path, function()
    local s = sessions.sessions[path]
    if not s then
      return
    end
    if view.existing("tree", path) then
      M.refresh(s, function(err)
        if err then
          client.notify(err.message, vim.log.levels.WARN)
        end
        vim.api.nvim_exec_autocmds("User", { pattern = "SessiondTreeUpdated", data = { path = path } })
      end)
    elseif M.data[path] then
      M.fetch(path, function() end)
    end
  end)
end)

-- Navigation over the loaded tree --------------------------------------------------------

--- The parent of `id`, or nil.
function M.parent(path, id)
  local d = M.data[path]
  local n = d and d.nodes[id]
  if n and not is_nil(n.parentId) then
    return n.parentId
  end
end

-- The child to follow downwards: the one on the active path, else the latest.
local function follow_child(d, s, id)
  local c = d.children[id] or {}
  if #c == 0 then
    return nil
  end
  local on = M.path_to(d, sessions.active_leaf(s))
  for _, k in ipairs(c) do
    if on[k] then
      return k
    end
  end
  return c[#c]
end

-- Walks down from `id` by follow_child: the first entry below it that `stop(d, entry)` holds
-- for (nil when none does) and the last entry reached, the leaf. Both nil without the tree.
local function walk_down(path, id, stop)
  local d, s = M.data[path], sessions.sessions[path]
  if not d or not s then
    return nil, nil
  end
  local last, cur = id, follow_child(d, s, id)
  while cur do
    if stop and stop(d, cur) then
      return cur, nil
    end
    last, cur = cur, follow_child(d, s, cur)
  end
  return nil, last
end

local function is_branch_point(d, id)
  return #(d.children[id] or {}) > 1
end

--- The first entry below `id` (down its line) with several children, or nil.
function M.next_branch_point(path, id)
  return (walk_down(path, id, is_branch_point))
end

--- The nearest entry above `id` with several children, or nil.
function M.prev_branch_point(path, id)
  local cur = M.parent(path, id)
  local d = M.data[path]
  while cur do
    if is_branch_point(d, cur) then
      return cur
    end
    cur = M.parent(path, cur)
  end
end

--- The leaf `id` leads to (along the active path where it can, else the latest child).
function M.leaf_below(path, id)
  local _, leaf = walk_down(path, id)
  return leaf
end

return M
