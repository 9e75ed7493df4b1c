-- Headless Neovim on pi's and Claude Code's sessions side by side, as a user drives it: the
-- picker lists both agents' sessions (grouped by agent, then project), and a transcript written
-- by the real Claude Code (tests/data/claude/real/compacted.jsonl, under a Claude projects root)
-- shows its tree, context, explanations (a compact boundary's and a compaction summary's audit),
-- graph and comparison; only fork is offered as a write,
-- and the daemon's refusal of the others is said plainly. tests/neovim.rs checks the report
-- against the CLI and the files.
--
-- Env: SESSIOND_HARNESS, SESSIOND_PLUGIN, SESSIOND_BIN, SESSIOND_PI_ROOT, SESSIOND_CLAUDE_ROOT,
-- SESSIOND_FILE (the transcript), SESSIOND_PI_FILE, SESSIOND_OUT, and the ids the steps use:
-- SESSIOND_REWOUND (a leaf of a rewound branch), SESSIOND_BEFORE (an entry before the last compact
-- boundary), SESSIOND_BOUNDARY (that boundary), SESSIOND_AUDITED (the entries whose audit `K`
-- shows, comma-separated: both boundaries and a compaction summary line), SESSIOND_OLD_LEAF (a
-- leaf before both compactions), SESSIOND_FORK_AT.
local h = dofile(os.getenv("SESSIOND_HARNESS"))
local report = h.report
local env = h.env
local FILE = vim.uv.fs_realpath(env("SESSIOND_FILE"))

-- The normal-mode mappings of the current buffer: lhs → description.
local function mappings()
  local out = {}
  for _, m in ipairs(vim.api.nvim_buf_get_keymap(0, "n")) do
    out[m.lhs] = m.desc or true
  end
  return out
end

h.run(function()
  h.load_plugin()
  require("sessiond").setup({ cmd = { env("SESSIOND_BIN"), "serve", "--root", env("SESSIOND_PI_ROOT"),
    "--root", env("SESSIOND_CLAUDE_ROOT") } })

  local tree_buf
  h.step(":SessiondList lists both agents' sessions, grouped by agent then project", function()
    vim.ui.select = function(items, opts, on_choice)
      report.list = {
        prompt = opts.prompt,
        items = vim.tbl_map(opts.format_item, items),
        paths = vim.tbl_map(function(x)
          return x.path
        end, items),
      }
      for _, it in ipairs(items) do
        if it.path == FILE then
          return on_choice(it)
        end
      end
      on_choice(nil)
    end
    vim.cmd("SessiondList")
    h.wait(function()
      return vim.bo.filetype == "sessiondtree" and vim.b.sessiond_path == FILE and vim.api.nvim_buf_line_count(0) > 40
    end, "the transcript's tree")
    tree_buf = vim.api.nvim_get_current_buf()
  end)

  h.step("the tree of the transcript; only fork among the writes", function()
    local tl = h.lines()
    local ids = {}
    for i = 3, #tl do
      table.insert(ids, tl[i]:match("^[│├└─ ]*(%S+) "))
    end
    report.tree = {
      header = { tl[1], tl[2] },
      ids = ids,
      leafLines = vim.tbl_filter(function(l)
        return l:find("◀", 1, true) ~= nil
      end, tl),
      format = require("sessiond.sessions").sessions[FILE].format,
      mappings = mappings(),
    }
    h.press("g?")
    report.tree.help = h.wait_message("list these mappings", "g?", true)
  end)

  h.step("label and compact are refused before the daemon is asked; its own refusal reads plainly", function()
    h.cursor_to(env("SESSIOND_BEFORE"))
    vim.cmd("SessiondLabel " .. env("SESSIOND_BEFORE") .. " a label")
    report.labelRefused = h.wait_message("label: a Claude Code session is read only", "the label refusal", true)
    vim.cmd("SessiondCompact")
    report.compactRefused = h.wait_message("compact: a Claude Code session is read only", "the compact refusal", true)
    -- What the daemon answers when a write reaches it anyway (another client's configuration,
    -- an older plugin): -33021, shown with what to do.
    local got
    require("sessiond").request("session/label", { path = FILE, targetId = env("SESSIOND_BEFORE"), label = "x",
      expectedLeafId = require("sessiond.sessions").sessions[FILE].leafId }, function(err)
      got = err or { message = "(no error)" }
    end)
    h.wait(function()
      return got ~= nil
    end, "the daemon's answer to a label")
    report.daemonRefusal = { code = got.code, message = got.message }
  end)

  h.step("<CR> shows the context at the rewound leaf", function()
    h.cursor_to(env("SESSIOND_REWOUND"))
    h.press_until("<CR>", "SessiondContextShown", "the context view")
    h.wait_message("context at " .. env("SESSIOND_REWOUND"), "context", true)
    local cl = h.lines()
    report.context = {
      lines = cl,
      headings = #vim.tbl_filter(function(l)
        return l:match("^## %d+%. ") ~= nil
      end, cl),
    }
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
    -- Back to the resume leaf (the one claude --resume continues from).
    vim.cmd("SessiondContext " .. require("sessiond.sessions").sessions[FILE].leafId)
    h.wait_message("context at", "context at the resume leaf", true)
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
  end)

  h.step("K explains an entry before the compact boundary, and the boundary", function()
    h.cursor_to(env("SESSIOND_BEFORE"))
    h.press("K")
    report.explainBefore = h.wait_message("Line ", "explain before the boundary", true)
    h.press("gr")
    report.referenced = h.cursor_id()
    h.cursor_to(env("SESSIOND_BOUNDARY"))
    h.press_until("K", "SessiondAuditShown", "the boundary's audit")
    report.explainBoundary = h.wait_message("compact boundary", "explain the boundary", true)
    vim.cmd("close")
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
  end)

  h.step("K on each compact boundary and on a compaction summary line shows its audit", function()
    report.audits = {}
    for _, id in ipairs(vim.split(env("SESSIOND_AUDITED"), ",")) do
      h.cursor_to(id)
      local shown = h.press_until("K", "SessiondAuditShown", "the audit of " .. id)
      h.wait_message(id, "the explanation of " .. id, true)
      report.audits[id] = { shown = shown.entryId, name = vim.api.nvim_buf_get_name(0), filetype = vim.bo.filetype,
        lines = h.lines() }
      vim.cmd("close")
      vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
    end
  end)

  h.step("<CR> on the fact the last boundary lost jumps to its line in the tree", function()
    h.cursor_to(env("SESSIOND_BOUNDARY"))
    h.press_until("K", "SessiondAuditShown", "the boundary's audit")
    h.wait_message("compact boundary", "explain the boundary", true)
    local at
    for i, l in ipairs(h.lines()) do
      if l:find("✗ ", 1, true) == 1 then
        at = at or i
      end
    end
    assert(at, "no lost fact in the audit")
    vim.api.nvim_win_set_cursor(0, { at, 0 })
    report.lostJumpLine = vim.api.nvim_get_current_line()
    h.press_until("<CR>", "SessiondRevealed", "the jump to the tree")
    report.lostJump = { tree = vim.bo.filetype == "sessiondtree", id = h.cursor_id(), fold = vim.fn.foldclosed(".") }
    local audit_buf = vim.fn.bufnr("sessiond://audit/" .. FILE)
    vim.api.nvim_win_close(vim.fn.bufwinid(audit_buf), true)
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
  end)

  h.step(":SessiondGraph draws the transcript's graph", function()
    local gbuf = h.open_view("SessiondGraph", "sessiondgraph", 5, "the graph buffer")
    local cli = vim.system({ env("SESSIOND_BIN"), "graph", FILE }):wait()
    report.graph = { lines = h.lines(gbuf), cli = vim.split(cli.stdout, "\n", { trimempty = true }) }
    vim.cmd("close")
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
  end)

  h.step("D compares a leaf from before both compactions with the resume leaf", function()
    h.cursor_to(env("SESSIOND_OLD_LEAF"))
    local tree_tab = vim.api.nvim_get_current_tabpage()
    h.press_until("D", "SessiondDiffShown", "the comparison")
    local wins = {}
    for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
      local b = vim.api.nvim_win_get_buf(w)
      table.insert(wins, { name = vim.api.nvim_buf_get_name(b), diff = vim.wo[w].diff, lines = h.lines(b) })
    end
    report.diff = wins
    vim.cmd("tabclose")
    vim.api.nvim_set_current_tabpage(tree_tab)
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
  end)

  h.step("f forks the transcript into a new one", function()
    h.cursor_to(env("SESSIOND_FORK_AT"))
    h.press("f")
    report.fork = h.wait_message("forked at " .. env("SESSIOND_FORK_AT"), "fork", true)
    local path = report.fork:match(" into (.-) %(%d+ entries%)")
    local s = require("sessiond.sessions").sessions[path]
    report.forkFormat = s and s.format
  end)

  h.step("a pi session beside it still offers its writes", function()
    vim.cmd("SessiondTree " .. vim.fn.fnameescape(env("SESSIOND_PI_FILE")))
    h.wait(function()
      return vim.bo.filetype == "sessiondtree" and vim.b.sessiond_path == vim.uv.fs_realpath(env("SESSIOND_PI_FILE"))
        and vim.api.nvim_buf_line_count(0) > 1000
    end, "the pi session's tree")
    report.piTree = { header = h.lines()[2], mappings = mappings() }
  end)

  h.step("gf on the graph's subagent line opens the subagent's transcript; gf on its started-by line, the parent's", function()
    local parent = vim.uv.fs_realpath(vim.fs.joinpath(vim.fs.dirname(FILE), "with-subagent.jsonl"))
    local function graph_of(path, what)
      vim.cmd("SessiondGraph")
      h.wait(function()
        return vim.bo.filetype == "sessiondgraph" and vim.b.sessiond_path == path and vim.api.nvim_buf_line_count(0) > 3
      end, what)
      return vim.api.nvim_get_current_buf()
    end
    local function tree_of(path, what)
      h.wait(function()
        return vim.bo.filetype == "sessiondtree" and vim.b.sessiond_path == path and vim.api.nvim_buf_line_count(0) > 2
      end, what)
    end
    local function line_with(buf, pattern)
      for i, l in ipairs(h.lines(buf)) do
        if l:find(pattern) then
          return i, l
        end
      end
      error("no line " .. pattern)
    end
    vim.cmd("SessiondTree " .. vim.fn.fnameescape(parent))
    tree_of(parent, "the parent's tree")
    local gbuf = graph_of(parent, "the parent's graph")
    report.subagent = { parent = parent, mapping = mappings()["gf"] }
    -- Elsewhere gf says where to put the cursor.
    vim.api.nvim_win_set_cursor(0, { 1, 0 })
    h.press("gf")
    report.subagent.elsewhere = h.wait_message("put the cursor on a line that links", "gf off a link", true)
    local lnum, line = line_with(gbuf, "↳ subagent agent%-")
    report.subagent.line = line
    vim.api.nvim_win_set_cursor(0, { lnum, 0 })
    local opened = h.press_until("gf", "SessiondGraphLinkOpened", "gf on the subagent line")
    report.subagent.target = opened.target
    tree_of(opened.target, "the subagent's tree")
    report.subagent.tree = h.lines()
    local sbuf = graph_of(opened.target, "the subagent's graph")
    lnum, line = line_with(sbuf, "^subagent agent%-")
    report.subagent.startedBy = line
    vim.api.nvim_win_set_cursor(0, { lnum, 0 })
    report.subagent.back = h.press_until("gf", "SessiondGraphLinkOpened", "gf on the started-by line").target
    tree_of(parent, "the parent's tree again")
  end)
end)
