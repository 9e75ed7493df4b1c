-- sessiond.mappings: the buffer mappings of the tree and context views, from
-- setup({ mappings = … }) (false disables one). `g?` lists them.
local config = require("sessiond.config")

local M = {}

-- name → {description, function, tree = only in the tree view, write = the write it makes (not
-- offered on a session whose format does not take it)}
M.actions = {
  context = { "context at this entry (as the leaf)", function() require("sessiond.actions").context() end },
  explain = { "does this entry reach the model at the active leaf, and why", function() require("sessiond.actions").explain() end },
  fork = { "fork the path to this entry into a new session", function() require("sessiond.actions").fork(nil, false) end },
  fork_before = { "fork before this user message (to ask it again)", function() require("sessiond.actions").fork(nil, true) end },
  label = { "set or clear this entry's label", function() require("sessiond.actions").label() end, write = "label" },
  compact = { "compact the path to this entry (dry run, then confirm)", function() require("sessiond.actions").compact() end, write = "compact" },
  diff = { "compare this leaf with the active leaf (:SessiondDiff)", function() require("sessiond.compare").diff() end },
  rewind = { "rewind files to this entry (the dry run's diff first, then confirm)", function() require("sessiond.rewind").rewind() end, write = "rewind" },
  verify = { "check before resuming at this entry", function() require("sessiond.actions").verify() end },
  parent = { "jump to the parent entry", function() require("sessiond.actions").jump_parent() end, tree = true },
  next_branch = { "jump to the next branch point below", function() require("sessiond.actions").jump_next_branch() end, tree = true },
  prev_branch = { "jump to the branch point above", function() require("sessiond.actions").jump_prev_branch() end, tree = true },
  leaf = { "jump to the leaf this entry leads to", function() require("sessiond.actions").jump_leaf() end, tree = true },
  referenced = { "jump to the entry the last explain pointed to", function() require("sessiond.actions").jump_referenced() end, tree = true },
  refresh = { "fetch the view again", function() require("sessiond.actions").refresh() end },
  close = { "close the view", function() require("sessiond.view").close() end },
  help = { "list these mappings", function() require("sessiond.mappings").help() end },
}

local ORDER = {
  "context", "explain", "diff", "fork", "fork_before", "label", "compact", "rewind", "verify", "parent", "next_branch",
  "prev_branch", "leaf", "referenced", "refresh", "close", "help",
}

-- Whether action `a` is offered in a `kind` view of buffer `buf`'s session.
local function offered(a, kind, buf)
  if a.tree and kind ~= "tree" then
    return false
  end
  if a.write then
    local sessions = require("sessiond.sessions")
    local s = sessions.sessions[vim.b[buf].sessiond_path or ""]
    -- By format only: on a pi file of an older version the key stays, and says to fork first.
    return s == nil or sessions.supports({ format = s.format }, a.write)
  end
  return true
end

--- Sets the mappings on view buffer `buf` ("tree" or "context" view): the writes only where
--- the session's format takes them (a Claude Code transcript: fork only).
function M.apply(buf, kind)
  if buf == 0 then
    buf = vim.api.nvim_get_current_buf()
  end
  local maps = config.options.mappings or {}
  for _, name in ipairs(ORDER) do
    local a = M.actions[name]
    local lhs = maps[name]
    if lhs and lhs ~= "" and offered(a, kind, buf) then
      vim.keymap.set("n", lhs, a[2], { buffer = buf, nowait = true, silent = true, desc = "sessiond: " .. a[1] })
    end
  end
end

function M.help()
  local maps = config.options.mappings or {}
  local kind = vim.b.sessiond_view
  local buf = vim.api.nvim_get_current_buf()
  local lines = {}
  for _, name in ipairs(ORDER) do
    local a = M.actions[name]
    if maps[name] and offered(a, kind, buf) then
      table.insert(lines, ("%-6s %s"):format(maps[name], a[1]))
    end
  end
  vim.notify(table.concat(lines, "\n"), vim.log.levels.INFO)
end

return M
