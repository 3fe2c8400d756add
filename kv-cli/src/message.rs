//! Messages as they reach stderr: text from a file (a key, a value, an
//! architecture name) may hold control characters, terminal escapes or
//! thousands of characters; every message kv prints passes through
//! [`printable`] first, so none of them reaches the terminal and each
//! message stays one readable line.

/// The longest run of characters without a space printed whole: far above
/// a key, a number or a checkpoint's path (a Hugging Face snapshot's is
/// about 140), far below a value that fills a file.
const LONGEST_WORD: usize = 300;

/// The longest message printed whole.
const LONGEST_MESSAGE: usize = 2000;

/// Characters that move or hide text without being control characters:
/// zero-width and bidirectional marks (a "Trojan Source" message reads
/// otherwise than it is written).
fn invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// `text` escaped: line breaks and tabs as spaces (a message is one line),
/// other control characters and invisible marks as `\u{1b}`.
pub fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() || invisible(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out
}

/// A report for stdout with what came from a file made harmless: lines and
/// tabs kept (a report has many), every other control character and
/// invisible mark written as `\u{1b}`, so no escape from a config's
/// `model_type` or a GGUF's architecture reaches the terminal.
pub fn escaped_report(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if c.is_control() || invisible(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out
}

/// JSON text with the same characters escaped the JSON way (`\u001b`),
/// which reads back to the same value: serde_json writes DEL, C1 controls
/// and invisible marks as they are. (Outside strings JSON text holds none.)
pub fn escaped_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if (c.is_control() && c != '\n') || invisible(c) {
            // Every such character is in the Basic Multilingual Plane.
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` with its middle cut out past `keep_head + keep_tail` characters,
/// saying how many were cut.
fn cut(text: &str, longest: usize, keep_head: usize, keep_tail: usize) -> String {
    let count = text.chars().count();
    if count <= longest {
        return text.to_owned();
    }
    let head: String = text.chars().take(keep_head).collect();
    let tail: String = text.chars().skip(count - keep_tail).collect();
    format!(
        "{head}...[{} characters cut]...{tail}",
        count - keep_head - keep_tail
    )
}

/// `text` as kv prints it: escaped, each over-long word and the whole
/// message cut in the middle (the start says what it is, the end what to do).
pub fn printable(text: &str) -> String {
    let words: Vec<String> = escaped(text)
        .split(' ')
        .map(|word| cut(word, LONGEST_WORD, 200, 60))
        .collect();
    cut(&words.join(" "), LONGEST_MESSAGE, 1200, 600)
        .trim_end()
        .to_owned()
}

/// Exits 2 (clap's usage exit) with `text`, printable.
pub fn usage_error(kind: clap::error::ErrorKind, text: &str) -> ! {
    clap::Error::raw(kind, format!("{}\n", printable(text))).exit()
}

#[cfg(test)]
mod tests {
    use super::{escaped, escaped_json, escaped_report, printable};

    #[test]
    fn reports_keep_their_lines_and_lose_their_escapes() {
        assert_eq!(
            escaped_report("arch \x1b[2J\u{202e}x\n  K\tV\u{7f}\n"),
            "arch \\u{1b}[2J\\u{202e}x\n  K\tV\\u{7f}\n"
        );
        let json = serde_json::to_string_pretty(&serde_json::json!({
            "architecture": "a\u{1b}b\u{7f}c\u{202e}d\u{9b}e"
        }))
        .unwrap();
        let escaped = escaped_json(&json);
        assert!(
            !escaped.chars().any(|c| c.is_control() && c != '\n'),
            "{escaped}"
        );
        assert!(
            escaped.contains(r"a\u001bb\u007fc\u202ed\u009be"),
            "{escaped}"
        );
        // The same value reads back.
        let back: serde_json::Value = serde_json::from_str(&escaped).unwrap();
        assert_eq!(back["architecture"], "a\u{1b}b\u{7f}c\u{202e}d\u{9b}e");
    }

    #[test]
    fn control_characters_and_invisible_marks_are_escaped() {
        assert_eq!(
            escaped("a\x1b[2Jb\nc\td\u{7f}e"),
            "a\\u{1b}[2Jb c d\\u{7f}e"
        );
        assert_eq!(escaped("x\u{202e}y\u{9b}z"), "x\\u{202e}y\\u{9b}z");
        // Text that is not a control character is kept as written.
        assert_eq!(escaped("32 × 8 heads, `café`"), "32 × 8 heads, `café`");
    }

    #[test]
    fn long_words_and_long_messages_are_cut_in_the_middle() {
        let word = "A".repeat(20_000);
        let line = printable(&format!(
            "architecture `{word}` is unknown; give model_type"
        ));
        assert!(line.starts_with("architecture `AAAA"), "{line}");
        assert!(line.contains("...[19742 characters cut]..."), "{line}");
        assert!(line.ends_with("AAA` is unknown; give model_type"), "{line}");
        assert!(line.chars().count() < 400);
        // A word at the limit is whole.
        let word = "B".repeat(300);
        assert_eq!(printable(&word), word);
        // Many short words: the whole message is cut.
        let line = printable(&"word ".repeat(1000));
        assert!(line.contains("characters cut"), "{line}");
        assert!(line.chars().count() < 1900);
    }
}
