-- sessiond.commands: the user commands (defined by plugin/sessiond.lua, so they exist before
-- setup()) and the completion of entry ids.
local M = {}

local function actions()
  return require("sessiond.actions")
end

--- Entry ids of the current buffer's session starting with `lead`: leaves first, then
--- labelled entries, then the rest in file order (from the tree already loaded).
function M.complete_entry(lead)
  local sessions = require("sessiond.sessions")
  local tree = require("sessiond.tree")
  local path = sessions.path_of()
  if not path then
    return {}
  end
  local s = sessions.sessions[path]
  local d = tree.data[path]
  local out, seen = {}, {}
  local function add(id)
    if id and not seen[id] and id:sub(1, #lead) == lead then
      seen[id] = true
      table.insert(out, id)
    end
  end
  for _, id in ipairs(s.leaves or {}) do
    add(id)
  end
  if d then
    for _, id in ipairs(d.order) do
      local n = d.nodes[id]
      if n.label ~= nil and n.label ~= vim.NIL then
        add(id)
      end
    end
    for _, id in ipairs(d.order) do
      add(id)
    end
  end
  return out
end

local function complete_entry_arg(lead, line)
  -- Only the first argument is an id (the second of :SessiondExplain is a leaf id).
  local args = vim.split(line, "%s+", { trimempty = true })
  local n = #args - (lead == "" and 0 or 1)
  if n <= 2 then
    return M.complete_entry(lead)
  end
  return {}
end

M.commands = {
  SessiondOpen = {
    function(a) actions().open(a.args, a.bang) end,
    { bar = true, nargs = "?", complete = "file", bang = true, desc = "sessiond: open a session file (! reads a corrupt one leniently)" },
  },
  SessiondList = {
    function() actions().list() end,
    { bar = true, nargs = 0, desc = "sessiond: pick a session under the roots" },
  },
  SessiondSessions = {
    function() require("sessiond.listing").show() end,
    { bar = true, nargs = 0, desc = "sessiond: the sessions under the roots, kept up to date" },
  },
  SessiondTree = {
    function(a) actions().tree(a.args) end,
    { bar = true, nargs = "?", complete = "file", desc = "sessiond: the session tree" },
  },
  SessiondGraph = {
    function(a) actions().graph(a.args ~= "" and a.args or nil) end,
    { bar = true, nargs = "?", complete = complete_entry_arg, desc = "sessiond: the branch graph as text (context at a leaf marked)" },
  },
  SessiondContext = {
    function(a) actions().context(a.args ~= "" and a.args or nil) end,
    { bar = true, nargs = "?", complete = complete_entry_arg, desc = "sessiond: what the model sees at a leaf" },
  },
  SessiondExplain = {
    function(a) actions().explain(a.fargs[1], a.fargs[2]) end,
    { bar = true, nargs = "*", complete = complete_entry_arg, desc = "sessiond: whether an entry reaches the model, and why" },
  },
  SessiondDiff = {
    function(a) require("sessiond.compare").diff(a.fargs[1], a.fargs[2]) end,
    { bar = true, nargs = "*", complete = complete_entry_arg, desc = "sessiond: compare two leaves (default: the leaf under the cursor and the active leaf)" },
  },
  SessiondFork = {
    function(a) actions().fork(a.fargs[1], a.bang) end,
    { bar = true, nargs = "?", bang = true, complete = complete_entry_arg, desc = "sessiond: fork at an entry (! before it)" },
  },
  SessiondLabel = {
    function(a)
      local id = a.fargs[1]
      local text = a.args:gsub("^%s*%S+%s*", "", 1)
      actions().label(id, text, a.bang)
    end,
    { nargs = "*", bang = true, complete = complete_entry_arg, desc = "sessiond: label an entry (! clears it)" },
  },
  SessiondCompact = {
    function(a) actions().compact(a.fargs[1], a.bang) end,
    { bar = true, nargs = "?", bang = true, complete = complete_entry_arg, desc = "sessiond: compact the path to an entry" },
  },
  SessiondRewind = {
    function(a) require("sessiond.rewind").rewind(a.fargs[1], a.bang) end,
    { bar = true, nargs = "?", bang = true, complete = complete_entry_arg, desc = "sessiond: rewind files to an entry (! with drift)" },
  },
  SessiondVerify = {
    function(a) actions().verify(a.fargs[1]) end,
    { bar = true, nargs = "?", complete = complete_entry_arg, desc = "sessiond: check before resuming (quickfix)" },
  },
  SessiondSearch = {
    function(a) actions().search(a.args) end,
    { nargs = "+", desc = "sessiond: search the sessions (quickfix)" },
  },
  SessiondRestart = {
    function() actions().restart() end,
    { bar = true, nargs = 0, desc = "sessiond: restart the daemon and open the sessions again" },
  },
}

--- Defines every command (again: harmless).
function M.define()
  for name, c in pairs(M.commands) do
    vim.api.nvim_create_user_command(name, c[1], c[2])
  end
end

return M
