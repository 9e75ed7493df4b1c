-- sessiond.rewind: "Rewind files to here" (session/rewind). The dry run's per-file diffs are
-- shown first, in a `diff` buffer; only then is the user asked, and only a plan that nothing
-- refuses is offered. Fires `User SessiondRewindShown` when the plan is shown and
-- `User SessiondRewound` when the files were rewound (or the rewind was cancelled or refused).
local client = require("sessiond.client")
local sessions = require("sessiond.sessions")
local view = require("sessiond.view")

local M = {}

local notify = client.notify
local ERROR, WARN = vim.log.levels.ERROR, vim.log.levels.WARN

local function fail(err)
  notify(type(err) == "table" and err.message or tostring(err), ERROR)
end

local function is_nil(v)
  return v == nil or v == vim.NIL
end

--- The refusal of a plan in one sentence.
function M.refusal_text(r)
  local paths = table.concat(r.paths or {}, ", ")
  if r.kind == "drift" then
    local verb, it = "are", "them"
    if #(r.paths or {}) == 1 then
      verb, it = "is", "it"
    end
    return ("%s %s not as the session's records leave %s (the drift says why: changed or gone since, or records that do not apply); nothing changed (:SessiondRewind! rewinds %s anyway)")
      :format(paths, verb, it, it)
  elseif r.kind == "unrestorable" then
    return ("cannot rewind %s: the session does not hold their content at the entry, or they lie outside the working directory; nothing changed (`sessiond rewind --exclude PATH` leaves one alone)")
      :format(paths)
  elseif r.kind == "relativeCwd" then
    return ("the session's working directory %s is relative: refused"):format(r.cwd or "?")
  elseif r.kind == "missingCwd" then
    return ("the working directory %s does not exist here (a session from another machine, or a moved checkout?): refused")
      :format(r.cwd or "?")
  end
  return "the session names no working directory: refused"
end

--- The lines of the plan's buffer: a head, one line per file, the drift diffs, the diffs.
function M.plan_lines(r)
  local lines = {
    ("# Rewind files to %s (leaf %s, cwd %s)%s"):format(r.entryId, is_nil(r.leafId) and "none" or r.leafId,
      is_nil(r.cwd) and "none" or r.cwd, r.applied and "" or " · dry run"),
  }
  if #r.files == 0 then
    table.insert(lines, "# no file was changed by the session after the entry")
  end
  for _, f in ipairs(r.files) do
    local name = is_nil(f.relative) and f.path or f.relative
    table.insert(lines, ("# %-9s %s: %s"):format(f.status, name, f.reason))
    if f.drift then
      table.insert(lines, "#   drift: " .. f.drift.message)
      for _, l in ipairs(vim.split(f.drift.diff or "", "\n", { trimempty = true })) do
        table.insert(lines, "#   " .. l)
      end
    end
  end
  if not is_nil(r.refusal) then
    table.insert(lines, "# REFUSED: " .. M.refusal_text(r.refusal))
  end
  for _, f in ipairs(r.files) do
    if not is_nil(f.diff) then
      vim.list_extend(lines, vim.split(f.diff, "\n", { trimempty = true }))
    end
  end
  return lines
end

local function changes(r)
  local n = 0
  for _, f in ipairs(r.files) do
    if f.status == "restore" or f.status == "remove" then
      n = n + 1
    end
  end
  return n
end

local function done(s, data)
  vim.api.nvim_exec_autocmds("User", { pattern = "SessiondRewound", data = vim.tbl_extend("force", { path = s.path }, data) })
end

--- Rewinds the files the session changed after `entry` (default: the entry under the
--- cursor) to their content there: the dry run's diffs shown, then asked. `force` rewinds
--- files that drifted, and beside a running agent.
function M.rewind(entry, force, cb)
  local cursor_id = view.entry_at()
  sessions.resolve(function(err, s)
    if err then
      return fail(err)
    end
    if not sessions.supports(s, "rewind") then
      return fail(("rewind: a %s session is not rewound (pi sessions and Claude Code transcripts only)"):format(sessions.agent_title(s.format)))
    end
    local id = (entry and entry ~= "") and entry or cursor_id
    if not id then
      return fail("rewind needs an entry: put the cursor on one in :SessiondTree, or give its id")
    end
    local params = { path = s.path, to = id, force = force or nil }
    client.request("session/rewind", vim.tbl_extend("force", params, { dryRun = true }), function(derr, dry)
      if derr then
        return fail(derr)
      end
      local buf = view.buffer("rewind", s.path, "diff")
      view.set_lines(buf, M.plan_lines(dry))
      view.show(buf, "botright split")
      vim.keymap.set("n", "q", "<cmd>close<cr>", { buffer = buf, nowait = true, silent = true, desc = "sessiond: close" })
      vim.api.nvim_exec_autocmds("User", { pattern = "SessiondRewindShown", data = { path = s.path, entryId = dry.entryId } })
      local finish = function(data, result)
        done(s, data)
        if cb then
          cb(result)
        end
      end
      if not is_nil(dry.refusal) then
        notify("rewind refused: " .. M.refusal_text(dry.refusal), WARN)
        return finish({ refused = dry.refusal.kind }, dry)
      end
      local n = changes(dry)
      if n == 0 then
        notify(("rewind to %s: nothing to change"):format(dry.entryId))
        return finish({ changed = 0 }, dry)
      end
      vim.ui.select({ "Rewind files", "Cancel" }, {
        prompt = ("sessiond: rewind %d file%s to %s (the diff is shown)?"):format(n, n == 1 and "" or "s", dry.entryId),
        kind = "sessiond.rewind",
      }, function(choice)
        if choice ~= "Rewind files" then
          notify("rewind cancelled; nothing changed")
          return finish({ cancelled = true }, nil)
        end
        client.request("session/rewind", params, function(aerr, r)
          if aerr then
            fail(aerr)
            return finish({ error = aerr.message }, nil)
          end
          if not is_nil(r.refusal) then
            notify("rewind refused: " .. M.refusal_text(r.refusal), WARN)
            return finish({ refused = r.refusal.kind }, r)
          end
          view.set_lines(buf, M.plan_lines(r))
          notify(("rewound %d file%s to %s; backup %s (`sessiond rewind --undo %s` puts them back)"):format(
            n, n == 1 and "" or "s", r.entryId, r.backupDir, r.backupDir))
          finish({ changed = n, backupDir = r.backupDir }, r)
        end)
      end)
    end)
  end)
end

return M
