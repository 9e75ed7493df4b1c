-- A terminal capture of the tree view: this headless Neovim opens a :terminal (libvterm) as
-- large as its screen (a headless Neovim's grid is 80×24, so the terminal is 80 columns wide)
-- running a second, full Neovim with the plugin, which shows `:SessiondTree` of the session;
-- the terminal's screen, as a user would see it, is written to SESSIOND_CAPTURE.
-- Env: SESSIOND_NVIM_BIN (the inner nvim), SESSIOND_PLUGIN, SESSIOND_BIN, SESSIOND_ROOT,
-- SESSIOND_FILE, SESSIOND_CAPTURE.
local function env(k)
  local v = os.getenv(k)
  assert(v, k .. " is not set")
  return v
end
vim.o.laststatus, vim.o.cmdheight = 0, 1

local init = vim.fn.tempname() .. ".lua"
local f = assert(io.open(init, "w"))
f:write(([[
vim.opt.runtimepath:prepend(%q)
vim.cmd("runtime! plugin/sessiond.lua")
vim.o.laststatus = 0
vim.o.ruler = false
vim.o.showmode = false
vim.o.shortmess = vim.o.shortmess .. "IF"
require("sessiond").setup({ cmd = { %q, "serve", "--root", %q }, tree = { split = "" } })
vim.cmd("SessiondTree " .. vim.fn.fnameescape(%q))
]]):format(env("SESSIOND_PLUGIN"), env("SESSIOND_BIN"), env("SESSIOND_ROOT"), env("SESSIOND_FILE")))
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
  return s:find("entries folded", 1, true) ~= nil and s:find("◀ resume leaf", 1, true) ~= nil
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
