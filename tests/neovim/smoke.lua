-- Headless Neovim test of editors/neovim: start sessiond through the plugin, open a session,
-- get its context, append an entry to the file and wait for session/didChange.
-- Env: SESSIOND_PLUGIN (editors/neovim), SESSIOND_BIN, SESSIOND_ROOT, SESSIOND_FILE,
-- SESSIOND_APPEND (a line to append), SESSIOND_OUT (where to write the JSON report).
local function env(k)
  local v = os.getenv(k)
  assert(v, k .. " is not set")
  return v
end
vim.opt.runtimepath:prepend(env("SESSIOND_PLUGIN"))
local report = { steps = {} }
local function finish(code)
  local f = assert(io.open(env("SESSIOND_OUT"), "w"))
  f:write(vim.json.encode(report))
  f:close()
  os.exit(code)
end
local ok, err = pcall(function()
  local sessiond = require("sessiond")
  sessiond.setup({ cmd = { env("SESSIOND_BIN"), "serve", "--root", env("SESSIOND_ROOT") } })
  local opened = assert(sessiond.open(env("SESSIOND_FILE")))
  report.open = { entryCount = opened.entryCount, leafId = opened.leafId, name = opened.name }
  local ctx, cerr = sessiond.context(nil)
  assert(not cerr, cerr and cerr.message)
  report.context = { messageCount = ctx.messageCount, entryIds = ctx.entryIds, leafId = ctx.leafId,
    tokenEstimate = ctx.tokenEstimate }
  local changes = {}
  vim.api.nvim_create_autocmd("User", { pattern = "SessiondDidChange", callback = function(a)
    table.insert(changes, a.data)
  end })
  local f = assert(io.open(env("SESSIOND_FILE"), "a"))
  f:write(env("SESSIOND_APPEND") .. "\n")
  f:close()
  assert(vim.wait(10000, function() return #changes > 0 end, 10), "no session/didChange")
  report.didChange = { added = vim.tbl_map(function(n) return n.id end, changes[1].added),
    entryCount = changes[1].entryCount, leafId = changes[1].leafId }
  vim.cmd("SessiondTree")
  report.treeLines = vim.api.nvim_buf_line_count(0)
end)
if not ok then
  report.error = type(err) == "string" and err or vim.inspect(err)
  finish(1)
end
finish(0)
