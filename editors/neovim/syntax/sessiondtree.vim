" Syntax of the sessiond tree view (filetype sessiondtree; see :help sessiond-tree).
if exists("b:current_syntax")
  finish
endif

syntax match sessiondTreeTitle /\%1l.*/
syntax match sessiondTreeHeader /\%2l.*/
syntax match sessiondTreeMore /\%>2l^… .*/
syntax match sessiondTreeRow /\%>2l^[│├└─ ]*\S\+ \S\+.*$/ contains=sessiondTreeGuide,sessiondTreeId
syntax match sessiondTreeGuide /[│├└─┆]/ contained
syntax match sessiondTreeId /\%(^[│├└─ ]*\)\@<=\S\+/ contained nextgroup=sessiondTreeKind skipwhite
syntax match sessiondTreeKind /\S\+/ contained skipwhite
      \ nextgroup=sessiondTreePreview,sessiondTreeLabel,sessiondTreeLeaf
      \ contains=sessiondTreeUser,sessiondTreeAssistant,sessiondTreeTool,sessiondTreeCompaction,sessiondTreeSummary,sessiondTreeMeta
" After the kind: the leaf mark, then the label, then the preview (defined last wins a tie).
syntax match sessiondTreePreview /.*$/ contained
syntax match sessiondTreeLabel /\[[^\[\]]*\]/ contained nextgroup=sessiondTreePreview skipwhite
syntax match sessiondTreeLeaf /◀ \%(active, \)\=\%(resume leaf\|leaf\|active\)/ contained
      \ nextgroup=sessiondTreePreview,sessiondTreeLabel skipwhite
syntax match sessiondTreeUser /\<user\>/ contained
syntax match sessiondTreeAssistant /\<assistant\>/ contained
syntax match sessiondTreeTool /\<\%(toolResult\|bashExecution\)\>/ contained
syntax match sessiondTreeCompaction /\<compaction\>/ contained
syntax match sessiondTreeSummary /\<branch_summary\>/ contained
syntax match sessiondTreeMeta /\<\%(label\|session_info\|model_change\|thinking_level_change\|custom\|custom_message\|context_edit\)\>/ contained

highlight default link sessiondTreeTitle Title
highlight default link sessiondTreeHeader Comment
highlight default link sessiondTreeMore WarningMsg
highlight default link sessiondTreeGuide NonText
highlight default link sessiondTreeId Identifier
highlight default link sessiondTreeKind Type
highlight default link sessiondTreeUser Statement
highlight default link sessiondTreeAssistant Function
highlight default link sessiondTreeTool Constant
highlight default link sessiondTreeCompaction Special
highlight default link sessiondTreeSummary Special
highlight default link sessiondTreeMeta PreProc
highlight default link sessiondTreePreview Normal
highlight default link sessiondTreeLabel Tag
highlight default link sessiondTreeLeaf Todo
highlight default SessiondTreeActivePath gui=bold,underline cterm=bold,underline

let b:current_syntax = "sessiondtree"
