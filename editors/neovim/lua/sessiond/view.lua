-- sessiond.view: the buffers views draw into. One buffer per (view kind, session), named
-- `sessiond://KIND/PATH`, created once and reused: showing a view again redraws its buffer
-- (never a second buffer of the same name, E95). Each buffer knows which entry each line
-- shows (`entry_at`), so mappings and commands act on the entry under the cursor.
local M = {}

-- "kind\0path" → bufnr
local buffers = {}
-- bufnr → {ids = {lnum → id}, lines = {id → lnum}}
M.entries = {}

local function find_named(name)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b) == name then
      return b
    end
  end
end

--- The buffer of view `kind` for session `path`: the existing one or a new one.
--- Returns bufnr, created.
function M.buffer(kind, path, filetype)
  local key = kind .. "\0" .. path
  local b = buffers[key]
  if b and vim.api.nvim_buf_is_valid(b) then
    return b, false
  end
  local name = ("sessiond://%s/%s"):format(kind, path)
  b = find_named(name)
  local created = false
  if not b then
    b = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(b, name)
    created = true
  end
  buffers[key] = b
  vim.bo[b].buftype = "nofile"
  vim.bo[b].bufhidden = "hide"
  vim.bo[b].swapfile = false
  vim.bo[b].modifiable = false
  vim.b[b].sessiond_path = path
  vim.b[b].sessiond_view = kind
  if vim.bo[b].filetype ~= filetype then
    vim.bo[b].filetype = filetype
  end
  return b, created
end

--- The buffer of view `kind` for `path`, if there is one.
function M.existing(kind, path)
  local b = buffers[kind .. "\0" .. path]
  if b and vim.api.nvim_buf_is_valid(b) then
    return b
  end
end

--- Every (kind, path, buf) with a live buffer.
function M.all()
  local out = {}
  for key, b in pairs(buffers) do
    if vim.api.nvim_buf_is_valid(b) then
      local kind, path = key:match("^(.-)%z(.*)$")
      table.insert(out, { kind = kind, path = path, buf = b })
    end
  end
  return out
end

--- Windows of the current tab page showing `buf`.
function M.windows(buf)
  return vim.tbl_filter(function(w)
    return vim.api.nvim_win_get_buf(w) == buf
  end, vim.api.nvim_tabpage_list_wins(0))
end

--- Shows `buf`: focuses a window that shows it, else opens one with `split` (an Ex command
--- such as "botright vsplit"). Returns the window.
function M.show(buf, split, size)
  local wins = M.windows(buf)
  if wins[1] then
    vim.api.nvim_set_current_win(wins[1])
    return wins[1]
  end
  -- An empty split: the current window.
  if split ~= "" then
    vim.cmd(split or "botright split")
  end
  local win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(win, buf)
  if size and split ~= "" then
    if (split or ""):match("vsplit") or (split or ""):match("vertical") then
      vim.api.nvim_win_set_width(win, size)
    else
      vim.api.nvim_win_set_height(win, size)
    end
  end
  return win
end

--- Replaces the lines of `buf` (a read-only view) and what entry each line shows.
function M.set_lines(buf, lines, ids)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  local by_id = {}
  for lnum, id in pairs(ids or {}) do
    if not by_id[id] then
      by_id[id] = lnum
    end
  end
  M.entries[buf] = { ids = ids or {}, lines = by_id }
end

--- The entry id shown on line `lnum` of `buf` (default: the cursor's line), or nil.
function M.entry_at(buf, lnum)
  buf = buf or vim.api.nvim_get_current_buf()
  local e = M.entries[buf]
  if not e then
    return nil
  end
  if not lnum then
    local win = M.windows(buf)[1]
    if vim.api.nvim_get_current_buf() == buf then
      win = vim.api.nvim_get_current_win()
    end
    if not win then
      return nil
    end
    lnum = vim.api.nvim_win_get_cursor(win)[1]
  end
  return e.ids[lnum]
end

--- The line of `buf` that shows entry `id`, or nil.
function M.line_of(buf, id)
  local e = M.entries[buf]
  return e and e.lines[id] or nil
end

--- Closes the view's window (`q`); in the last window, shows the alternate buffer instead.
function M.close()
  if #vim.api.nvim_tabpage_list_wins(0) > 1 then
    vim.cmd("close")
  elseif vim.fn.bufnr("#") > 0 and vim.fn.buflisted(vim.fn.bufnr("#")) == 1 then
    vim.cmd("buffer #")
  else
    vim.cmd("enew")
  end
end

return M
