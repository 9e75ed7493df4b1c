-- Headless Neovim comparing two leaves and auditing summaries as a user would, on a copy of
-- examples/pi-v3-branched.jsonl: `D` on a leaf of the tree (the leaf under the cursor against
-- the active leaf), :SessiondDiff with two leaves, <CR> in the report; `K` on the compaction and
-- on the branch summary, <CR> on a lost fact. tests/neovim.rs checks the report against the CLI.
--
-- Env: SESSIOND_HARNESS, SESSIOND_PLUGIN, SESSIOND_BIN, SESSIOND_ROOT, SESSIOND_FILE, SESSIOND_OUT.
local h = dofile(os.getenv("SESSIOND_HARNESS"))
local report = h.report

-- What the current tab page shows: each window's buffer name, diff mode and lines, and how many
-- lines of the window are marked as differing.
local function tab_windows()
  local out = {}
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local buf = vim.api.nvim_win_get_buf(w)
    local differing = 0
    vim.api.nvim_win_call(w, function()
      for l = 1, vim.api.nvim_buf_line_count(buf) do
        if vim.fn.diff_hlID(l, 1) ~= 0 then
          differing = differing + 1
        end
      end
    end)
    table.insert(out, {
      name = vim.api.nvim_buf_get_name(buf),
      diff = vim.wo[w].diff,
      differing = differing,
      lines = h.lines(buf),
    })
  end
  return out
end

-- Moves the cursor to the first line of the current buffer that contains `text`.
local function cursor_to_text(text)
  for i, l in ipairs(h.lines()) do
    if l:find(text, 1, true) then
      vim.api.nvim_win_set_cursor(0, { i, 0 })
      return l
    end
  end
  error(text .. " is not in " .. vim.api.nvim_buf_get_name(0))
end

-- <CR> on the current line; where the tree's cursor lands and whether its fold is open.
local function jump()
  h.press_until("<CR>", "SessiondRevealed", "the jump to the tree")
  return { tree = vim.bo.filetype == "sessiondtree", id = h.cursor_id(), fold = vim.fn.foldclosed(".") }
end

h.run(function()
  h.load_plugin()
  require("sessiond").setup({ cmd = { h.env("SESSIOND_BIN"), "serve", "--root", h.env("SESSIOND_ROOT") } })
  vim.cmd("SessiondOpen " .. vim.fn.fnameescape(h.env("SESSIOND_FILE")))
  h.wait_message("entries", "after open", true)
  local tree_buf = h.open_view("SessiondTree", "sessiondtree", 1000, "the tree buffer")
  local tree_tab = vim.api.nvim_get_current_tabpage()

  h.step("D compares the leaf under the cursor with the active leaf", function()
    report.diffMapping = vim.fn.maparg("D", "n", false, true).desc
    h.cursor_to("de19adb3")
    h.press_until("D", "SessiondDiffShown", "the comparison")
    report.diffMessage = h.wait_message("compared de19adb3 with 610f9c1e", "the comparison's message", true)
    report.diff = {
      newTab = vim.api.nvim_get_current_tabpage() ~= tree_tab,
      current = vim.api.nvim_buf_get_name(0),
      windows = tab_windows(),
    }
  end)

  h.step("<CR> in the report jumps to the entry in the tree", function()
    report.diffJumpLine = cursor_to_text("summarized by compaction 4909db93")
    report.diffJump = jump()
  end)

  h.step(":SessiondDiff A B compares two named leaves, in the same tab page", function()
    local tabs = #vim.api.nvim_list_tabpages()
    h.cmd_until("SessiondDiff 8a9bb12f de19adb3", "SessiondDiffShown", "the second comparison")
    report.diff2 = { windows = tab_windows(), tabsBefore = tabs, tabsAfter = #vim.api.nvim_list_tabpages() }
  end)

  h.step("K on the compaction shows its audit; <CR> on a lost fact jumps to its entry", function()
    vim.api.nvim_set_current_tabpage(tree_tab)
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
    h.cursor_to("4909db93")
    h.press_until("K", "SessiondAuditShown", "the compaction's audit")
    report.auditMessage = h.wait_message("Entry 4909db93", "the explanation", true)
    report.audit = { name = vim.api.nvim_buf_get_name(0), filetype = vim.bo.filetype, lines = h.lines() }
    -- A fact from deep inside the summarized span, folded away in the tree.
    report.auditJumpLine = cursor_to_text("packages/coding-agent/src/tui/custom-editor.ts")
    report.auditJump = jump()
  end)

  h.step("K on the branch summary shows the branch it replaced and its audit", function()
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
    h.cursor_to("12bbdff5")
    h.press_until("K", "SessiondAuditShown", "the branch summary's audit")
    h.wait_message("Entry 12bbdff5", "the explanation", true)
    report.branchAudit = h.lines()
    report.branchAuditJumpLine = cursor_to_text("✗ readFile")
    report.branchAuditJump = jump()
  end)

  h.step("K on an entry that is no summary opens no audit", function()
    local audit_buf = vim.fn.bufnr("sessiond://audit/" .. vim.uv.fs_realpath(h.env("SESSIOND_FILE")))
    vim.api.nvim_win_close(vim.fn.bufwinid(audit_buf), true)
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
    h.cursor_to("521cf246")
    h.press("K")
    h.wait_message("Entry 521cf246", "the explanation", true)
    report.noAuditWindow = vim.fn.bufwinid(audit_buf) == -1
  end)
end)
