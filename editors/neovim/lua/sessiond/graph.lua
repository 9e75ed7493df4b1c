-- sessiond.graph: the branch graph as text (`git log --graph` lanes) in a buffer,
-- `sessiond://graph/PATH`, drawn from the daemon's session/graph: one line per entry or fold of
-- a single-child run, ● for the entries that reach the model at the active leaf, ○ for the rest
-- of its path. <CR> jumps to the entry of the line in the tree view; gf on a line that links to
-- another transcript (a Claude Code tool call's "↳ subagent", a subagent's "started by" line)
-- opens that transcript. Follows the session.
local client = require("sessiond.client")
local config = require("sessiond.config")
local sessions = require("sessiond.sessions")
local view = require("sessiond.view")

local M = {}

local function fail(err)
  client.notify(type(err) == "table" and err.message or tostring(err), vim.log.levels.ERROR)
end

-- path → the leaf the open graph view highlights (nil: the active leaf).
local leaf_of = {}

-- bufnr → {lnum → path}: the transcript a line links to (the subagent's a tool call started,
-- or, in a subagent's graph, the transcript that started it).
local links = {}

--- A transcript path as the daemon names it, absolute (a relative one is the session's sibling).
local function absolute(p, session_path)
  if p:sub(1, 1) == "/" then
    return p
  end
  return vim.fs.joinpath(vim.fs.dirname(session_path), p)
end

--- Draws session/graph's `lines` into `buf`, each line knowing its entry and the transcript
--- it links to.
function M.draw(buf, r)
  local session_path = vim.b[buf].sessiond_path or ""
  local subagent_of = {}
  for _, n in ipairs(r.nodes or {}) do
    if type(n.subagent) == "table" and type(n.subagent.path) == "string" then
      subagent_of[n.id] = absolute(n.subagent.path, session_path)
    end
  end
  local parent = type(r.parent) == "table" and type(r.parent.path) == "string" and absolute(r.parent.path, session_path) or nil
  local text, ids, linked = {}, {}, {}
  for i, l in ipairs(r.lines or {}) do
    text[i] = l.text
    if type(l.entryId) == "string" then
      ids[i] = l.entryId
      linked[i] = subagent_of[l.entryId]
    elseif parent and l.text:match("^subagent agent%-") then
      linked[i] = parent
    end
  end
  links[buf] = linked
  view.set_lines(buf, text, ids)
end

--- The transcript the line under the cursor links to, or nil.
function M.link_at(buf, lnum)
  return (links[buf] or {})[lnum or vim.api.nvim_win_get_cursor(0)[1]]
end

--- Opens the transcript the graph line under the cursor links to (a subagent's, or the one
--- that started this subagent) in its tree view.
function M.open_link()
  local buf = vim.api.nvim_get_current_buf()
  local target = M.link_at(buf)
  if not target then
    return fail("put the cursor on a line that links to a transcript (↳ subagent, or a subagent's \"started by\" line)")
  end
  require("sessiond.actions").tree(target)
  vim.api.nvim_exec_autocmds("User", { pattern = "SessiondGraphLinkOpened", data = { path = vim.b[buf].sessiond_path, target = target } })
end

--- Fetches and draws the graph of `s` into its open buffer; cb(err, result). session/graph
--- comes in pages (like session/tree): they are asked for in turn, from `nextOffset`, and the
--- result holds every page's nodes and lines.
function M.refresh(s, cb)
  cb = cb or function() end
  local params = { path = s.path }
  local leaf = leaf_of[s.path] or sessions.active_leaf(s)
  if leaf ~= nil and leaf ~= vim.NIL then
    params.leafId = leaf
  end
  local whole
  local function page(offset)
    params.offset = offset
    client.request("session/graph", params, function(err, r)
      if err then
        return cb(err)
      end
      if whole == nil then
        whole = r
      else
        vim.list_extend(whole.nodes, r.nodes or {})
        vim.list_extend(whole.lines, r.lines or {})
        whole.revision = r.revision
      end
      if type(r.nextOffset) == "number" then
        return page(r.nextOffset)
      end
      whole.nextOffset = vim.NIL
      local buf = view.existing("graph", s.path)
      if buf then
        M.draw(buf, whole)
      end
      vim.api.nvim_exec_autocmds("User", { pattern = "SessiondGraphUpdated", data = { path = s.path } })
      cb(nil, whole)
    end)
  end
  page(0)
end

--- Opens (or focuses) the graph view of `s` highlighting the context at `leaf` (nil: the
--- active leaf); cb(err, buf).
function M.show(s, leaf, cb)
  cb = cb or function() end
  leaf_of[s.path] = (leaf and leaf ~= "") and leaf or nil
  local buf, created = view.buffer("graph", s.path, "sessiondgraph")
  if created then
    M.apply_mappings(buf)
  end
  local opts = config.options.graph
  local win = view.show(buf, opts.split, opts.width)
  vim.wo[win].wrap = false
  vim.wo[win].foldenable = false
  M.refresh(s, function(err)
    if err then
      fail(err)
      return cb(err)
    end
    cb(nil, buf)
  end)
end

--- Jumps from the graph line under the cursor to its entry in the tree view (opened if
--- needed; a folded run of the tree is opened at it).
function M.jump_to_tree()
  local buf = vim.api.nvim_get_current_buf()
  local path = vim.b[buf].sessiond_path
  local id = view.entry_at(buf)
  if not path or not id then
    return fail("put the cursor on a line of the graph with an entry")
  end
  local s = sessions.sessions[path]
  if not s then
    return fail("the session of this graph is not open: run :SessiondOpen " .. path)
  end
  require("sessiond.tree").reveal(s, id, function(err)
    if not err then
      vim.api.nvim_exec_autocmds("User", { pattern = "SessiondGraphJumped", data = { path = path, id = id } })
    end
  end)
end

--- The graph view's mappings (config.graph.mappings; false disables one).
function M.apply_mappings(buf)
  local maps = config.options.graph.mappings or {}
  local actions = {
    jump = { "jump to this entry in the tree view", M.jump_to_tree },
    subagent = { "open the transcript this line links to (a subagent's, or the one that started it)", M.open_link },
    refresh = { "fetch the graph again", function()
      local s = sessions.sessions[vim.b.sessiond_path]
      if s then
        M.refresh(s, function(err)
          if err then
            fail(err)
          end
        end)
      end
    end },
    close = { "close the view", function() view.close() end },
  }
  for name, a in pairs(actions) do
    local lhs = maps[name]
    if lhs and lhs ~= "" then
      vim.keymap.set("n", lhs, a[2], { buffer = buf, nowait = true, silent = true, desc = "sessiond: " .. a[1] })
    end
  end
end

-- Follow: redraw an open graph view when its session changes.
local pending = {}
sessions.listen(function(event, path)
  if (event == "change" and not config.options.follow) or event == "open" then
    return
  end
  if not view.existing("graph", path) then
    return
  end
  sessions.after_burst(pending, path, function()
    local s = sessions.sessions[path]
    if s and view.existing("graph", path) then
      M.refresh(s, function(err)
        if err then
          client.notify(err.message, vim.log.levels.WARN)
        end
      end)
    end
  end)
end)

return M
