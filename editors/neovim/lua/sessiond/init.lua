-- sessiond for Neovim: the public module. Commands are defined by plugin/sessiond.lua;
-- setup() only sets options. Everything is asynchronous: functions that talk to the daemon
-- take a callback. See :help sessiond and protocol/README.md for the daemon's methods.
local M = {}

local config = require("sessiond.config")
local sessions = require("sessiond.sessions")

M.sessions = sessions.sessions

--- Sets the options (see :help sessiond-setup) and makes sure the commands exist.
function M.setup(opts)
  config.set(opts)
  require("sessiond.commands").define()
  return M
end

--- Sends any daemon request: cb(err, result), `err.message` says what to do.
function M.request(method, params, cb)
  return require("sessiond.client").request(method, params, cb)
end

--- session/open of `path`: cb(err, result).
function M.open(path, cb, opts)
  return sessions.open(path, opts, cb)
end

--- The session of the current buffer (a view's, an open session file's, else the last).
function M.current()
  local p = sessions.path_of()
  return p and sessions.sessions[p] or nil
end

M.actions = setmetatable({}, {
  __index = function(_, k)
    return require("sessiond.actions")[k]
  end,
})

return M
