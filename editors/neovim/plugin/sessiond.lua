-- sessiond for Neovim: the commands exist from startup; the daemon starts on first use.
-- Options: require("sessiond").setup({ … }) (see :help sessiond-setup).
if vim.g.loaded_sessiond then
  return
end
vim.g.loaded_sessiond = true

require("sessiond.commands").define()
vim.api.nvim_set_hl(0, "SessiondTreeActivePath", { default = true, bold = true, underline = true })
