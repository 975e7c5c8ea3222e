//! The entity lump of a Quake 3 map (lump 0): text such as
//!
//! ```text
//! {
//! "classname" "worldspawn"
//! "message" "My map"
//! }
//! { "classname" "func_door" "model" "*1" }
//! ```
//!
//! parsed into entities, each an ordered list of key/value pairs, by the
//! rules the game's spawn code reads the text with:
//!
//! - The text ends at the first NUL byte, or at the end of the lump.
//! - Bytes 0x01–0x20 are whitespace. `//` starts a comment that runs to the
//!   end of its line, `/*` one that runs past the next `*/` (or to the end
//!   of the text); both only where a token could start.
//! - A token is a double-quoted string, which runs to the next `"` (there
//!   are no escape sequences, and it may span lines), or a bare word, which
//!   runs to the next whitespace byte. A bare `{` or `}` opens or closes an
//!   entity; quoted, `"{"` and `"}"` are strings like any other.
//! - The text is a sequence of entities: `{`, then key and value tokens in
//!   pairs, then `}`.
//! - Bytes become characters as Latin-1 (byte `b` is `U+00bb`): lossless,
//!   and the same for any input, since the game treats the text as bytes.
//!
//! A key may appear twice in one entity. [`Entity::pairs`] keeps every pair
//! in file order; readers take the first ([`Entity::get`], and the object
//! form that [`Entity`] serialises to), as the game's spawn code does.
//!
//! Anything else is an [`EntityError`] naming the byte offset (from the
//! start of the lump) where it went wrong and what was expected there. No
//! input panics, and the limits below bound what a hostile lump can make
//! the parser allocate.

use serde::ser::{Serialize, SerializeMap, Serializer};
use thiserror::Error;

/// Most entities in one lump (the game itself spawns at most 1024).
pub const MAX_ENTITIES: usize = 1 << 16;
/// Most key/value pairs in one entity (the game reads at most 64).
pub const MAX_PAIRS_PER_ENTITY: usize = 1024;
/// Most key/value pairs in the whole lump.
pub const MAX_PAIRS: usize = 1 << 20;
/// Longest token, in bytes (the game truncates tokens at 1023).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// One entity: its key/value pairs in file order, duplicates kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entity {
    pub pairs: Vec<(String, String)>,
}

impl Entity {
    /// The value of the first pair whose key is `key`, ignoring ASCII case
    /// as the game's spawn code does when it looks a key up.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }

    /// The entity's `classname`, if it has one.
    pub fn classname(&self) -> Option<&str> {
        self.get("classname")
    }
}

/// An entity serialises as an object whose keys are in file order; of two
/// pairs with the same key (compared exactly, as object keys are), the
/// first is kept.
impl Serialize for Entity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seen = std::collections::HashSet::with_capacity(self.pairs.len());
        let first: Vec<&(String, String)> = self
            .pairs
            .iter()
            .filter(|(k, _)| seen.insert(k.as_str()))
            .collect();
        let mut map = serializer.serialize_map(Some(first.len()))?;
        for (k, v) in first {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Why an entity lump could not be parsed. `offset` is the byte offset,
/// from the start of the lump, of the token (or the end of the text) where
/// it went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EntityError {
    #[error("byte {offset}: expected `{{` to open an entity, found {found}")]
    ExpectedOpen { offset: usize, found: String },
    #[error("byte {offset}: a quoted string has no closing `\"`")]
    UnterminatedString { offset: usize },
    #[error(
        "byte {offset}: expected a key or `}}` to close the entity opened at byte {opened}, found `{{`"
    )]
    ExpectedKeyOrClose { offset: usize, opened: usize },
    #[error("byte {offset}: key {key:?} has no value (expected a value, found {found})")]
    MissingValue {
        offset: usize,
        key: String,
        found: &'static str,
    },
    #[error(
        "byte {offset}: the text ends inside the entity opened at byte {opened} (expected `}}`)"
    )]
    UnexpectedEnd { offset: usize, opened: usize },
    #[error("byte {offset}: a token longer than {limit} bytes")]
    TokenTooLong { offset: usize, limit: usize },
    #[error("byte {offset}: more than {limit} {what}")]
    TooMany {
        offset: usize,
        what: &'static str,
        limit: usize,
    },
}

impl EntityError {
    /// Where in the lump it went wrong.
    pub fn offset(&self) -> usize {
        match *self {
            EntityError::ExpectedOpen { offset, .. }
            | EntityError::UnterminatedString { offset }
            | EntityError::ExpectedKeyOrClose { offset, .. }
            | EntityError::MissingValue { offset, .. }
            | EntityError::UnexpectedEnd { offset, .. }
            | EntityError::TokenTooLong { offset, .. }
            | EntityError::TooMany { offset, .. } => offset,
        }
    }
}

/// The text of an entity lump: its bytes up to the first NUL.
pub fn text(lump: &[u8]) -> &[u8] {
    let end = lump.iter().position(|&b| b == 0).unwrap_or(lump.len());
    &lump[..end]
}

/// Parses an entity lump (its bytes, with or without the NUL that ends it).
pub fn parse(lump: &[u8]) -> Result<Vec<Entity>, EntityError> {
    let mut tokens = Tokens {
        text: text(lump),
        pos: 0,
    };
    let mut entities = Vec::new();
    let mut pairs = 0usize;
    while let Some((at, token)) = tokens.next()? {
        if token != Token::Open {
            return Err(EntityError::ExpectedOpen {
                offset: at,
                found: token.describe(),
            });
        }
        if entities.len() == MAX_ENTITIES {
            return Err(EntityError::TooMany {
                offset: at,
                what: "entities",
                limit: MAX_ENTITIES,
            });
        }
        entities.push(entity(&mut tokens, at, &mut pairs)?);
    }
    Ok(entities)
}

/// The pairs of the entity opened at `opened`, through its `}`.
fn entity(tokens: &mut Tokens, opened: usize, pairs: &mut usize) -> Result<Entity, EntityError> {
    let end = |tokens: &Tokens| EntityError::UnexpectedEnd {
        offset: tokens.text.len(),
        opened,
    };
    let mut entity = Entity::default();
    loop {
        let (at, key) = match tokens.next()? {
            None => return Err(end(tokens)),
            Some((_, Token::Close)) => return Ok(entity),
            Some((at, Token::Open)) => {
                return Err(EntityError::ExpectedKeyOrClose { offset: at, opened })
            }
            Some((at, Token::Text(key))) => (at, key),
        };
        let value = match tokens.next()? {
            None => return Err(end(tokens)),
            Some((offset, brace @ (Token::Open | Token::Close))) => {
                return Err(EntityError::MissingValue {
                    offset,
                    key: latin1(key),
                    found: if brace == Token::Open { "`{`" } else { "`}`" },
                })
            }
            Some((_, Token::Text(value))) => value,
        };
        for (count, limit, what) in [
            (
                entity.pairs.len(),
                MAX_PAIRS_PER_ENTITY,
                "pairs in one entity",
            ),
            (*pairs, MAX_PAIRS, "pairs in the lump"),
        ] {
            if count == limit {
                return Err(EntityError::TooMany {
                    offset: at,
                    what,
                    limit,
                });
            }
        }
        *pairs += 1;
        entity.pairs.push((latin1(key), latin1(value)));
    }
}

/// Bytes as Latin-1 characters.
fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    Open,
    Close,
    /// A quoted string (without its quotes) or a bare word.
    Text(&'a [u8]),
}

impl Token<'_> {
    /// The token as an error message names it.
    fn describe(&self) -> String {
        match self {
            Token::Open => "`{`".to_owned(),
            Token::Close => "`}`".to_owned(),
            Token::Text(bytes) => {
                const SHOWN: usize = 40;
                let mut shown = latin1(&bytes[..bytes.len().min(SHOWN)]);
                if bytes.len() > SHOWN {
                    shown.push('…');
                }
                format!("{shown:?}")
            }
        }
    }
}

/// The tokenizer: each call to [`Tokens::next`] skips whitespace and
/// comments and returns the next token with its offset.
struct Tokens<'a> {
    /// The lump's text (up to its NUL): offsets into it are lump offsets.
    text: &'a [u8],
    pos: usize,
}

fn is_space(b: u8) -> bool {
    b <= b' '
}

impl<'a> Tokens<'a> {
    fn next(&mut self) -> Result<Option<(usize, Token<'a>)>, EntityError> {
        self.skip_space_and_comments();
        let start = self.pos;
        let Some(&first) = self.text.get(start) else {
            return Ok(None);
        };
        let (body, next) = if first == b'"' {
            let rest = &self.text[start + 1..];
            let close = rest
                .iter()
                .position(|&b| b == b'"')
                .ok_or(EntityError::UnterminatedString { offset: start })?;
            (&rest[..close], start + 1 + close + 1)
        } else {
            let rest = &self.text[start..];
            let len = rest.iter().position(|&b| is_space(b)).unwrap_or(rest.len());
            (&rest[..len], start + len)
        };
        if body.len() > MAX_TOKEN_BYTES {
            return Err(EntityError::TokenTooLong {
                offset: start,
                limit: MAX_TOKEN_BYTES,
            });
        }
        self.pos = next;
        let token = match (first, body) {
            (b'"', _) => Token::Text(body),
            (_, b"{") => Token::Open,
            (_, b"}") => Token::Close,
            _ => Token::Text(body),
        };
        Ok(Some((start, token)))
    }

    fn skip_space_and_comments(&mut self) {
        loop {
            while self.text.get(self.pos).is_some_and(|&b| is_space(b)) {
                self.pos += 1;
            }
            let rest = &self.text[self.pos..];
            if rest.starts_with(b"//") {
                self.pos += rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            } else if rest.starts_with(b"/*") {
                self.pos += rest[2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(rest.len(), |i| 2 + i + 2);
            } else {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pairs(e: &Entity) -> Vec<(&str, &str)> {
        e.pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    fn err(text: &[u8]) -> EntityError {
        match parse(text) {
            Err(e) => e,
            Ok(entities) => panic!("{:?} parsed: {entities:?}", latin1(text)),
        }
    }

    #[test]
    fn quoted_strings_and_entities_in_order() {
        let text = b"{\n\"classname\" \"worldspawn\"\n\"message\" \"My map\"\n}\n\
                     {\n\"classname\" \"func_door\"\n\"model\" \"*1\"\n\"angle\" \"90\"\n}\n";
        let entities = parse(text).unwrap();
        assert_eq!(entities.len(), 2);
        assert_eq!(
            pairs(&entities[0]),
            [("classname", "worldspawn"), ("message", "My map")]
        );
        assert_eq!(
            pairs(&entities[1]),
            [("classname", "func_door"), ("model", "*1"), ("angle", "90")]
        );
        assert_eq!(entities[1].classname(), Some("func_door"));
    }

    #[test]
    fn strings_hold_anything_but_a_quote() {
        // Spaces, braces, slashes, newlines and backslashes are text inside
        // quotes (no escapes: `\` is itself), and the empty string is a token.
        let text = b"{ \"a b\" \"{ } // /* */\" \"multi\nline\" \"c:\\\\x\\\" \"\" \"\" }";
        let e = &parse(text).unwrap()[0];
        assert_eq!(
            pairs(e),
            [
                ("a b", "{ } // /* */"),
                ("multi\nline", "c:\\\\x\\"),
                ("", "")
            ]
        );
    }

    #[test]
    fn bare_words_run_to_whitespace() {
        let text = b"{ classname worldspawn \"origin\" 1\t2\r3 key\"with\"quotes v}x }";
        let e = &parse(text).unwrap()[0];
        assert_eq!(
            pairs(e),
            [
                ("classname", "worldspawn"),
                ("origin", "1"),
                ("2", "3"),
                ("key\"with\"quotes", "v}x"),
            ]
        );
        // A quoted string ends its token: what follows starts the next one.
        let e = &parse(b"{ \"a\"b \"c\"\"d\"\n}").unwrap()[0];
        assert_eq!(pairs(e), [("a", "b"), ("c", "d")]);
    }

    #[test]
    fn comments_are_skipped_where_a_token_could_start() {
        let text = b"// a map\n{ /* one\n two */ \"a\" // end of line \"x\"\n \"1\" /**/ } \
                     /* open comment to the end";
        let entities = parse(text).unwrap();
        assert_eq!(entities.len(), 1);
        assert_eq!(pairs(&entities[0]), [("a", "1")]);
        // Inside a word or a string, slashes are text.
        let e = &parse(b"{ url http://x/*y \"//z\" w }").unwrap()[0];
        assert_eq!(pairs(e), [("url", "http://x/*y"), ("//z", "w")]);
        // A comment that ends the text inside an entity leaves it open.
        assert_eq!(
            err(b"{ \"a\" \"b\" // }"),
            EntityError::UnexpectedEnd {
                offset: 14,
                opened: 0
            }
        );
    }

    #[test]
    fn the_text_ends_at_the_first_nul() {
        let entities = parse(b"{ \"a\" \"1\" }\n\0{ garbage \"").unwrap();
        assert_eq!(entities.len(), 1);
        assert!(parse(b"").unwrap().is_empty());
        assert!(parse(b"\0{").unwrap().is_empty());
        assert!(parse(b" \n\t// only a comment").unwrap().is_empty());
        assert_eq!(text(b"ab\0cd\0"), b"ab");
        // A NUL inside a string ends the text, and the string with it.
        assert_eq!(
            err(b"{ \"a\" \"b\0\" }"),
            EntityError::UnterminatedString { offset: 6 }
        );
    }

    #[test]
    fn bytes_are_latin1_characters() {
        let e = &parse(b"{ \"caf\xe9\" \"\xff\x80\x7f\" n\xe4me v }").unwrap()[0];
        assert_eq!(
            pairs(e),
            [("caf\u{e9}", "\u{ff}\u{80}\u{7f}"), ("n\u{e4}me", "v")]
        );
        // Control bytes are whitespace; bytes from 0x80 on are not.
        let e = &parse(b"{\x01a\x1fb\x20\xa0c d }").unwrap()[0];
        assert_eq!(pairs(e), [("a", "b"), ("\u{a0}c", "d")]);
    }

    #[test]
    fn duplicate_keys_are_kept_and_readers_take_the_first() {
        let e = &parse(b"{ \"a\" \"1\" \"b\" \"2\" \"a\" \"3\" \"A\" \"4\" }").unwrap()[0];
        assert_eq!(pairs(e), [("a", "1"), ("b", "2"), ("a", "3"), ("A", "4")]);
        assert_eq!(e.get("a"), Some("1"));
        assert_eq!(e.get("A"), Some("1"), "lookups ignore ASCII case");
        assert_eq!(e.get("c"), None);
        // The object form: file order, the first of an exact duplicate.
        assert_eq!(
            serde_json::to_string(e).unwrap(),
            r#"{"a":"1","b":"2","A":"4"}"#
        );
        assert_eq!(serde_json::to_string(&Entity::default()).unwrap(), "{}");
    }

    #[test]
    fn every_error_names_its_offset() {
        let cases: Vec<(&[u8], EntityError)> = vec![
            (
                b"  \"classname\" \"worldspawn\" }",
                EntityError::ExpectedOpen {
                    offset: 2,
                    found: "\"classname\"".into(),
                },
            ),
            (
                b"{ }\n}",
                EntityError::ExpectedOpen {
                    offset: 4,
                    found: "`}`".into(),
                },
            ),
            (
                b"{ } {x",
                EntityError::ExpectedOpen {
                    offset: 4,
                    found: "\"{x\"".into(),
                },
            ),
            (
                b"{ \"a\" \"1\" } \"{\" }",
                EntityError::ExpectedOpen {
                    offset: 12,
                    found: "\"{\"".into(),
                },
            ),
            (
                b"{ \"a\" \"unterminated }\n",
                EntityError::UnterminatedString { offset: 6 },
            ),
            (b"\"", EntityError::UnterminatedString { offset: 0 }),
            (
                b"{ \"a\" \"1\"\n{ \"b\" \"2\" }",
                EntityError::ExpectedKeyOrClose {
                    offset: 10,
                    opened: 0,
                },
            ),
            (
                b"{ \"a\" \"1\" \"key\" }",
                EntityError::MissingValue {
                    offset: 16,
                    key: "key".into(),
                    found: "`}`",
                },
            ),
            (
                b"{ key {",
                EntityError::MissingValue {
                    offset: 6,
                    key: "key".into(),
                    found: "`{`",
                },
            ),
            (
                b"{ } {\n\"a\" \"1\"\n",
                EntityError::UnexpectedEnd {
                    offset: 14,
                    opened: 4,
                },
            ),
            (
                b"{ \"a\"\0\"1\" }",
                EntityError::UnexpectedEnd {
                    offset: 5,
                    opened: 0,
                },
            ),
            (
                b"{",
                EntityError::UnexpectedEnd {
                    offset: 1,
                    opened: 0,
                },
            ),
        ];
        for (text, want) in cases {
            let got = err(text);
            assert_eq!(got, want, "{:?}", latin1(text));
            assert_eq!(got.offset(), want.offset());
            assert!(got
                .to_string()
                .starts_with(&format!("byte {}:", got.offset())));
        }
    }

    #[test]
    fn limits_are_errors() {
        let long = |n: usize| "x".repeat(n);
        let ok = format!(
            "{{ \"{}\" {} }}",
            long(MAX_TOKEN_BYTES),
            long(MAX_TOKEN_BYTES)
        );
        assert_eq!(
            parse(ok.as_bytes()).unwrap()[0].pairs[0].0.len(),
            MAX_TOKEN_BYTES
        );
        let quoted = format!("{{ \"{}\" v }}", long(MAX_TOKEN_BYTES + 1));
        assert_eq!(
            err(quoted.as_bytes()),
            EntityError::TokenTooLong {
                offset: 2,
                limit: MAX_TOKEN_BYTES
            }
        );
        let bare = format!("{{ k {} }}", long(MAX_TOKEN_BYTES + 1));
        assert_eq!(
            err(bare.as_bytes()),
            EntityError::TokenTooLong {
                offset: 4,
                limit: MAX_TOKEN_BYTES
            }
        );
        let pairs = format!("{{{} }}", " k v".repeat(MAX_PAIRS_PER_ENTITY));
        assert_eq!(
            parse(pairs.as_bytes()).unwrap()[0].pairs.len(),
            MAX_PAIRS_PER_ENTITY
        );
        let pairs = format!("{{{} }}", " k v".repeat(MAX_PAIRS_PER_ENTITY + 1));
        assert_eq!(
            err(pairs.as_bytes()),
            EntityError::TooMany {
                offset: 1 + 4 * MAX_PAIRS_PER_ENTITY + 1,
                what: "pairs in one entity",
                limit: MAX_PAIRS_PER_ENTITY
            }
        );
        let entities = "{ } ".repeat(MAX_ENTITIES);
        assert_eq!(parse(entities.as_bytes()).unwrap().len(), MAX_ENTITIES);
        let entities = "{ } ".repeat(MAX_ENTITIES + 1);
        assert_eq!(
            err(entities.as_bytes()),
            EntityError::TooMany {
                offset: 4 * MAX_ENTITIES,
                what: "entities",
                limit: MAX_ENTITIES
            }
        );
        // The lump's pairs: full entities up to the limit, then one more.
        let full = format!("{{{} }}\n", " k v".repeat(MAX_PAIRS_PER_ENTITY));
        let text = format!("{}{{ k v }}", full.repeat(MAX_PAIRS / MAX_PAIRS_PER_ENTITY));
        assert_eq!(
            err(text.as_bytes()),
            EntityError::TooMany {
                offset: full.len() * (MAX_PAIRS / MAX_PAIRS_PER_ENTITY) + 2,
                what: "pairs in the lump",
                limit: MAX_PAIRS
            }
        );
    }

    #[test]
    fn long_tokens_are_shortened_in_messages() {
        let text = format!("{} {{}}", "w".repeat(100));
        let e = err(text.as_bytes());
        assert_eq!(
            e,
            EntityError::ExpectedOpen {
                offset: 0,
                found: format!("\"{}…\"", "w".repeat(40))
            }
        );
    }

    /// Bytes that look like entity text: braces, quotes, slashes, stars,
    /// whitespace, NUL, letters and high bytes.
    fn entityish() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop::sample::select(b"{}\"/* \n\tab\0\xe9\xff".to_vec());
        prop::collection::vec(byte, 0..64)
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_fail_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            if let Err(e) = parse(&bytes) {
                prop_assert!(e.offset() <= text(&bytes).len());
            }
        }

        #[test]
        fn entityish_bytes_parse_or_fail_at_an_offset_in_the_text(bytes in entityish()) {
            match parse(&bytes) {
                Ok(entities) => {
                    // Written back (quoted, or bare where a token holds a
                    // quote: only bare words do), the pairs parse to the
                    // same entities.
                    let mut again = Vec::new();
                    for e in &entities {
                        again.extend_from_slice(b"{\n");
                        for (k, v) in &e.pairs {
                            for s in [k, v] {
                                let bytes: Vec<u8> = s.chars().map(|c| c as u8).collect();
                                if bytes.contains(&b'"') {
                                    again.extend_from_slice(&bytes);
                                } else {
                                    again.push(b'"');
                                    again.extend_from_slice(&bytes);
                                    again.push(b'"');
                                }
                                again.push(b' ');
                            }
                        }
                        again.extend_from_slice(b"}\n");
                    }
                    prop_assert_eq!(parse(&again).unwrap(), entities);
                }
                Err(e) => prop_assert!(e.offset() <= text(&bytes).len()),
            }
        }
    }
}
