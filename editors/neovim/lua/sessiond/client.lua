-- sessiond.client: the one `sessiond serve` daemon, run through Neovim's built-in LSP client.
--
-- Every request is asynchronous (client:request with a callback; nothing here waits). Requests
-- made before the daemon answered `initialize` wait in a queue (the daemon refuses requests
-- before it, -32002). When the daemon exits without being asked to, requests in flight fail
-- with a message that says so, the exit is reported, and `on_restart` hooks run once the new
-- daemon is up (the session layer re-opens its sessions there).
local config = require("sessiond.config")

local M = {}

M.client_id = nil
M.ready = false
-- The initialize result's capabilities.experimental.sessiond ({protocolVersion, methods,
-- notifications, roots}) and serverInfo ({name, version}).
M.info = nil
M.server_info = nil
-- Server → client notifications: method → fun(params). Set by the session layer.
M.notification_handlers = {}
-- fun() run after a restart, once the new daemon is initialized.
M.on_restart = {}
-- The last unexpected exit: {code, signal, at}.
M.last_exit = nil
M.restarts = {}

local queue = {} -- {method, params, cb} waiting for initialize
local inflight = {} -- token → {method, cb}
local next_token = 0
local stopping = false -- an exit we asked for
local starting_after_crash = false

local function notify(msg, level)
  vim.notify("sessiond: " .. msg, level or vim.log.levels.INFO)
end
M.notify = notify

local has_011 = vim.fn.has("nvim-0.11") == 1

-- The JSON-RPC error codes of protocol/README.md, each with what to do about it.
local HINTS = {
  [-33001] = "check the path (the file may have been moved or deleted)",
  [-33002] = "add its directory to setup({ roots = { … } }) or start sessiond with --root DIR",
  [-33003] = "open it read-only with :SessiondOpen! (pi's lenient read) or salvage it with `sessiond salvage`",
  [-33004] = "pick an entry in :SessiondTree (entry ids complete with <Tab>)",
  [-33005] = "run :SessiondOpen FILE",
  [-33010] = "the session moved on; the views are refreshed, try again",
  [-33011] = "the file is being written; try again in a moment",
  [-33013] = "the entry or session id is malformed",
  [-33014] = "retention check failed; nothing was written",
  [-33015] = "only version-3 files are written to: fork it first (:SessiondFork)",
  [-33016] = "fork before a user message only; use fork at this entry (f) instead",
  [-33017] = "the file changed during the write; it is read again, try again",
  [-33019] = "wait until the agent is done, or repeat the command with ! to write anyway",
  [-32002] = "the daemon is still starting; try again",
}

-- The methods that write to a session file (what -33021 refuses on a read-only format).
local WRITES = {
  ["session/append"] = true, ["session/label"] = true, ["session/setName"] = true, ["session/branch"] = true,
  ["session/salvage"] = true, ["session/prepareCompaction"] = true, ["session/compact"] = true,
}

--- Turns a JSON-RPC error into a table whose `message` says what happened and what to do.
--- The daemon's messages name the file and the id; serde's "invalid params" wording is not shown.
function M.describe_error(method, err)
  if type(err) ~= "table" then
    return { message = tostring(err) }
  end
  local code = err.code
  local msg = err.message or "unknown error"
  if code == -32601 then
    msg = "this sessiond does not offer " .. method .. " (update sessiond)"
  elseif code == -32602 then
    msg = method .. " was refused as malformed; this is a bug in the plugin, please report it ("
      .. msg:gsub("^.-invalid params: ", "") .. ")"
  elseif code == -33021 then
    -- The format's reads are all there; only its writes (but fork) and some methods are not.
    local d = type(err.data) == "table" and err.data or {}
    local agent = ({ pi = "pi", ["claude-code"] = "Claude Code" })[d.format] or tostring(d.format or "this")
    if WRITES[method] then
      msg = ("%s is not supported for %s sessions (%s): sessiond reads a %s session but never writes to it; "
        .. "fork it (f, :SessiondFork) to continue in a new session"):format(method, agent, msg, agent)
    else
      msg = ("%s is not supported for %s sessions by this sessiond (%s)"):format(method, agent, msg)
    end
  elseif code == -33002 then
    -- The daemon's own hint names its command line; say it the plugin's way instead.
    msg = (msg:gsub(" %(add its directory:[^)]*%)$", "")) .. ": " .. HINTS[code]
  elseif code == -33011 and type(err.data) == "table" and err.data.retryAfterMs then
    msg = msg .. ": try again in " .. err.data.retryAfterMs .. " ms"
  elseif HINTS[code] then
    msg = msg .. ": " .. HINTS[code]
  end
  return { code = code, message = msg, data = err.data }
end

--- The running client object, or nil.
function M.get()
  return M.client_id and vim.lsp.get_client_by_id(M.client_id) or nil
end

local function send(c, method, params, cb)
  next_token = next_token + 1
  local token = next_token
  inflight[token] = { method = method, cb = cb }
  local handler = function(err, result)
    if not inflight[token] then
      return
    end
    inflight[token] = nil
    if err then
      cb(M.describe_error(method, err), nil)
    else
      cb(nil, result)
    end
  end
  local ok
  if has_011 then
    ok = c:request(method, params, handler)
  else
    ok = c.request(method, params, handler)
  end
  if not ok then
    inflight[token] = nil
    cb({ message = "sessiond is not running (" .. method .. " not sent): run :SessiondRestart" })
  end
end

local function fail_all(message)
  local q, f = queue, inflight
  queue, inflight = {}, {}
  for _, r in ipairs(q) do
    r.cb({ message = message:format(r.method) })
  end
  for _, r in pairs(f) do
    r.cb({ message = message:format(r.method) })
  end
end

local function on_init(c, result)
  -- on_init runs on the main loop; flush the queue from a fresh tick all the same.
  vim.schedule(function()
    if c.id ~= M.client_id then
      return
    end
    local caps = (result and result.capabilities) or {}
    M.info = (caps.experimental or {}).sessiond or {}
    M.server_info = result and result.serverInfo or {}
    M.ready = true
    local q = queue
    queue = {}
    for _, r in ipairs(q) do
      send(c, r.method, r.params, r.cb)
    end
    if starting_after_crash then
      starting_after_crash = false
      for _, hook in ipairs(M.on_restart) do
        hook()
      end
    end
  end)
end

local start -- forward

local function on_exit(code, signal, id)
  vim.schedule(function()
    if id ~= M.client_id then
      return
    end
    local was_ready = M.ready
    M.client_id, M.ready = nil, false
    if stopping or vim.v.exiting ~= vim.NIL then
      stopping = false
      fail_all("sessiond was stopped before answering %s")
      return
    end
    M.last_exit = { code = code, signal = signal, at = os.time() }
    local how = signal ~= 0 and ("signal " .. signal) or ("exit code " .. code)
    if not was_ready then
      fail_all("sessiond did not start (" .. how .. ") for %s: check cmd in setup() and :checkhealth sessiond")
      starting_after_crash = false
      return
    end
    fail_all("sessiond stopped (" .. how .. ") before answering %s; it is being restarted")
    local opts = config.options
    local now = vim.uv.now()
    M.restarts = vim.tbl_filter(function(t)
      return now - t < opts.restart_window_ms
    end, M.restarts)
    if not opts.restart or #M.restarts >= opts.max_restarts then
      notify(("the daemon stopped unexpectedly (%s); not restarting%s: run :SessiondRestart"):format(
        how, opts.restart and (" after " .. #M.restarts .. " restarts") or ""), vim.log.levels.ERROR)
      return
    end
    table.insert(M.restarts, now)
    notify(("the daemon stopped unexpectedly (%s); restarting it and opening its sessions again"):format(how),
      vim.log.levels.WARN)
    starting_after_crash = true
    start()
  end)
end

local function handlers()
  local h = {}
  for _, method in ipairs({
    "session/didChange", "session/didReload", "session/didCorrupt", "session/fileMissing",
    "session/fileRestored", "session/didChangeLiveMode", "session/didCreate", "session/didChangeList",
  }) do
    h[method] = function(_, params)
      local f = M.notification_handlers[method]
      if f then
        f(params)
      end
    end
  end
  return h
end

--- Starts the daemon (when not running). Returns an error message or nil.
start = function()
  local opts = config.options
  local cmd = opts.cmd
  if type(cmd) ~= "table" or not cmd[1] then
    return "setup({ cmd = … }) must be a list like { \"sessiond\", \"serve\" }"
  end
  if vim.fn.executable(cmd[1]) ~= 1 then
    return ("cannot run %q: not found or not executable; install sessiond or set cmd in setup() (see :checkhealth sessiond)")
      :format(cmd[1])
  end
  local lsp_config = {
    name = "sessiond",
    cmd = cmd,
    root_dir = vim.uv.cwd(),
    init_options = opts.roots and { roots = opts.roots } or vim.empty_dict(),
    handlers = handlers(),
    on_init = on_init,
    on_exit = on_exit,
  }
  local id
  if has_011 then
    id = vim.lsp.start(lsp_config, {
      attach = false,
      silent = true,
      reuse_client = function()
        return false
      end,
    })
  else
    id = vim.lsp.start_client(lsp_config)
  end
  if not id then
    return ("could not start %s: see :checkhealth sessiond and :LspLog"):format(table.concat(cmd, " "))
  end
  M.client_id, M.ready = id, false
  return nil
end

--- Sends `method` with `params`; calls cb(err, result) once. `err.message` says what to do.
--- Starts the daemon on first use. Never waits.
function M.request(method, params, cb)
  cb = cb or function() end
  local c = M.get()
  if c and M.ready then
    return send(c, method, params, cb)
  end
  table.insert(queue, { method = method, params = params, cb = cb })
  if not c then
    local err = start()
    if err then
      local q = queue
      queue = {}
      for _, r in ipairs(q) do
        r.cb({ message = err })
      end
    end
  end
end

--- Whether the running daemon lists `method` in initialize's methods; nil when not started.
function M.offers(method)
  if not M.ready or not M.info then
    return nil
  end
  return vim.tbl_contains(M.info.methods or {}, method)
end

--- Whether the running daemon lists `method` among the notifications it may send
--- (initialize's `notifications`); nil when not started.
function M.offers_notification(method)
  if not M.ready or not M.info then
    return nil
  end
  return vim.tbl_contains(M.info.notifications or {}, method)
end

--- Calls cb() once the daemon is initialized (starting it), or cb(err).
function M.when_ready(cb)
  if M.ready then
    return cb(nil)
  end
  -- A cheap request that any daemon serves, queued behind initialize.
  M.request("session/list", vim.empty_dict(), function(err)
    if err and not M.ready then
      return cb(err)
    end
    cb(nil)
  end)
end

--- Stops the daemon (shutdown, exit). Requests in flight fail.
function M.stop()
  local c = M.get()
  if not c then
    return
  end
  stopping = true
  if has_011 then
    c:stop()
  else
    c.stop()
  end
end

--- Starts the daemon as after a crash (the `on_restart` hooks run once it is up); an error is shown.
local function start_again()
  starting_after_crash = true
  local err = start()
  if err then
    starting_after_crash = false
    notify(err, vim.log.levels.ERROR)
  end
end

--- Stops the daemon and starts a new one; `on_restart` hooks re-open the sessions.
function M.restart()
  local c = M.get()
  M.restarts = {}
  if not c then
    return start_again()
  end
  local old = M.client_id
  M.stop()
  local timer = assert(vim.uv.new_timer())
  local waited = 0
  timer:start(20, 20, vim.schedule_wrap(function()
    waited = waited + 20
    if M.client_id == old then
      if waited == 3000 then
        -- It did not answer shutdown: end it.
        local still = vim.lsp.get_client_by_id(old)
        if still then
          if has_011 then still:stop(true) else still.stop(true) end
        end
      end
      return
    end
    timer:stop()
    timer:close()
    if M.client_id == nil then
      start_again()
    end
  end))
end

--- The daemon's process id, for tests and :checkhealth (nil when not running).
function M.pid()
  local c = M.get()
  if not c then
    return nil
  end
  local ok, pid = pcall(function()
    return c.rpc and c.rpc.pid
  end)
  if ok and pid then
    return pid
  end
  -- Older clients keep the handle private: the daemon is Neovim's child running cmd[1].
  for _, child in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
    local p = vim.api.nvim_get_proc(child)
    if p and p.name and vim.fs.basename(config.options.cmd[1]):find(p.name, 1, true) == 1 then
      return child
    end
  end
  return nil
end

return M
