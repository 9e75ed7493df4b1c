-- sessiond.config: the options of require("sessiond").setup() and their defaults.
local M = {}

M.defaults = {
  -- How to start the daemon (`sessiond serve`); "--root", DIR widens the session roots.
  cmd = { "sessiond", "serve" },
  -- Session roots sent as initializationOptions.roots (nil: the daemon's own: --root, else
  -- pi's sessions directory).
  roots = nil,
  -- Restart the daemon when it exits without being asked to, and open its sessions again.
  restart = true,
  -- At most this many restarts within `restart_window_ms`; then give up and say so.
  max_restarts = 3,
  restart_window_ms = 60000,
  -- Views follow their session as entries arrive (session/didChange, didReload).
  follow = true,
  -- Milliseconds to gather bursts of appended entries before a view is redrawn.
  follow_delay_ms = 50,
  -- The tree view: how to open it (a command run before the buffer is shown), and folds.
  tree = {
    split = "botright vsplit",
    width = 110,
    -- Runs of this many entries with one child each (and no label, leaf, compaction…) fold.
    min_fold = 3,
  },
  context = { split = "botright split" },
  -- The graph view (:SessiondGraph): how to open it, and its own mappings.
  graph = {
    split = "botright vsplit",
    width = 120,
    mappings = {
      jump = "<CR>", -- the entry of this line in the tree view
      subagent = "gf", -- the transcript this line links to: a subagent's, or the one that started it
      refresh = "R",
      close = "q",
    },
  },
  -- The sessions view (:SessiondSessions): how to open it, and its own mappings.
  sessions = {
    split = "botright split",
    height = 15,
    mappings = {
      open = "<CR>", -- the tree of this session
      refresh = "R", -- list the roots again
      close = "q",
    },
  },
  -- Pickers: "auto" uses Telescope when it is installed, else vim.ui.select.
  picker = "auto",
  -- Buffer mappings of the tree and context views; false disables one.
  mappings = {
    context = "<CR>", -- context at the entry under the cursor (as the leaf)
    explain = "K", -- whether the entry reaches the model at the active leaf, and why (a summary's audit)
    diff = "D", -- compare the leaf under the cursor with the active leaf (:SessiondDiff)
    fork = "f", -- fork the path to this entry into a new session
    fork_before = "F", -- fork before this user message (to ask it again)
    label = "L", -- set or clear the entry's label
    compact = "C", -- compact the path to this entry (dry run first, then confirm)
    rewind = "gR", -- rewind the files the session changed after this entry (diff first, then confirm)
    verify = "V", -- check before resuming at this entry (when the daemon offers it)
    parent = "p", -- jump to the parent entry
    next_branch = "]b", -- next branch point below
    prev_branch = "[b", -- previous branch point above
    leaf = "]l", -- the leaf this entry leads to (along the active path, else the latest child)
    referenced = "gr", -- the entry the last explain pointed to (a compaction, an edit, a fork)
    refresh = "R", -- fetch the view again
    close = "q",
    help = "g?",
  },
}

M.options = vim.deepcopy(M.defaults)

--- Merges `opts` over the defaults (not over earlier options: setup() may run again).
function M.set(opts)
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  return M.options
end

return M
