//! How the search index cuts text into words ([`analyzer`], registered as [`NAME`]): runs of
//! letters and digits, as tantivy's default tokenizer finds them, except in scripts written
//! without spaces between words (Chinese, Japanese, Thai, …), where every two neighbouring
//! characters are a word (bigrams, as Lucene's CJK analyzer indexes them). `请检查配置文件`
//! is indexed as `请检 检查 查配 配置 置文 文件`, so a query for `配置` or `配置文件` (a phrase of
//! its bigrams) finds it; a lone character between other text is a word of its own.
//!
//! Why bigrams rather than a dictionary segmenter (jieba, lindera): no dictionary of tens of
//! megabytes in the binary, every such script alike, and a query is cut the same way as the
//! text, so any run of two or more characters that occurs is found. Words are lowercased and
//! those longer than 40 bytes dropped, as with tantivy's default.
//!
//! Pure: no I/O.

use tantivy::tokenizer::{
    LowerCaser, RemoveLongFilter, TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// The name the analyzer is registered under in the index's tokenizer manager.
pub const NAME: &str = "sessiond";

/// The analyzer of the index's text fields (see the module documentation).
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(Words)
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .build()
}

/// True for a character of a script written without spaces between words: Han (with the
/// iteration marks), Hiragana, Katakana (and its half-width forms), Hangul (whose particles
/// attach to words), Thai, Lao, Khmer, Myanmar and Tibetan, marks included.
pub fn unspaced(c: char) -> bool {
    matches!(u32::from(c),
        0x0E00..=0x0EFF // Thai, Lao
        | 0x0F00..=0x0FFF // Tibetan
        | 0x1000..=0x109F // Myanmar
        | 0x1780..=0x17FF // Khmer
        | 0x1100..=0x11FF // Hangul Jamo
        | 0x3005..=0x3007 // 々 〆 〇
        | 0x3040..=0x30FF // Hiragana, Katakana
        | 0x3130..=0x318F // Hangul compatibility Jamo
        | 0x31F0..=0x31FF // Katakana phonetic extensions
        | 0x3400..=0x4DBF // Han extension A
        | 0x4E00..=0x9FFF // Han
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // Han compatibility
        | 0xFF66..=0xFF9F // half-width Katakana
        | 0x20000..=0x3FFFF // Han extensions B and later
    )
}

/// The tokenizer under [`analyzer`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Words;

/// The words of one text, cut in advance.
pub struct WordStream {
    tokens: Vec<Token>,
    next: usize,
}

impl Tokenizer for Words {
    type TokenStream<'a> = WordStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream {
        WordStream {
            tokens: words(text),
            next: 0,
        }
    }
}

impl TokenStream for WordStream {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

/// The words of `text` with their byte ranges and positions.
fn words(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut push = |from: usize, to: usize| {
        out.push(Token {
            offset_from: from,
            offset_to: to,
            position: out.len(),
            text: text[from..to].to_owned(),
            position_length: 1,
        });
    };
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if unspaced(c) {
            // A run of such characters: each pair of neighbours, or the one character.
            let mut run = vec![(at, c.len_utf8())];
            while let Some(&(i, d)) = chars.peek() {
                if !unspaced(d) {
                    break;
                }
                run.push((i, d.len_utf8()));
                chars.next();
            }
            if let [(i, n)] = run[..] {
                push(i, i + n);
            }
            for pair in run.windows(2) {
                push(pair[0].0, pair[1].0 + pair[1].1);
            }
        } else if c.is_alphanumeric() {
            let mut end = at + c.len_utf8();
            while let Some(&(i, d)) = chars.peek() {
                if unspaced(d) || !d.is_alphanumeric() {
                    break;
                }
                end = i + d.len_utf8();
                chars.next();
            }
            push(at, end);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<String> {
        let mut a = analyzer();
        let mut s = a.token_stream(text);
        let mut out = Vec::new();
        while s.advance() {
            out.push(s.token().text.clone());
        }
        out
    }

    #[test]
    fn unspaced_scripts_are_cut_into_pairs() {
        assert_eq!(texts("请检查配置"), ["请检", "检查", "查配", "配置"]);
        assert_eq!(
            texts("Rust语言 is 好 fun_2"),
            ["rust", "语言", "is", "好", "fun", "2"]
        );
        assert_eq!(
            texts("設定ファイル"),
            ["設定", "定フ", "ファ", "ァイ", "イル"]
        );
        assert_eq!(texts("ภาษาไทย"), ["ภา", "าษ", "ษา", "าไ", "ไท", "ทย"]);
    }
}
