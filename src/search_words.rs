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

/// The words of one text, cut as they are asked for: one token reused, its text written
/// over (no allocation per word; cutting every word into a `Vec` of owned tokens first was a
/// quarter of an index build's time, most of it in the allocator).
pub struct WordStream<'a> {
    text: &'a str,
    /// Where the next word is looked for.
    at: usize,
    /// The last character of the current run of characters written without spaces (its
    /// byte offset and length), and whether the run has given a pair yet.
    run: Option<(usize, usize)>,
    paired: bool,
    /// Words given so far (the next word's position).
    given: usize,
    token: Token,
}

impl Tokenizer for Words {
    type TokenStream<'a> = WordStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream<'a> {
        WordStream {
            text,
            at: 0,
            run: None,
            paired: false,
            given: 0,
            token: Token::default(),
        }
    }
}

impl WordStream<'_> {
    /// Where a word of letters and digits that goes on at `from` ends.
    fn word_end(&self, from: usize) -> usize {
        let mut end = from;
        for d in self.text[from..].chars() {
            if unspaced(d) || !d.is_alphanumeric() {
                break;
            }
            end += d.len_utf8();
        }
        end
    }

    /// Makes `text[from..to]` the current token.
    fn give(&mut self, from: usize, to: usize) -> bool {
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.position = self.given;
        self.token.position_length = 1;
        self.token.text.clear();
        self.token.text.push_str(&self.text[from..to]);
        self.given += 1;
        true
    }
}

impl TokenStream for WordStream<'_> {
    /// The next word: a run of letters and digits; in a run of characters written without
    /// spaces each pair of neighbours, or the one character of a run of one.
    fn advance(&mut self) -> bool {
        loop {
            // ASCII (most of what sessions hold) is read byte by byte: a letter or digit
            // starts a word, anything else separates words.
            let bytes = self.text.as_bytes();
            if self.run.is_none() {
                while self.at < bytes.len() && bytes[self.at] < 0x80 {
                    if bytes[self.at].is_ascii_alphanumeric() {
                        let start = self.at;
                        let mut end = start + 1;
                        while end < bytes.len() && bytes[end].is_ascii_alphanumeric() {
                            end += 1;
                        }
                        if end < bytes.len() && bytes[end] >= 0x80 {
                            // The word may go on in letters of other scripts.
                            end = self.word_end(end);
                        }
                        self.at = end;
                        return self.give(start, end);
                    }
                    self.at += 1;
                }
            }
            let Some(c) = self.text[self.at..].chars().next() else {
                // The end: a run of one character is a word of its own.
                return match self.run.take() {
                    Some((i, n)) if !self.paired => self.give(i, i + n),
                    _ => false,
                };
            };
            let (at, n) = (self.at, c.len_utf8());
            if unspaced(c) {
                self.at += n;
                match self.run.replace((at, n)) {
                    Some((prev, _)) => {
                        self.paired = true;
                        return self.give(prev, at + n);
                    }
                    None => {
                        self.paired = false;
                        continue;
                    }
                }
            }
            // Not such a character: a run of one before it is a word (`c` is read again).
            if let Some((i, len)) = self.run.take()
                && !self.paired
            {
                return self.give(i, i + len);
            }
            if c.is_alphanumeric() {
                let end = self.word_end(at + n);
                self.at = end;
                return self.give(at, end);
            }
            self.at += n;
        }
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
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
        assert_eq!(texts("配"), ["配"]);
        assert!(texts(" ,; ").is_empty());
    }

    #[test]
    fn words_carry_their_byte_ranges_and_positions() {
        let mut a = analyzer();
        let mut s = a.token_stream("go 配置文 x 好");
        let mut out = Vec::new();
        while s.advance() {
            let t = s.token();
            out.push((t.text.clone(), t.offset_from, t.offset_to, t.position));
        }
        let expected = [
            ("go", 0, 2, 0),
            ("配置", 3, 9, 1),
            ("置文", 6, 12, 2),
            ("x", 13, 14, 3),
            ("好", 15, 18, 4),
        ];
        let expected: Vec<_> = expected
            .iter()
            .map(|&(t, a, b, p)| (t.to_owned(), a, b, p))
            .collect();
        assert_eq!(out, expected);
    }
}
