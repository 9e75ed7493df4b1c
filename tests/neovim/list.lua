-- Headless Neovim over a root of real linear sessions (issue 47's user walk): the counts say
-- "1 leaf"; copies of one session are told apart in the picker and the sessions view; explain
-- of an entry after the leaf says so (not "another branch"); a label on a version-1 file is
-- refused before any prompt; the tree's leaf mark sits before the preview.
--
-- Env: SESSIOND_HARNESS, SESSIOND_PLUGIN, SESSIOND_BIN, SESSIOND_ROOT, SESSIOND_COPY_A and
-- SESSIOND_COPY_B (two copies of examples/pi-v1-large-session.jsonl under the root, in
-- folders a/ and b/), SESSIOND_V1 (examples/pi-v1-before-compaction.jsonl under the root),
-- SESSIOND_OUT.
local h = dofile(os.getenv("SESSIOND_HARNESS"))
local env, report, wait_message, wait, press, step = h.env, h.report, h.wait_message, h.wait, h.press, h.step
local COPY_A, V1 = env("SESSIOND_COPY_A"), env("SESSIOND_V1")

h.run(function()
  h.load_plugin()
  require("sessiond").setup({ cmd = { env("SESSIOND_BIN"), "serve", "--root", env("SESSIOND_ROOT") } })

  step(":SessiondOpen of a linear session says 1 leaf", function()
    vim.cmd("SessiondOpen " .. vim.fn.fnameescape(COPY_A))
    report.open = wait_message("entries", "after open", true)
  end)

  local tree_buf
  step("its tree: 1 leaf in the header, the mark before the preview", function()
    tree_buf = h.open_view("SessiondTree", "sessiondtree", 10, "the tree buffer")
    local tl = h.lines()
    report.tree = {
      header = tl[1],
      leafLine = tl[h.line_of("000003fb")],
    }
    local resume = h.line_of("000003fb")
    report.tree.markColumn = vim.fn.strdisplaywidth(tl[resume]:sub(1, tl[resume]:find("◀", 1, true) - 1)) + 1
  end)

  step("explain of an entry after the leaf says it comes after the leaf", function()
    vim.cmd("SessiondContext 00000005")
    wait_message("context at 00000005", "context at an early leaf", true)
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
    vim.cmd("SessiondExplain 00000009")
    report.explainAfter = wait_message("Entry 00000009", "explain after the leaf", true)
  end)

  step("a label on a version-1 file is refused before asking for the text", function()
    vim.cmd("SessiondOpen " .. vim.fn.fnameescape(V1))
    wait_message("entries", "the version-1 open", true)
    vim.cmd("SessiondTree " .. vim.fn.fnameescape(V1))
    wait(function()
      return vim.b.sessiond_path == vim.uv.fs_realpath(V1) and vim.api.nvim_buf_line_count(0) > 10
    end, "the version-1 tree")
    local v1_tree = vim.api.nvim_get_current_buf()
    report.asked = false
    vim.ui.input = function(_, on_confirm)
      report.asked = true
      on_confirm("x")
    end
    h.cursor_to("00000005")
    press("L")
    report.labelV1 = wait_message("label: ", "the refusal of L", true)
    vim.cmd("SessiondLabel 00000005 with text")
    report.labelV1Text = wait_message("label: ", "the refusal of :SessiondLabel", true)
    vim.ui.select = function(_, _, on_choice)
      report.asked = true
      on_choice("Compact")
    end
    press("C")
    report.compactV1 = wait_message("compact: ", "the refusal of C", true)
    report.v1Version = require("sessiond.sessions").sessions[vim.b[v1_tree].sessiond_path].version
    -- A fork is the way out, and is offered.
    press("f")
    report.forkV1 = wait_message("forked at 00000005", "the fork of a version-1 file", true)
  end)

  step(":SessiondList tells the copies apart", function()
    vim.ui.select = function(items, opts, on_choice)
      report.list = { items = vim.tbl_map(opts.format_item, items), paths = vim.tbl_map(function(x)
        return x.path
      end, items) }
      on_choice(nil)
    end
    vim.cmd("SessiondList")
    wait(function()
      return report.list ~= nil
    end, "the picker")
  end)

  step(":SessiondSessions shows the same lines", function()
    local drawn = false
    vim.api.nvim_create_autocmd("User", { pattern = "SessiondListDrawn", once = true, callback = function()
      drawn = true
    end })
    vim.cmd("SessiondSessions")
    wait(function()
      return drawn and vim.bo.filetype == "sessiondlist"
    end, "the sessions view")
    report.sessions = {
      name = vim.api.nvim_buf_get_name(0),
      lines = h.lines(),
      open = vim.fn.maparg("<CR>", "n", false, true).desc,
    }
    -- <CR> on a copy opens its tree.
    for i, l in ipairs(h.lines()) do
      if l:find("(b/", 1, true) then
        vim.api.nvim_win_set_cursor(0, { i, 0 })
      end
    end
    press("<CR>")
    wait(function()
      return vim.bo.filetype == "sessiondtree" and vim.api.nvim_buf_line_count(0) > 2
        and vim.b.sessiond_path == vim.uv.fs_realpath(env("SESSIOND_COPY_B"))
    end, "the tree of the copy under the cursor")
    report.sessions.opened = vim.b.sessiond_path
  end)
end)
