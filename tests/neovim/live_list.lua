-- Headless Neovim with :SessiondSessions open while other processes change the root: a session
-- file copied in appears, a session that grows shows its new size, entries and tokens, a removed
-- one goes, all without listing again (session/didChangeList); at the end the view's lines are
-- the lines a fresh :SessiondList shows.
--
-- Env: SESSIOND_HARNESS, SESSIOND_PLUGIN, SESSIOND_BIN, SESSIOND_ROOT, SESSIOND_COPY_A and
-- SESSIOND_COPY_B (two copies of one session, in folders a/ and b/), SESSIOND_NEW (a session
-- file to copy to SESSIOND_NEW_AT), SESSIOND_APPEND (a line to append to SESSIOND_COPY_A),
-- SESSIOND_OUT.
local h = dofile(os.getenv("SESSIOND_HARNESS"))
local env, report, wait, step = h.env, h.report, h.wait, h.step
local COPY_A, COPY_B = env("SESSIOND_COPY_A"), env("SESSIOND_COPY_B")

-- Another process changes the root: the shell, not this Neovim.
local function sh(script, ...)
  local r = vim.system({ "sh", "-c", script, "sh", ... }):wait()
  assert(r.code == 0, r.stderr)
end

h.run(function()
  h.load_plugin()
  require("sessiond").setup({ cmd = { env("SESSIOND_BIN"), "serve", "--root", env("SESSIOND_ROOT") } })
  local client = require("sessiond.client")
  local listing = require("sessiond.listing")
  -- Every session/list this Neovim sends.
  local lists = 0
  local request = client.request
  client.request = function(method, ...)
    if method == "session/list" then
      lists = lists + 1
    end
    return request(method, ...)
  end

  local buf
  step(":SessiondSessions lists the root", function()
    vim.cmd("SessiondSessions")
    wait(function()
      return vim.bo.filetype == "sessiondlist" and listing.loaded
    end, "the sessions view")
    buf = vim.api.nvim_get_current_buf()
    report.announced = client.offers_notification("session/didChangeList")
    report.before = h.lines(buf)
  end)
  local lists_before = lists

  local function row(path)
    local real = vim.uv.fs_realpath(path) or path
    local view = require("sessiond.view")
    local l = view.line_of(buf, real)
    return l and h.lines(buf)[l] or nil
  end

  step("a session file copied under the root appears", function()
    sh('mkdir -p "$(dirname "$2")" && cp "$1" "$2.tmp" && mv "$2.tmp" "$2"', env("SESSIOND_NEW"), env("SESSIOND_NEW_AT"))
    wait(function()
      return row(env("SESSIOND_NEW_AT")) ~= nil
    end, "the copied session in the view")
    report.appeared = row(env("SESSIOND_NEW_AT"))
  end)

  step("a session that grows shows its new counts and size", function()
    local old = row(COPY_A)
    report.grownBefore = old
    sh('printf "%s\\n" "$1" >> "$2"', env("SESSIOND_APPEND"), COPY_A)
    wait(function()
      local now = row(COPY_A)
      return now ~= nil and now ~= old
    end, "the grown session's new line")
    report.grown = row(COPY_A)
  end)

  step("a removed session goes; its copy reads alone again", function()
    sh('rm "$1"', COPY_B)
    wait(function()
      local a = row(COPY_A)
      return a ~= nil and not a:find("/" .. vim.fs.basename(COPY_A) .. ")", 1, true)
    end, "the removed copy gone")
    report.removedGone = vim.tbl_filter(function(l)
      return l:find("(b/", 1, true) ~= nil
    end, h.lines(buf))
    report.alone = row(COPY_A)
  end)
  report.listsWhileFollowing = lists - lists_before
  report.applied = listing.applied
  report.after = h.lines(buf)

  step("the view says what a fresh listing says", function()
    vim.ui.select = function(items, opts, on_choice)
      report.picker = vim.tbl_map(opts.format_item, items)
      on_choice(nil)
    end
    vim.cmd("SessiondList")
    wait(function()
      return report.picker ~= nil
    end, "the picker")
  end)
end)
