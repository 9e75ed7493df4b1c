-- sessiond for Neovim: starts `sessiond serve` with the built-in LSP client and offers
-- :SessiondOpen, :SessiondContext, :SessiondTree and :SessiondExplain, following open
-- sessions live through session/didChange. Methods and shapes: protocol/README.md.
local M = {}

M.config = {
  cmd = { "sessiond", "serve" },
  -- Session roots (initializationOptions.roots); empty: the daemon's default.
  roots = nil,
}

-- Latest known state per session path: { entryCount, leafId, leaves, revision }.
M.sessions = {}

local function notify(msg, level)
  vim.notify("sessiond: " .. msg, level or vim.log.levels.INFO)
end

local function on_did_change(_, params)
  local s = M.sessions[params.path] or {}
  s.entryCount, s.leafId, s.leaves, s.revision =
    params.entryCount, params.leafId, params.leaves, params.revision
  s.changes = (s.changes or 0) + 1
  M.sessions[params.path] = s
  vim.api.nvim_exec_autocmds("User", { pattern = "SessiondDidChange", data = params })
end

local function on_did_reload(_, params)
  local live = (M.sessions[params.path] or {}).liveMode
  M.sessions[params.path] = {
    entryCount = params.entryCount, leafId = params.leafId,
    leaves = params.leaves, revision = params.revision, liveMode = live,
  }
  notify(params.path .. " reloaded (" .. params.reason .. ")")
  vim.api.nvim_exec_autocmds("User", { pattern = "SessiondDidReload", data = params })
end

local function on_did_corrupt(_, params)
  notify(string.format("%s: corrupt line %d (%s)", params.path, params.line, params.kind),
    vim.log.levels.WARN)
end

local function on_file_missing(_, params)
  local s = M.sessions[params.path] or {}
  s.missingSince = params.since
  M.sessions[params.path] = s
  notify(params.path .. " is gone (deleted or moved); keeping its last known state",
    vim.log.levels.WARN)
end

local function on_file_restored(_, params)
  local s = M.sessions[params.path] or {}
  s.missingSince = nil
  M.sessions[params.path] = s
  notify(params.path .. " is back")
end

local function on_did_change_live_mode(_, params)
  local s = M.sessions[params.path] or {}
  s.liveMode = params.liveMode
  M.sessions[params.path] = s
  if params.liveMode ~= "events" then
    notify(params.path .. " is no longer followed live (" .. params.liveMode .. ")",
      vim.log.levels.WARN)
  end
end

M.handlers = {
  ["session/didChange"] = on_did_change,
  ["session/didReload"] = on_did_reload,
  ["session/didCorrupt"] = on_did_corrupt,
  ["session/fileMissing"] = on_file_missing,
  ["session/fileRestored"] = on_file_restored,
  ["session/didChangeLiveMode"] = on_did_change_live_mode,
}

--- Merges options into M.config and defines the commands.
function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", M.config, opts or {})
  vim.api.nvim_create_user_command("SessiondOpen", function(a)
    M.open(a.args ~= "" and a.args or nil)
  end, { nargs = "?", complete = "file" })
  vim.api.nvim_create_user_command("SessiondContext", function(a)
    M.show_context(a.args ~= "" and a.args or nil)
  end, { nargs = "?" })
  vim.api.nvim_create_user_command("SessiondTree", function()
    M.show_tree()
  end, {})
  vim.api.nvim_create_user_command("SessiondExplain", function(a)
    M.show_explain(a.fargs[1], a.fargs[2])
  end, { nargs = "+" })
end

--- Starts (or reuses) the client; returns it.
function M.client()
  if M.client_id then
    local c = vim.lsp.get_client_by_id(M.client_id)
    if c then
      return c
    end
  end
  local init_options = M.config.roots and { roots = M.config.roots } or vim.empty_dict()
  M.client_id = vim.lsp.start({
    name = "sessiond",
    cmd = M.config.cmd,
    root_dir = vim.uv.cwd(),
    init_options = init_options,
    handlers = M.handlers,
  }, { reuse_client = function(c, conf) return c.name == conf.name end })
  local c = M.client_id and vim.lsp.get_client_by_id(M.client_id)
  -- Requests sent before the initialize answer would be refused (-32002).
  if c then
    local stopped = function()
      if vim.fn.has("nvim-0.11") == 1 then
        return c:is_stopped()
      end
      return c.is_stopped()
    end
    vim.wait(10000, function() return c.initialized or stopped() end, 5)
  end
  return c
end

--- Sends a request and waits for the answer: returns result, err.
function M.request(method, params, timeout_ms)
  local c = M.client()
  if not c then
    return nil, { message = "sessiond did not start" }
  end
  local resp
  if vim.fn.has("nvim-0.11") == 1 then
    resp = c:request_sync(method, params, timeout_ms or 10000, 0)
  else
    resp = c.request_sync(method, params, timeout_ms or 10000, 0)
  end
  if not resp then
    return nil, { message = method .. ": no answer" }
  end
  return resp.result, resp.err
end

M.current = nil

--- session/open for `path` (default: the current buffer's file).
function M.open(path)
  path = path or vim.api.nvim_buf_get_name(0)
  local result, err = M.request("session/open", { path = path })
  if err then
    notify(err.message, vim.log.levels.ERROR)
    return nil, err
  end
  M.current = result.path
  M.sessions[result.path] = {
    entryCount = result.entryCount, leafId = result.leafId,
    leaves = result.leaves, revision = result.revision, liveMode = result.liveMode,
  }
  notify(string.format("%s: %d entries, %d leaves", result.name or result.sessionId,
    result.entryCount, #result.leaves))
  return result
end

--- session/contextAt for the current session at `leaf` (default leaf when nil).
function M.context(leaf, opts)
  local params = vim.tbl_extend("force", { path = M.current, leafId = leaf }, opts or {})
  return M.request("session/contextAt", params)
end

--- session/tree for the current session.
function M.tree(from_id)
  return M.request("session/tree", { path = M.current, fromId = from_id })
end

--- session/explain for the current session.
function M.explain(entry_id, leaf)
  return M.request("session/explain", { path = M.current, entryId = entry_id, leafId = leaf })
end

local function scratch(title, lines)
  vim.cmd("botright new")
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "wipe"
  vim.api.nvim_buf_set_name(buf, title)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
end

function M.show_context(leaf)
  local r, err = M.context(leaf, { fields = "previews" })
  if err then
    return notify(err.message, vim.log.levels.ERROR)
  end
  local lines = { string.format("leaf %s · %d messages · ~%d tokens",
    tostring(r.leafId), r.messageCount, r.tokenEstimate) }
  for i, m in ipairs(r.messages) do
    table.insert(lines, string.format("%4d %-8s %-17s %s", i - 1, r.messageEntryIds[i], m.role, m.preview))
  end
  scratch("sessiond://context", lines)
end

function M.show_tree()
  local r, err = M.tree()
  if err then
    return notify(err.message, vim.log.levels.ERROR)
  end
  local lines = {}
  for _, n in ipairs(r.nodes) do
    table.insert(lines, string.format("%s %-17s %s%s", n.id, n.role or n.type, n.preview,
      n.label and (" [" .. n.label .. "]") or ""))
  end
  scratch("sessiond://tree", lines)
end

function M.show_explain(entry_id, leaf)
  local r, err = M.explain(entry_id, leaf)
  if err then
    return notify(err.message, vim.log.levels.ERROR)
  end
  -- The daemon's sentence: the words of `sessiond explain`.
  notify(r.text)
end

return M
