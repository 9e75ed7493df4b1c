-- :checkhealth sessiond — the binary, its version, the session roots, the protocol version.
local M = {}

local SUPPORTED_PROTOCOL = "0.2"

function M.check()
  local health = vim.health
  local config = require("sessiond.config")
  local client = require("sessiond.client")
  local opts = config.options

  health.start("sessiond: Neovim")
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. tostring(vim.version()))
  else
    health.error("Neovim 0.10 or newer is needed (vim.lsp.start, vim.system)")
  end
  if pcall(require, "telescope") then
    health.ok("Telescope found: :SessiondList uses it")
  else
    health.info("Telescope not installed: :SessiondList uses vim.ui.select")
  end

  health.start("sessiond: binary")
  local cmd = opts.cmd or {}
  local exe = cmd[1] and vim.fn.exepath(cmd[1]) or ""
  if exe == "" then
    health.error(("%s is not found or not executable"):format(tostring(cmd[1])), {
      "install sessiond (cargo install --path . in its repository) and put it on PATH",
      'or set its full path: require("sessiond").setup({ cmd = { "/path/to/sessiond", "serve" } })',
    })
    return
  end
  health.ok("found " .. exe .. " (cmd: " .. table.concat(cmd, " ") .. ")")
  local r = vim.system({ exe, "--version" }, { text = true }):wait(5000)
  if r.code == 0 then
    health.ok("version: " .. vim.trim(r.stdout or ""))
  else
    health.error(("%s --version failed (exit %s): %s"):format(exe, tostring(r.code), vim.trim(r.stderr or "")))
  end

  health.start("sessiond: daemon")
  local err
  local done = false
  client.when_ready(function(e)
    err, done = e, true
  end)
  -- A report, not the UI path: waiting here is what :checkhealth does.
  vim.wait(10000, function()
    return done
  end, 20)
  if not done then
    health.error("the daemon did not answer initialize within 10 s")
    return
  end
  if err then
    health.error("the daemon did not start: " .. err.message)
    return
  end
  local info = client.info or {}
  local pv = info.protocolVersion or "?"
  if tostring(pv):sub(1, #SUPPORTED_PROTOCOL) == SUPPORTED_PROTOCOL then
    health.ok(("protocol version %s (this plugin speaks %s.x); daemon %s %s, pid %s"):format(pv, SUPPORTED_PROTOCOL,
      (client.server_info or {}).name or "?", (client.server_info or {}).version or "?", tostring(client.pid())))
  else
    health.warn(("protocol version %s; this plugin speaks %s.x"):format(pv, SUPPORTED_PROTOCOL),
      { "update the plugin or sessiond so that both speak the same protocol" })
  end
  local methods = info.methods or {}
  for _, m in ipairs({ "session/verifyResume", "session/search" }) do
    if vim.tbl_contains(methods, m) then
      health.ok(m .. " offered")
    else
      health.info(m .. " not offered by this daemon: :Sessiond" .. (m:match("verify") and "Verify" or "Search")
        .. " says so")
    end
  end
  if client.last_exit then
    health.warn(("the daemon stopped unexpectedly before (exit code %d, signal %d)"):format(client.last_exit.code,
      client.last_exit.signal))
  end

  health.start("sessiond: session roots")
  local roots = info.roots or {}
  if #roots == 0 then
    health.warn("the daemon reports no session roots", { "pass --root DIR in cmd, or roots = { … } to setup()" })
  end
  for _, root in ipairs(roots) do
    local stat = vim.uv.fs_stat(root)
    if not stat then
      health.warn(root .. " does not exist (yet); sessions under it are listed once it is created")
    elseif stat.type ~= "directory" then
      health.error(root .. " is not a directory")
    elseif vim.uv.fs_access(root, "R") and vim.uv.fs_access(root, "X") then
      health.ok(root .. " is readable")
    else
      health.error(root .. " is not readable", { "fix its permissions" })
    end
  end
end

return M
