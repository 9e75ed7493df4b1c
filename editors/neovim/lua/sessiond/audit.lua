-- sessiond.audit: where a summary came from and what it kept, in a scratch buffer
-- `sessiond://audit/PATH` (filetype `sessiondaudit`), from session/explain on a compaction or a
-- branch summary (`source` or `branch`, and `audit {kept, lost, probes}`). Each fact is a line
-- naming the entry it came from; <CR> on it jumps to that entry in the tree view. This is how a
-- user answers "why did the model forget X": it was in the span the summary replaced, and the
-- summary dropped it. On a Claude Code transcript the summary is a compact boundary or the
-- compaction summary line after it (both carry the same audit), and its span is counted in lines;
-- on a Codex rollout it is a `compacted` line, and its span is counted in lines too.
local client = require("sessiond.client")
local config = require("sessiond.config")
local sessions = require("sessiond.sessions")
local view = require("sessiond.view")

local M = {}

local function str(v)
  if v == nil or v == vim.NIL then
    return "-"
  end
  return tostring(v)
end

--- Whether an explain result carries an audit (a compaction's or a branch summary's).
function M.has_audit(r)
  return type(r) == "table" and type(r.audit) == "table"
end

--- The audit document for explain result `r` on session `s`: lines and ids (lnum → the entry
--- the line stands for: each fact's source entry; the summary itself on the heading). Pure.
function M.render(r, s)
  local lines, ids = {}, {}
  local function add(l, id)
    table.insert(lines, l)
    if id then
      ids[#lines] = id
    end
  end
  local a = r.audit
  -- A Claude Code transcript: entries are lines, and the summary is a compact boundary or the
  -- compaction summary line after it.
  local claude = s.format == "claude-code"
  local codex = s.format == "codex"
  local lines_unit = claude or codex
  local unit = lines_unit and "line" or "entry"
  local heading
  if claude then
    heading = ("line %s, the %s %s"):format(str(r.line), r.type == "system" and "compact boundary" or "compaction summary",
      str(r.entryId))
  elseif codex then
    heading = ("line %s, the compaction %s"):format(str(r.line), str(r.entryId))
  else
    heading = ("%s %s"):format(str(r.type), str(r.entryId))
  end
  add(("# Audit of %s — %s"):format(heading, sessions.title(s)), r.entryId)
  add("")
  if type(r.source) == "table" then
    local src = r.source
    local n = src.count or 0
    add(("- summarizes %d %s %s…%s, keeps from %s"):format(n, n == 1 and unit or (lines_unit and "lines" or "entries"),
      str(src.firstId), str(src.lastId), str(src.firstKeptEntryId)), src.firstId)
    if type(src.previousCompactionId) == "string" then
      add(("- after %s %s"):format(claude and "compact boundary" or "compaction", src.previousCompactionId),
        src.previousCompactionId)
    end
  end
  if type(r.branch) == "table" then
    local b = r.branch
    add(("- summarizes the branch of %s %s…%s (from %s), which left this path after %s"):format(
      sessions.count(b.count or 0, "entry", "entries"), str(b.firstId), str(b.lastId), str(b.fromId), str(b.leftAtId)),
      b.fromId)
  end
  local total = (a.kept or 0) + (a.lost or 0)
  add(("- kept %d of %d %s, lost %d"):format(a.kept or 0, total, total == 1 and "fact" or "facts", a.lost or 0))
  add(("- <CR> on a fact jumps to the %s it came from"):format(unit))
  local lost, kept = {}, {}
  for _, p in ipairs(a.probes or {}) do
    table.insert(p.status == "lost" and lost or kept, p)
  end
  local width = 4
  for _, p in ipairs(a.probes or {}) do
    width = math.max(width, #str(p.kind))
  end
  local function section(title, list)
    add("")
    add(("## %s (%d)"):format(title, #list))
    for _, p in ipairs(list) do
      local line = ("%s %s%s  ← %s"):format(p.status == "lost" and "✗" or "✓", str(p.kind),
        string.rep(" ", width - #str(p.kind)) .. "  " .. (str(p.text):gsub("\n", " ")), str(p.entryId))
      if type(p.foundIn) == "string" then
        line = line .. " (found in " .. p.foundIn .. ")"
      end
      add(line, type(p.entryId) == "string" and p.entryId or nil)
    end
  end
  section("Lost", lost)
  section("Kept", kept)
  return lines, ids
end

--- Shows the audit of explain result `r` on `s` (the audit buffer, reused); cb(buf).
function M.show(s, r, cb)
  local buf, created = view.buffer("audit", s.path, "sessiondaudit")
  if created then
    M.apply_mappings(buf)
  end
  local lines, ids = M.render(r, s)
  view.set_lines(buf, lines, ids)
  vim.b[buf].sessiond_entry = r.entryId
  local win = view.show(buf, config.options.context.split)
  vim.wo[win].wrap = false
  vim.wo[win].foldenable = false
  vim.api.nvim_win_set_cursor(win, { 1, 0 })
  vim.api.nvim_exec_autocmds("User", { pattern = "SessiondAuditShown", data = { path = s.path, entryId = r.entryId } })
  if cb then
    cb(buf)
  end
end

--- <CR> in the audit buffer: to the entry the fact under the cursor came from, in the tree.
function M.jump()
  local buf = vim.api.nvim_get_current_buf()
  local s = sessions.sessions[vim.b[buf].sessiond_path or ""]
  local id = view.entry_at(buf)
  if not s or not id then
    return client.notify("put the cursor on a fact of the audit (a line naming an entry)", vim.log.levels.WARN)
  end
  require("sessiond.tree").reveal(s, id)
end

--- The audit buffer's mappings: <CR> (config.mappings.context) jumps, q closes.
function M.apply_mappings(buf)
  local maps = config.options.mappings or {}
  local jump = maps.context or "<CR>"
  if jump ~= false and jump ~= "" then
    vim.keymap.set("n", jump, M.jump, { buffer = buf, nowait = true, silent = true,
      desc = "sessiond: jump to the entry this fact came from" })
  end
  if maps.close and maps.close ~= "" then
    vim.keymap.set("n", maps.close, function() view.close() end, { buffer = buf, nowait = true, silent = true,
      desc = "sessiond: close the view" })
  end
end

return M
