-- Headless Neovim rewinding files as a user would, on a pi session whose records write
-- notes.txt and edit existing.txt in $SESSIOND_WORK: `gR` on the second prompt (the dry run's
-- diff shown, then confirmed), :SessiondRewind on the first (nothing changed when refused for
-- drift; :SessiondRewind! then). tests/neovim.rs checks the files after each step.
--
-- Env: SESSIOND_HARNESS, SESSIOND_PLUGIN, SESSIOND_BIN, SESSIOND_ROOT, SESSIOND_FILE, SESSIOND_WORK,
-- SESSIOND_OUT.
local h = dofile(os.getenv("SESSIOND_HARNESS"))
local report = h.report

local function read(name)
  local f = io.open(h.env("SESSIOND_WORK") .. "/" .. name, "rb")
  if not f then
    return vim.NIL
  end
  local s = f:read("*a")
  f:close()
  return s
end

h.run(function()
  h.load_plugin()
  require("sessiond").setup({ cmd = { h.env("SESSIOND_BIN"), "serve", "--root", h.env("SESSIOND_ROOT") } })
  vim.cmd("SessiondOpen " .. vim.fn.fnameescape(h.env("SESSIOND_FILE")))
  h.wait_message("entries", "after open", true)
  local tree_buf = h.open_view("SessiondTree", "sessiondtree", 3, "the tree buffer")
  local tree_win = vim.api.nvim_get_current_win()

  h.step("gR shows the dry run's diff, then rewinds when confirmed", function()
    report.mapping = vim.fn.maparg("gR", "n", false, true).desc
    h.cursor_to("aaaa0004")
    vim.ui.select = function(items, opts, on_choice)
      -- Asked only once the diff is on screen.
      report.shownWhenAsked = vim.bo.filetype == "diff" and h.lines()
      report.prompt = opts.prompt
      report.choices = items
      on_choice("Rewind files")
    end
    h.press_until("gR", "SessiondRewound", "the rewind")
    report.rewound = h.wait_message("rewound", "rewound", true)
    report.afterFirst = { existing = read("existing.txt"), notes = read("notes.txt") }
  end)

  h.step("a refused rewind shows why and changes nothing", function()
    vim.api.nvim_set_current_win(tree_win)
    vim.api.nvim_win_set_buf(tree_win, tree_buf)
    -- existing.txt as the session left it again; notes.txt changed since.
    for name, text in pairs({ ["existing.txt"] = "alpha\nBETA\n", ["notes.txt"] = "mine\n" }) do
      local f = assert(io.open(h.env("SESSIOND_WORK") .. "/" .. name, "wb"))
      f:write(text)
      f:close()
    end
    vim.ui.select = function()
      error("a refused rewind must not ask")
    end
    local fired = h.cmd_until("SessiondRewind aaaa0001", "SessiondRewound", "the refusal")
    report.refused = fired.refused
    report.refusedMessage = h.wait_message("rewind refused", "refusal", true)
    report.refusedLines = h.lines()
    report.afterRefused = { existing = read("existing.txt"), notes = read("notes.txt") }
  end)

  h.step(":SessiondRewind! rewinds the drifted file too", function()
    vim.ui.select = function(items, _, on_choice)
      on_choice(items[1])
    end
    h.cmd_until("SessiondRewind! aaaa0001", "SessiondRewound", "the forced rewind")
    report.forced = h.wait_message("rewound", "forced", true)
    report.afterForced = { existing = read("existing.txt"), notes = read("notes.txt") }
  end)
end)
