-- sessiond.sessions: the sessions this Neovim has open, kept up to date from the daemon's
-- notifications, and which session a command acts on (the one of the current buffer).
--
-- Listeners (the views) get ("change" | "reload" | "open", path, params) after the state is
-- updated; `User SessiondDidChange` / `SessiondDidReload` autocmds fire too, with the
-- notification params as `data`, for the user's own configuration.
local client = require("sessiond.client")
local config = require("sessiond.config")

local M = {}

-- path (canonical, as the daemon answers) → {path, format ("pi" | "claude-code"), name,
-- sessionId, leafId (the resume leaf: pi's last entry, the line `claude --resume` continues
-- from), leaves, entryCount, revision, liveMode, agent, allowCorrupt, activeLeaf (the leaf the
-- user picked; nil: the resume leaf), missingSince, corrupt, version (a pi header's `version`,
-- 1 when absent as pi reads it; nil for other formats and while the file is being created)}
M.sessions = {}
-- The session opened or acted on last: the fallback when the current buffer names none.
M.current = nil
M.listeners = {}
-- session/open requests in flight, and resolve() calls waiting for them.
M.opening = 0
M.waiting = {}

local notify = client.notify

local function fire(event, path, params)
  for _, f in ipairs(M.listeners) do
    local ok, err = pcall(f, event, path, params)
    if not ok then
      notify("internal error in a view: " .. tostring(err), vim.log.levels.ERROR)
    end
  end
end

--- Adds a listener fun(event, path, params).
function M.listen(f)
  table.insert(M.listeners, f)
end

--- Runs f() `follow_delay_ms` from now, unless a run for `path` is already waiting in `pending`
--- (a listener's own table): a burst of appended entries makes one redraw.
function M.after_burst(pending, path, f)
  if pending[path] then
    return
  end
  pending[path] = true
  vim.defer_fn(function()
    pending[path] = nil
    f()
  end, config.options.follow_delay_ms)
end

local function apply_open(r, allow_corrupt)
  local s = M.sessions[r.path] or {}
  s.path, s.name, s.sessionId = r.path, r.name, r.sessionId
  s.format = type(r.format) == "string" and r.format or "pi"
  s.leafId, s.leaves, s.entryCount, s.revision = r.leafId, r.leaves, r.entryCount, r.revision
  s.liveMode, s.agent, s.pending = r.liveMode, r.agent, r.pending
  s.allowCorrupt = allow_corrupt or s.allowCorrupt or nil
  s.diagnostics = r.diagnostics
  s.version = nil
  if s.format == "pi" and type(r.header) == "table" then
    s.version = type(r.header.version) == "number" and r.header.version or 1
  end
  s.missingSince = nil
  M.sessions[r.path] = s
  return s
end

--- `n` and the word for it: "1 entry", "2 entries" (`many` defaults to `one` .. "s").
function M.count(n, one, many)
  return ("%d %s"):format(n, n == 1 and one or (many or one .. "s"))
end

--- The session's display name: its name, else the file name.
function M.title(s)
  if s.name and s.name ~= vim.NIL and s.name ~= "" then
    return s.name
  end
  return vim.fs.basename(s.path)
end

-- How the agents that write sessions are named, and the order lists show them in.
M.AGENTS = { "pi", "claude-code" }
M.AGENT_TITLES = { pi = "pi", ["claude-code"] = "Claude Code" }

--- The display name of the agent that wrote a session of `format`.
function M.agent_title(format)
  return M.AGENT_TITLES[format] or tostring(format)
end

-- The writes each format takes (protocol/README.md, "unsupported for format"): a Claude Code
-- transcript is only read; a fork writes a new file and a rewind only the work tree.
local WRITES = {
  pi = { fork = true, label = true, compact = true, rewind = true },
  ["claude-code"] = { fork = true, rewind = true },
}

-- The pi session version sessiond writes to (older ones are only read; a fork is version 3).
M.WRITTEN_VERSION = 3

--- Whether a session of `s.format` (and, for pi, of its header's version) takes the write
--- `op` ("fork", "label", "compact", "rewind"). A fork writes a new file and a rewind writes only
--- the work tree, so every version takes them.
function M.supports(s, op)
  local w = WRITES[s and s.format or "pi"] or WRITES.pi
  if op ~= "fork" and op ~= "rewind" and s and s.version and s.version ~= M.WRITTEN_VERSION then
    return false
  end
  return w[op] == true
end

--- Why `op` is not offered on `s`, and what to do instead (for a refusal message); a pi file
--- of another version is refused in the daemon's own words.
function M.unsupported_text(s, op)
  if s.format == "pi" and s.version and s.version ~= M.WRITTEN_VERSION then
    return ("%s: %s is a version-%d session, only read (sessiond writes labels, names and entries to version-3 files); fork it to a version-3 file first (f, :SessiondFork)")
      :format(op, vim.fs.basename(s.path), s.version)
  end
  return ("%s: a %s session is read only (sessiond never writes to it); fork it (f, :SessiondFork) to continue in a new session")
    :format(op, M.agent_title(s.format))
end

--- The resume leaf's role, as the session's agent uses it.
function M.default_leaf_text(s)
  if s.format == "claude-code" then
    return "claude --resume continues here"
  end
  return "pi resumes here"
end

--- session/open of `path` (made absolute); cb(err, result).
function M.open(path, opts, cb)
  opts = opts or {}
  cb = cb or function() end
  if not path or path == "" then
    return cb({ message = "no file to open: run :SessiondOpen FILE (or :SessiondList)" })
  end
  path = vim.fn.fnamemodify(vim.fn.expand(path), ":p")
  local params = { path = path }
  if opts.allowCorrupt then
    params.allowCorrupt = true
  end
  M.opening = M.opening + 1
  client.request("session/open", params, function(err, r)
    M.opening = M.opening - 1
    if not err then
      local s = apply_open(r, opts.allowCorrupt)
      M.current = r.path
      fire("open", r.path, r)
      cb(nil, r, s)
    else
      cb(err)
    end
    if M.opening == 0 then
      local waiting = M.waiting
      M.waiting = {}
      for _, w in ipairs(waiting) do
        w()
      end
    end
  end)
end

-- The canonical path of a file buffer, if it is a file.
local function buffer_file(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  if name == "" or name:match("^%a[%w+.-]*://") then
    return nil
  end
  return vim.uv.fs_realpath(name) or name
end

--- The session of buffer `buf` (default: current), without asking the daemon: a view's
--- session, a session file that is open, else the last session. Returns path or nil.
function M.path_of(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  local p = vim.b[buf].sessiond_path
  if p and M.sessions[p] then
    return p
  end
  local f = buffer_file(buf)
  if f and M.sessions[f] then
    return f
  end
  if M.current and M.sessions[M.current] then
    return M.current
  end
  return nil
end

--- Calls cb(nil, session) with the session of the current buffer; a `.jsonl` buffer that
--- is not open yet is opened first. cb(err) when there is none.
function M.resolve(cb)
  local buf = vim.api.nvim_get_current_buf()
  local p = vim.b[buf].sessiond_path
  if p and M.sessions[p] then
    return cb(nil, M.sessions[p])
  end
  local f = buffer_file(buf)
  if f and M.sessions[f] then
    M.current = f
    return cb(nil, M.sessions[f])
  end
  if f and f:match("%.jsonl$") then
    return M.open(f, {}, function(err, _, s)
      if err then
        return cb(err)
      end
      cb(nil, s)
    end)
  end
  if M.current and M.sessions[M.current] then
    return cb(nil, M.sessions[M.current])
  end
  if M.opening > 0 then
    -- `:SessiondOpen FILE | SessiondTree`: the open is on its way.
    return table.insert(M.waiting, function()
      if M.current and M.sessions[M.current] then
        return cb(nil, M.sessions[M.current])
      end
      cb({ message = "no session open: run :SessiondOpen FILE (or :SessiondList)" })
    end)
  end
  cb({ message = "no session open: run :SessiondOpen FILE (or :SessiondList)" })
end

--- The leaf views show for `s`: the one the user picked, else pi's resume leaf.
function M.active_leaf(s)
  return s.activeLeaf or s.leafId
end

--- The open session a change or reload notification is about, its tree state taken from the
--- notification (nil when the session is not open here).
local function updated(params)
  local s = M.sessions[params.path]
  if s then
    s.entryCount, s.leafId, s.leaves, s.revision = params.entryCount, params.leafId, params.leaves, params.revision
  end
  return s
end

local function on_did_change(params)
  local s = updated(params)
  if not s then
    return
  end
  s.agent = params.agent
  s.changes = (s.changes or 0) + 1
  fire("change", params.path, params)
  vim.api.nvim_exec_autocmds("User", { pattern = "SessiondDidChange", data = params })
end

local function on_did_reload(params)
  local s = updated(params)
  if not s then
    return
  end
  s.corrupt = nil
  -- The file was read again from the start: a picked leaf may be gone.
  s.activeLeaf = nil
  if params.reason ~= "born" then
    notify(("%s was read again (%s)"):format(vim.fs.basename(params.path), params.reason))
  end
  fire("reload", params.path, params)
  vim.api.nvim_exec_autocmds("User", { pattern = "SessiondDidReload", data = params })
end

-- Sets `key` of the session a notification is about, when it is open here.
local function mark(params, key, value)
  local s = M.sessions[params.path]
  if s then
    s[key] = value
  end
end

local function on_did_corrupt(params)
  mark(params, "corrupt", params)
  notify(("%s: line %d is corrupt (%s); showing the session up to it. Salvage it with `sessiond salvage`")
    :format(params.path, params.line, params.kind), vim.log.levels.WARN)
end

local function on_file_missing(params)
  mark(params, "missingSince", params.since)
  notify(params.path .. " is gone (deleted or moved); showing its last known state", vim.log.levels.WARN)
end

local function on_file_restored(params)
  mark(params, "missingSince", nil)
  notify(params.path .. " is back")
end

local function on_did_change_live_mode(params)
  mark(params, "liveMode", params.liveMode)
  if params.liveMode ~= "events" then
    notify(("%s is followed by %s now, not file events"):format(vim.fs.basename(params.path), params.liveMode),
      vim.log.levels.WARN)
  end
end

-- A new session file beside an open one (a fork, a Claude Code subagent's transcript): said
-- once, and announced to autocommands (a picker opened later lists it).
local function on_did_create(params)
  local what = type(params.subagent) == "table"
      and ("a subagent of %s"):format(vim.fs.basename(params.subagent.parentPath))
    or "a new session"
  notify(("%s: %s"):format(vim.fs.basename(params.path), what))
  vim.api.nvim_exec_autocmds("User", { pattern = "SessiondDidCreate", data = params })
end

client.notification_handlers = {
  ["session/didChange"] = on_did_change,
  ["session/didReload"] = on_did_reload,
  ["session/didCorrupt"] = on_did_corrupt,
  ["session/fileMissing"] = on_file_missing,
  ["session/fileRestored"] = on_file_restored,
  ["session/didChangeLiveMode"] = on_did_change_live_mode,
  ["session/didCreate"] = on_did_create,
  ["session/didChangeList"] = function(params)
    require("sessiond.listing").apply(params)
  end,
}

-- After a restart the new daemon knows no session: open them again, then let the views
-- fetch what they show.
table.insert(client.on_restart, function()
  local paths = vim.tbl_keys(M.sessions)
  table.sort(paths)
  local left, failed = #paths, {}
  if left == 0 then
    return notify("the daemon was restarted")
  end
  for _, p in ipairs(paths) do
    local s = M.sessions[p]
    client.request("session/open", { path = p, allowCorrupt = s.allowCorrupt }, function(err, r)
      if err then
        table.insert(failed, p .. ": " .. err.message)
      else
        apply_open(r, s.allowCorrupt)
        fire("reload", r.path, { path = r.path, reason = "restarted" })
      end
      left = left - 1
      if left == 0 then
        if #failed > 0 then
          notify("the daemon was restarted; could not open again: " .. table.concat(failed, "; "),
            vim.log.levels.ERROR)
        else
          notify(("the daemon was restarted; %d session%s open again"):format(#paths, #paths == 1 and "" or "s"))
        end
        vim.api.nvim_exec_autocmds("User", { pattern = "SessiondRestarted", data = { paths = paths } })
      end
    end)
  end
end)

return M
