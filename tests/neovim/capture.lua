-- A terminal capture of a view: this headless Neovim opens a :terminal (libvterm) as large as
-- its screen (SESSIOND_CAPTURE_SIZE, "COLUMNSxLINES", else a headless Neovim's 80×24) running a
-- second, full Neovim with the plugin, which runs SESSIOND_CAPTURE_CMD (default: the tree view
-- of the session); the terminal's screen, as a user would see it, is written to
-- SESSIOND_CAPTURE once it shows every text of SESSIOND_CAPTURE_UNTIL ("\n"-separated).
-- Env: SESSIOND_NVIM_BIN (the inner nvim), SESSIOND_PLUGIN, SESSIOND_BIN, SESSIOND_ROOT,
-- SESSIOND_FILE, SESSIOND_CAPTURE; optional SESSIOND_CAPTURE_SIZE, SESSIOND_CAPTURE_CMD,
-- SESSIOND_CAPTURE_UNTIL.
local function env(k)
  local v = os.getenv(k)
  assert(v, k .. " is not set")
  return v
end
local size = os.getenv("SESSIOND_CAPTURE_SIZE")
vim.o.laststatus, vim.o.cmdheight, vim.o.showtabline = 0, 1, 0
if size then
  local c, l = size:match("^(%d+)x(%d+)$")
  vim.o.columns, vim.o.lines = tonumber(c), tonumber(l)
  -- Without a UI the first window keeps the 80×24 grid; a new tab page takes the new size.
  vim.cmd("tabnew | tabonly")
end
-- Run once the session is open (opened quietly: no message on the command line).
local command = os.getenv("SESSIOND_CAPTURE_CMD") or "SessiondTree"
local until_texts = vim.split(os.getenv("SESSIOND_CAPTURE_UNTIL") or "entries folded\n◀ resume leaf", "\n")

local init = vim.fn.tempname() .. ".lua"
local f = assert(io.open(init, "w"))
f:write(([[
vim.opt.runtimepath:prepend(%q)
vim.cmd("runtime! plugin/sessiond.lua")
vim.o.laststatus = 0
vim.o.ruler = false
vim.o.showmode = false
vim.o.shortmess = vim.o.shortmess .. "IF"
require("sessiond").setup({ cmd = { %q, "serve", "--root", %q }, tree = { split = "" }, graph = { split = "" } })
require("sessiond.sessions").open(%q, {}, function() vim.cmd(%q) end)
]]):format(env("SESSIOND_PLUGIN"), env("SESSIOND_BIN"), env("SESSIOND_ROOT"), env("SESSIOND_FILE"), command))
f:close()

local buf = vim.api.nvim_create_buf(true, false)
vim.api.nvim_set_current_buf(buf)
local job = vim.fn.jobstart({ env("SESSIOND_NVIM_BIN"), "--clean", "-u", init }, {
  term = true,
  env = { XDG_STATE_HOME = vim.fn.tempname() },
})
assert(job > 0, "could not start the inner nvim")
local ROWS = vim.api.nvim_win_get_height(0)
local function screen()
  return vim.api.nvim_buf_get_lines(buf, 0, ROWS, false)
end
local ok = vim.wait(20000, function()
  local s = table.concat(screen(), "\n")
  for _, t in ipairs(until_texts) do
    if not s:find(t, 1, true) then
      return false
    end
  end
  return true
end, 50)
-- One more moment for the last redraw to settle.
vim.wait(300)
local lines = screen()
vim.fn.jobstop(job)
local out = assert(io.open(env("SESSIOND_CAPTURE"), "w"))
for _, l in ipairs(lines) do
  out:write((l:gsub("%s+$", "")) .. "\n")
end
out:close()
os.exit(ok and 0 or 1)
