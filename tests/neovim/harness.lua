-- What the headless Neovim scripts of tests/neovim.rs share: the report they write, the messages
-- a user sees, waits, keys pressed with mappings applied, and the tree view's lines by entry id.
--
--   local h = dofile(os.getenv("SESSIOND_HARNESS"))
--   h.run(function() ... end)   -- writes h.report to $SESSIOND_OUT, exits 0, or 1 with the error
local M = { report = { steps = {} } }

--- The environment variable `k`, which must be set.
function M.env(k)
  local v = os.getenv(k)
  assert(v, k .. " is not set")
  return v
end

-- What a user sees in the message area.
M.messages = {}
vim.notify = function(msg, level)
  table.insert(M.messages, { msg = msg, level = level })
end

--- Waits for a message containing `pattern` (`plain`: no Lua pattern) and takes it off the list.
function M.wait_message(pattern, what, plain)
  local found
  local ok = vim.wait(15000, function()
    for i, m in ipairs(M.messages) do
      if m.msg:find(pattern, 1, plain) then
        found = m.msg
        table.remove(M.messages, i)
        return true
      end
    end
    return false
  end, 10)
  assert(ok, ("no message %s (%q); messages: %s"):format(what, pattern, vim.inspect(M.messages)))
  return found
end

function M.wait(pred, what)
  assert(vim.wait(15000, pred, 10), "timed out: " .. what)
end

--- Keys typed in normal mode (mappings apply).
function M.press(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "mx", false)
end

--- Presses `keys` and waits for the `User` autocmd `pattern` they fire; returns its data.
function M.press_until(keys, pattern, what)
  local fired
  vim.api.nvim_create_autocmd("User", { pattern = pattern, once = true, callback = function(ev)
    fired = ev.data or {}
  end })
  M.press(keys)
  M.wait(function()
    return fired ~= nil
  end, what)
  return fired
end

--- Runs the Ex command `cmd` and waits for the `User` autocmd `pattern` it fires.
function M.cmd_until(cmd, pattern, what)
  local fired
  vim.api.nvim_create_autocmd("User", { pattern = pattern, once = true, callback = function(ev)
    fired = ev.data or {}
  end })
  vim.cmd(cmd)
  M.wait(function()
    return fired ~= nil
  end, what)
  return fired
end

--- Runs `cmd` and waits for the current buffer to be a view of `filetype` with more than
--- `min_lines` lines; returns the buffer.
function M.open_view(cmd, filetype, min_lines, what)
  vim.cmd(cmd)
  M.wait(function()
    return vim.bo.filetype == filetype and vim.api.nvim_buf_line_count(0) > min_lines
  end, what)
  return vim.api.nvim_get_current_buf()
end

function M.step(name, f)
  local t = vim.uv.hrtime()
  f()
  table.insert(M.report.steps, { name = name, ms = math.floor((vim.uv.hrtime() - t) / 1e6) })
end

function M.lines(buf)
  return vim.api.nvim_buf_get_lines(buf or 0, 0, -1, false)
end

--- The line of the tree view (`buf`, default current) that shows entry `id`.
function M.line_of(id, buf)
  for i, l in ipairs(M.lines(buf)) do
    if l:match("^[│├└─ ]*" .. vim.pesc(id) .. " ") then
      return i
    end
  end
end

function M.cursor_to(id)
  local l = assert(M.line_of(id), id .. " is not in the tree buffer")
  vim.api.nvim_win_set_cursor(0, { l, 0 })
end

--- The entry id of the tree line under the cursor.
function M.cursor_id()
  local l = vim.api.nvim_get_current_line()
  return l:match("^[│├└─ ]*(%S+) ")
end

--- Loads the plugin from $SESSIOND_PLUGIN as a user's configuration would.
function M.load_plugin()
  vim.opt.runtimepath:prepend(M.env("SESSIOND_PLUGIN"))
  vim.cmd("runtime! plugin/sessiond.lua")
  vim.cmd("filetype plugin on | syntax on")
end

local function finish(code)
  local f = assert(io.open(M.env("SESSIOND_OUT"), "w"))
  f:write(vim.json.encode(M.report))
  f:close()
  os.exit(code)
end

--- Runs `body`, then writes the report and exits: 0, or 1 with the error and the messages.
function M.run(body)
  local ok, err = pcall(body)
  if not ok then
    M.report.error = type(err) == "string" and err or vim.inspect(err)
    M.report.messages = M.messages
    finish(1)
  end
  finish(0)
end

return M
