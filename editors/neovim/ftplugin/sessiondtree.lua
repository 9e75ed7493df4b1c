-- The sessiond tree view (see :help sessiond-tree): read-only, with the view mappings.
if vim.b.did_ftplugin then
  return
end
vim.b.did_ftplugin = true
vim.bo.modifiable = false
vim.bo.swapfile = false
require("sessiond.mappings").apply(0, "tree")
vim.b.undo_ftplugin = "setlocal modifiable< swapfile<"
