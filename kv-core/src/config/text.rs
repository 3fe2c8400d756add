//! A config's text as Python's `json` reads it.

use serde_json::Value;

/// Parses a `config.json` as Python's `json` module reads it: strict JSON,
/// plus the bare `NaN`, `Infinity` and `-Infinity` that transformers'
/// `save_pretrained` writes for non-finite floats (Mamba-Codestral's
/// `time_step_limit`, for one). JSON has no such numbers, so each is read as
/// the string `"NaN"`, `"Infinity"` or `"-Infinity"`: a key kv reads that
/// holds one is then an error naming it, and every other key reads as usual.
///
/// ```
/// let config = kv_core::config::parse_json(r#"{"time_step_limit": [0.0, Infinity], "n": 2}"#)?;
/// assert_eq!(config["time_step_limit"][1], "Infinity");
/// assert_eq!(config["n"], 2);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn parse_json(text: &str) -> Result<Value, serde_json::Error> {
    match serde_json::from_str(text) {
        Ok(value) => Ok(value),
        Err(strict) => match quote_non_finite(text) {
            Some(quoted) => serde_json::from_str(&quoted).map_err(|_| strict),
            None => Err(strict),
        },
    }
}

const NON_FINITE: [&str; 3] = ["-Infinity", "Infinity", "NaN"];

/// The text with each bare non-finite literal outside strings quoted;
/// `None` when there is none (so the strict error stands).
fn quote_non_finite(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    let mut changed = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else if let Some(word) = NON_FINITE.iter().find(|word| rest.starts_with(**word)) {
            out.push('"');
            out.push_str(word);
            out.push('"');
            rest = &rest[word.len()..];
            changed = true;
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_literals_outside_strings_are_read_as_their_names() {
        let config = parse_json(
            r#"{"a": NaN, "b": [-Infinity, Infinity], "c": "NaN Infinity", "d": "q\"NaN", "e": 1.5}"#,
        )
        .unwrap();
        assert_eq!(config["a"], "NaN");
        assert_eq!(config["b"][0], "-Infinity");
        assert_eq!(config["b"][1], "Infinity");
        assert_eq!(config["c"], "NaN Infinity");
        assert_eq!(config["d"], "q\"NaN");
        assert_eq!(config["e"], 1.5);
    }

    #[test]
    fn other_invalid_json_keeps_its_strict_error() {
        let strict = serde_json::from_str::<Value>("{ nope }")
            .unwrap_err()
            .to_string();
        assert_eq!(parse_json("{ nope }").unwrap_err().to_string(), strict);
        // A non-finite literal does not excuse another error.
        assert!(parse_json("{\"a\": NaN, }").is_err());
        assert!(parse_json("{\"a\": Nan}").is_err());
    }
}
