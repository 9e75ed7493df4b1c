-- Headless Neovim driving editors/neovim as a user would: commands typed on the command line,
-- mappings pressed on the cursor line of the tree view, answers given to vim.ui prompts; it
-- records what the buffers, lists and messages then hold in a JSON report that
-- tests/neovim.rs checks against the CLI and the session file.
--
-- Env: SESSIOND_HARNESS (tests/neovim/harness.lua), SESSIOND_PLUGIN (editors/neovim),
-- SESSIOND_BIN, SESSIOND_ROOT, SESSIOND_FILE (a copy of examples/pi-v3-branched.jsonl under the
-- root), SESSIOND_APPEND and SESSIOND_APPEND2 (lines another process appends), SESSIOND_OUT (the
-- report).
local h = dofile(os.getenv("SESSIOND_HARNESS"))
local env, report, wait_message, wait, press = h.env, h.report, h.wait_message, h.wait, h.press
local open_view, press_until, step, lines = h.open_view, h.press_until, h.step, h.lines
local line_of, cursor_to, cursor_id = h.line_of, h.cursor_to, h.cursor_id
local FILE = env("SESSIOND_FILE")
local function append(line)
  -- Another process writes: the shell, not this Neovim.
  local r = vim.system({ "sh", "-c", 'printf "%s\\n" "$1" >> "$2"', "sh", line, FILE }):wait()
  assert(r.code == 0, r.stderr)
end

h.run(function()
  h.load_plugin()

  step("commands exist before setup()", function()
    report.commandsBeforeSetup = {}
    for _, c in ipairs({ "SessiondOpen", "SessiondList", "SessiondTree", "SessiondContext", "SessiondExplain",
      "SessiondFork", "SessiondLabel", "SessiondCompact", "SessiondVerify", "SessiondSearch", "SessiondRestart", "SessiondGraph",
      "SessiondDiff", "SessiondSessions" }) do
      report.commandsBeforeSetup[c] = vim.fn.exists(":" .. c) == 2
    end
  end)

  require("sessiond").setup({ cmd = { env("SESSIOND_BIN"), "serve", "--root", env("SESSIOND_ROOT") } })

  step("a command before any open says what to do", function()
    vim.cmd("SessiondTree")
    report.beforeOpen = wait_message("no session open", "before open", true)
  end)

  step(":SessiondOpen", function()
    vim.cmd("SessiondOpen " .. vim.fn.fnameescape(FILE))
    report.open = wait_message("entries", "after open", true)
  end)

  local tree_buf
  step(":SessiondTree shows the whole tree", function()
    tree_buf = open_view("SessiondTree", "sessiondtree", 1000, "the tree buffer")
    local ids = {}
    local tl = lines()
    for i = 3, #tl do
      local id = tl[i]:match("^[│├└─ ]*(%S+) ")
      table.insert(ids, id)
    end
    local closed = 0
    local i = 1
    while i <= #tl do
      local e = vim.fn.foldclosedend(i)
      if e ~= -1 then
        closed = closed + 1
        i = e
      end
      i = i + 1
    end
    report.tree = {
      name = vim.api.nvim_buf_get_name(0),
      filetype = vim.bo.filetype,
      syntax = vim.b.current_syntax,
      header = { tl[1], tl[2] },
      ids = ids,
      closedFolds = closed,
      foldText = vim.fn.foldtextresult(line_of("c62d6448")),
      foldTextInside = vim.fn.foldtextresult(line_of("c62d6448") + 3),
      leafLines = vim.tbl_filter(function(l)
        return l:find("◀", 1, true) ~= nil
      end, tl),
      branchLines = vim.tbl_filter(function(l)
        return l:find("├─", 1, true) ~= nil or l:find("└─", 1, true) ~= nil
      end, tl),
      labelled = tl[line_of("e82f60b2")],
      compaction = tl[line_of("4909db93")],
      q = vim.fn.maparg("q", "n", false, true).desc,
      K = vim.fn.maparg("K", "n", false, true).desc,
    }
  end)

  step("a second :SessiondTree reuses the buffer", function()
    local wins = #vim.api.nvim_tabpage_list_wins(0)
    vim.cmd("wincmd p")
    vim.cmd("SessiondTree")
    wait(function()
      return vim.api.nvim_get_current_buf() == tree_buf
    end, "the tree again")
    report.reuse = {
      sameBuffer = vim.api.nvim_get_current_buf() == tree_buf,
      windowsBefore = wins,
      windowsAfter = #vim.api.nvim_tabpage_list_wins(0),
      treeBuffers = #vim.tbl_filter(function(b)
        return vim.api.nvim_buf_get_name(b):match("^sessiond://tree/") ~= nil
      end, vim.api.nvim_list_bufs()),
    }
  end)

  step("K explains the entry under the cursor", function()
    cursor_to("00247798")
    press("K")
    report.explain = wait_message("Entry 00247798", "explain", true)
  end)

  step("gr, p, ]l, [b, ]b move between entries", function()
    press("gr")
    report.jumps = { referenced = cursor_id() }
    press("p")
    report.jumps.parent = cursor_id()
    press("]l")
    report.jumps.leaf = cursor_id()
    press("[b")
    report.jumps.prevBranch = cursor_id()
    cursor_to("00247798")
    press("]b")
    report.jumps.nextBranch = cursor_id()
  end)

  step("<CR> shows the context at the entry; diagnostics go to the location list", function()
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
    cursor_to("088a3b48")
    press_until("<CR>", "SessiondContextShown", "the context view")
    local msg = wait_message("context at 088a3b48", "context", true)
    local cl = lines()
    report.context = {
      name = vim.api.nvim_buf_get_name(0),
      message = msg,
      leafLine = cl[4],
      headings = #vim.tbl_filter(function(l)
        return l:match("^## %d+%. ") ~= nil
      end, cl),
      loclist = #vim.fn.getloclist(0),
      firstDiagnostic = (vim.fn.getloclist(0)[1] or {}).text,
    }
    -- The tree marks the active leaf.
    wait(function()
      return (vim.api.nvim_buf_get_lines(tree_buf, 1, 2, false)[1] or ""):find("active leaf 088a3b48", 1, true) ~= nil
    end, "the active leaf in the tree header")
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
    -- Back to the resume leaf.
    vim.cmd("SessiondContext 610f9c1e")
    wait_message("context at 610f9c1e", "context at the resume leaf", true)
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
  end)

  step("L labels the entry under the cursor; the open view follows", function()
    cursor_to("521cf246")
    vim.ui.input = function(opts, on_confirm)
      report.labelPrompt = opts.prompt
      on_confirm("before refactor")
    end
    press("L")
    wait_message("labelled 521cf246", "label", true)
    wait(function()
      local l = line_of("521cf246", tree_buf)
      return l and lines(tree_buf)[l]:find("[before refactor]", 1, true) ~= nil
    end, "the label in the tree")
    report.label = { line = lines(tree_buf)[line_of("521cf246", tree_buf)], cursor = cursor_id() }
  end)

  local graph_buf
  step(":SessiondGraph draws the graph; <CR> jumps to the entry in the tree", function()
    graph_buf = open_view("SessiondGraph", "sessiondgraph", 5, "the graph buffer")
    local cli = vim.system({ env("SESSIOND_BIN"), "graph", FILE }):wait()
    local gl = lines()
    report.graph = {
      name = vim.api.nvim_buf_get_name(0),
      lines = gl,
      cli = vim.split(cli.stdout, "\n", { trimempty = true }),
      jump = vim.fn.maparg("<CR>", "n", false, true).desc,
    }
    local function jump_from(text)
      vim.api.nvim_set_current_win(vim.fn.bufwinid(graph_buf))
      local at
      for i, l in ipairs(lines(graph_buf)) do
        if l:find(text, 1, true) then
          at = i
        end
      end
      assert(at, text .. " is not in the graph")
      vim.api.nvim_win_set_cursor(0, { at, 0 })
      press_until("<CR>", "SessiondGraphJumped", "the jump from " .. text)
      return { buf = vim.api.nvim_get_current_buf() == tree_buf, id = cursor_id(), fold = vim.fn.foldclosed(".") }
    end
    report.graph.jumpFold = jump_from("74473962…")
    report.graph.jumpCompaction = jump_from("4909db93 compaction")
    -- The graph's window closes; its buffer stays and follows the session.
    vim.api.nvim_set_current_win(vim.fn.bufwinid(graph_buf))
    press("q")
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
  end)

  step("an append by another process appears in the open tree", function()
    cursor_to("de19adb3")
    local before = vim.api.nvim_buf_line_count(tree_buf)
    append(env("SESSIOND_APPEND"))
    wait(function()
      return line_of("a0a0a0a0", tree_buf) ~= nil
    end, "the appended entry in the tree")
    wait(function()
      for _, l in ipairs(lines(graph_buf)) do
        if l:find("a0a0a0a0 user", 1, true) and l:find("resume leaf", 1, true) then
          return true
        end
      end
    end, "the appended entry in the graph")
    -- The context view, opened at the resume leaf, moved with it.
    local ctx_buf = vim.fn.bufnr("sessiond://context/" .. vim.uv.fs_realpath(FILE))
    wait(function()
      return (vim.api.nvim_buf_get_lines(ctx_buf, 3, 4, false)[1] or ""):find("a0a0a0a0", 1, true) ~= nil
    end, "the context view at the new resume leaf")
    report.append = {
      contextLeafLine = vim.api.nvim_buf_get_lines(ctx_buf, 3, 4, false)[1],
      linesBefore = before,
      linesAfter = vim.api.nvim_buf_line_count(tree_buf),
      line = lines(tree_buf)[line_of("a0a0a0a0", tree_buf)],
      cursor = cursor_id(),
      header = lines(tree_buf)[2],
    }
  end)

  step("f forks at the entry under the cursor", function()
    cursor_to("886c2fdc")
    press("f")
    report.fork = wait_message("forked at 886c2fdc", "fork", true)
  end)

  step("C compacts from the entry: dry run, confirm, write", function()
    cursor_to("088a3b48")
    vim.ui.select = function(items, opts, on_choice)
      report.compactPrompt = opts.prompt
      report.compactChoices = items
      on_choice("Compact")
    end
    press("C")
    report.compact = wait_message("compacted the context of 088a3b48", "compact", true)
    local id = assert(report.compact:match("New entry (%S+)%."), report.compact)
    wait(function()
      return line_of(id, tree_buf) ~= nil
    end, "the compaction in the tree")
    report.compactLine = lines(tree_buf)[line_of(id, tree_buf)]
  end)

  step("an unknown id says what to do", function()
    vim.cmd("SessiondExplain deadbeef")
    report.unknownId = wait_message("deadbeef", "unknown id", true)
  end)

  step("entry ids complete", function()
    report.completion = vim.fn.getcompletion("SessiondExplain 4909", "cmdline")
    report.completionLeaves = vim.fn.getcompletion("SessiondContext ", "cmdline")
  end)

  step(":SessiondVerify and :SessiondSearch only when the daemon offers them", function()
    local client = require("sessiond.client")
    report.offers = { verify = client.offers("session/verifyResume"), search = client.offers("session/search") }
    vim.cmd("SessiondVerify")
    if report.offers.verify then
      report.verify = wait_message("sessiond verify", "verify", true)
      report.verifyQuickfix = vim.fn.getqflist({ title = 1, size = 1, items = 1 })
      report.verifyQuickfix.items = vim.tbl_map(function(it)
        return { text = it.text, type = it.type, file = vim.api.nvim_buf_get_name(it.bufnr) }
      end, report.verifyQuickfix.items)
    else
      report.verify = wait_message("does not offer session/verifyResume", "verify refused", true)
    end
    vim.cmd("SessiondSearch runRpcMode")
    if report.offers.search then
      report.search = wait_message("hits for", "search", true)
    else
      report.search = wait_message("does not offer session/search", "search refused", true)
    end
    -- The finding → quickfix mapping, on the shape session/verifyResume answers.
    report.verifyItems = require("sessiond.actions").verify_items({
      findings = {
        { status = "ok", kind = "file", message = "unchanged", path = "/x/a.ts" },
        { status = "warn", kind = "fileChanged", message = "changed since the session read it", path = "/x/b.ts", entryId = "abcd1234" },
        { status = "fail", kind = "cwdMissing", message = "the working directory is gone" },
      },
    }, FILE)
  end)

  step(":SessiondList picks a session", function()
    vim.ui.select = function(items, opts, on_choice)
      report.list = { prompt = opts.prompt, items = vim.tbl_map(opts.format_item, items) }
      for _, it in ipairs(items) do
        if it.path == vim.uv.fs_realpath(FILE) then
          return on_choice(it)
        end
      end
      on_choice(nil)
    end
    vim.cmd("SessiondList")
    wait(function()
      return report.list ~= nil and vim.api.nvim_get_current_buf() == tree_buf
    end, "the picked session's tree")
  end)

  step("a killed daemon is restarted and the session opened again", function()
    local client = require("sessiond.client")
    local pid = assert(client.pid(), "no daemon pid")
    report.killedPid = pid
    vim.uv.kill(pid, "sigkill")
    report.crash = wait_message("stopped unexpectedly", "the crash report", true)
    report.restarted = wait_message("open again", "the restart", true)
    report.newPid = client.pid()
    -- The new daemon follows the file: another append reaches the open view.
    append(env("SESSIOND_APPEND2"))
    wait(function()
      return line_of("b1b1b1b1", tree_buf) ~= nil
    end, "an append after the restart")
    report.afterRestart = lines(tree_buf)[line_of("b1b1b1b1", tree_buf)]
  end)

  step("a file replaced under the open view is read again", function()
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
    cursor_to("521cf246")
    local tmp = FILE .. ".new"
    -- Kept for the checks of the writes made so far.
    assert(vim.system({ "cp", FILE, FILE .. ".before-replace" }):wait().code == 0)
    local r = vim.system({ "cp", env("SESSIOND_ORIGINAL"), tmp }):wait()
    assert(r.code == 0, r.stderr)
    assert(vim.uv.fs_rename(tmp, FILE))
    report.reloaded = wait_message("was read again", "the reload", true)
    wait(function()
      return line_of("b1b1b1b1", tree_buf) == nil and vim.api.nvim_buf_line_count(tree_buf) == 1035
    end, "the tree of the replaced file")
    report.afterReload = { lines = vim.api.nvim_buf_line_count(tree_buf), cursor = cursor_id(),
      header = lines(tree_buf)[1] }
  end)

  step(":SessiondOpen FILE | SessiondTree in one go", function()
    vim.cmd("only")
    vim.cmd("enew")
    require("sessiond.sessions").current = nil
    vim.cmd("SessiondOpen " .. vim.fn.fnameescape(FILE) .. " | SessiondTree")
    wait(function()
      return vim.api.nvim_get_current_buf() == tree_buf
    end, "the tree after open | tree")
    report.chained = true
  end)

  step("q closes the view", function()
    vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
    press("q")
    report.closed = vim.fn.bufwinid(tree_buf) == -1
  end)

  step(":checkhealth sessiond", function()
    vim.cmd("checkhealth sessiond")
    wait(function()
      return vim.bo.filetype == "checkhealth" and table.concat(lines(), "\n"):find("protocol", 1, true) ~= nil
    end, "the health report")
    report.health = lines()
  end)

  step(":helptags and :help", function()
    local doc = env("SESSIOND_PLUGIN") .. "/doc"
    vim.cmd("helptags " .. vim.fn.fnameescape(doc))
    report.help = {}
    for _, tag in ipairs({ "sessiond", "sessiond-setup", ":SessiondTree", ":SessiondVerify", "sessiond-mappings",
      "sessiond-lazy", "sessiond-health", "sessiond-tree", ":SessiondDiff", "sessiond-audit", "sessiond-claude-code" }) do
      report.help[tag] = pcall(vim.cmd, "help " .. tag)
    end
  end)
end)
