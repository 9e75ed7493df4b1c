-- sessiond.listing: every session under the daemon's roots, as session/list gives them, kept
-- up to date from `session/didChangeList` (which the daemon sends once this client has
-- listed: a file copied under a root appears, a grown session's size and tokens change, a
-- removed one goes), and the sessions view that shows them: `sessiond://sessions/`, filetype
-- `sessiondlist`, one line per session grouped by agent, then project, as the picker orders
-- them (`:SessiondSessions`; <CR> opens the tree of the session under the cursor).
--
-- A row says the same thing wherever it is shown (this view and the picker use
-- actions.session_line): agent › project, name (and, for sessions that would otherwise read
-- alike, copies of one session, where the file is), entries and leaves, tokens, size, modified.
local client = require("sessiond.client")
local config = require("sessiond.config")
local sessions = require("sessiond.sessions")
local view = require("sessiond.view")

local M = {}

-- path → the row session/list (or a later didChangeList) gave for it.
M.rows = {}
-- The roots listed, canonical.
M.roots = {}
-- Whether M.rows holds a listing (the view lists on first show).
M.loaded = false
-- didChangeList notifications applied (for the user's configuration and tests).
M.applied = 0

local VIEW, PATH = "sessions", ""

local function actions()
  return require("sessiond.actions")
end

--- The rows, in the picker's order (by agent, then project, newest first).
function M.list()
  local list = vim.tbl_values(M.rows)
  return actions().group_sessions(list)
end

--- The view's lines and, line by line, the session path each shows (no buffers touched).
function M.render(list, roots)
  local lines, paths = {}, {}
  table.insert(lines, ("sessiond: %s under %s"):format(sessions.count(#list, "session"),
    table.concat(vim.tbl_map(tostring, roots or {}), ", ")))
  local maps = config.options.sessions.mappings or {}
  local keys = ("%s opens a tree · %s lists again"):format(tostring(maps.open), tostring(maps.refresh))
  if client.offers_notification("session/didChangeList") then
    table.insert(lines, "follows the roots as sessions appear, grow and go · " .. keys)
  else
    table.insert(lines, "this sessiond does not announce list changes · " .. keys)
  end
  local where = actions().tell_apart(list)
  for _, x in ipairs(list) do
    table.insert(lines, actions().session_line(x, where[x.path]))
    paths[#lines] = x.path
  end
  return lines, paths
end

--- Redraws the open view (the cursor stays on its session when it is still listed).
function M.redraw()
  local buf = view.existing(VIEW, PATH)
  if not buf then
    return
  end
  local win = view.windows(buf)[1]
  local at = win and view.entry_at(buf, vim.api.nvim_win_get_cursor(win)[1])
  local lines, paths = M.render(M.list(), M.roots)
  view.set_lines(buf, lines, paths)
  if win and at then
    local lnum = view.line_of(buf, at)
    if lnum then
      vim.api.nvim_win_set_cursor(win, { lnum, 0 })
    end
  end
  vim.api.nvim_exec_autocmds("User", { pattern = "SessiondListDrawn", data = { count = #lines - 2 } })
end

-- The rows being listed by M.load, root by root; nil when no listing is under way.
local building

--- Applies a change to `rows`: changed rows replace (or add) theirs, removed paths go.
local function apply_to(rows, params)
  for _, x in ipairs(type(params.changed) == "table" and params.changed or {}) do
    if type(x) == "table" and type(x.path) == "string" then
      rows[x.path] = x
    end
  end
  for _, p in ipairs(type(params.removed) == "table" and params.removed or {}) do
    rows[p] = nil
  end
end

--- Lists every root again (session/list of each, as the picker does): cb(err). A change
--- announced while the roots are listed applies to what is listed so far; a root's answer
--- that comes after it is the fresher and replaces that root's rows.
function M.load(cb)
  cb = cb or function() end
  client.when_ready(function(err)
    if err then
      return cb(err)
    end
    local roots = (client.info and client.info.roots) or {}
    local asks = #roots == 0 and { vim.empty_dict() } or vim.tbl_map(function(r)
      return { root = r }
    end, roots)
    local rows, listed, left, first_err = {}, {}, #asks, nil
    building = rows
    for _, params in ipairs(asks) do
      client.request("session/list", params, function(lerr, r)
        if lerr then
          first_err = first_err or lerr
        else
          table.insert(listed, r.root)
          for _, x in ipairs(r.sessions or {}) do
            rows[x.path] = x
          end
        end
        left = left - 1
        if left > 0 then
          return
        end
        if building == rows then
          building = nil
        end
        if #listed == 0 and first_err then
          return cb(first_err)
        end
        M.rows, M.loaded = rows, true
        M.roots = #roots > 0 and roots or listed
        M.redraw()
        cb(nil)
      end)
    end
  end)
end

--- Applies `session/didChangeList` params to the listing (once there is one) and redraws the
--- view; fires `User SessiondDidChangeList` with the params.
function M.apply(params)
  if building then
    apply_to(building, params)
  end
  if M.loaded then
    apply_to(M.rows, params)
    M.applied = M.applied + 1
    M.redraw()
  end
  vim.api.nvim_exec_autocmds("User", { pattern = "SessiondDidChangeList", data = params })
end

--- Opens (or focuses) the sessions view, listing the roots first; cb(err, buf).
function M.show(cb)
  cb = cb or function() end
  local buf, created = view.buffer(VIEW, PATH, "sessiondlist")
  if created then
    M.apply_mappings(buf)
    view.set_lines(buf, { "sessiond: listing the sessions under the roots…" }, {})
  end
  local win = view.show(buf, config.options.sessions.split, config.options.sessions.height)
  vim.wo[win].wrap = false
  vim.wo[win].foldenable = false
  M.load(function(err)
    if err then
      client.notify(err.message, vim.log.levels.ERROR)
      return cb(err)
    end
    cb(nil, buf)
  end)
end

--- Opens the tree of the session on the cursor's line.
function M.open_under_cursor()
  local path = view.entry_at()
  if not path then
    return client.notify("put the cursor on a session's line", vim.log.levels.ERROR)
  end
  sessions.open(path, {}, function(err, r)
    if err then
      return client.notify(err.message, vim.log.levels.ERROR)
    end
    require("sessiond.tree").show(sessions.sessions[r.path])
  end)
end

--- The view's mappings (config.sessions.mappings; false disables one).
function M.apply_mappings(buf)
  local maps = config.options.sessions.mappings or {}
  local list = {
    open = { "open the tree of this session", M.open_under_cursor },
    refresh = { "list the roots again", function()
      M.load(function(err)
        if err then
          client.notify(err.message, vim.log.levels.ERROR)
        end
      end)
    end },
    close = { "close the view", function() view.close() end },
  }
  for name, a in pairs(list) do
    local lhs = maps[name]
    if lhs and lhs ~= "" then
      vim.keymap.set("n", lhs, a[2], { buffer = buf, nowait = true, silent = true, desc = "sessiond: " .. a[1] })
    end
  end
end

-- A restarted daemon has not been listed by this client: list again, so that it sends
-- changes (and the view shows what the new daemon sees).
table.insert(client.on_restart, function()
  if M.loaded then
    M.load()
  end
end)

return M
