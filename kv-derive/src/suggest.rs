//! "Did you mean" hints for misspelled keys and values, and `unraw`.

/// `"; did you mean `rows`?"` when a candidate is close, else `""`.
pub fn nearest(word: &str, candidates: &[&str]) -> String {
    closest(word, candidates).map_or_else(String::new, |c| format!("; did you mean `{c}`?"))
}

/// The hint, or else the list of what is valid.
pub fn or_list(hint: &str, valid: &[&str]) -> String {
    if hint.is_empty() {
        format!("; expected one of: {}", valid.join(", "))
    } else {
        hint.to_string()
    }
}

/// An identifier as text without its `r#`, as thiserror's `unraw`: `r#type`
/// names the field `type`.
pub fn unraw(ident: &proc_macro2::Ident) -> String {
    let text = ident.to_string();
    match text.strip_prefix("r#") {
        Some(bare) => bare.to_string(),
        None => text,
    }
}

/// The candidate within a few edits of `word`, if any.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let best = candidates
        .iter()
        .map(|candidate| (edit_distance(word, candidate), *candidate))
        .min();
    match best {
        Some((distance, candidate)) if distance <= (word.len().max(2) / 2).max(1) + 1 => {
            Some(candidate)
        }
        _ => None,
    }
}

/// Levenshtein distance, counting one edit per character.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_words_are_suggested_far_ones_are_not() {
        assert_eq!(
            nearest("rwos", &["rows", "scope"]),
            "; did you mean `rows`?"
        );
        assert_eq!(
            nearest("kv_head", &["kv_heads", "head_dim"]),
            "; did you mean `kv_heads`?"
        );
        assert_eq!(nearest("bf61", &["bf16", "f16"]), "; did you mean `bf16`?");
        assert_eq!(nearest("completely_else", &["rows", "scope"]), "");
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("rows", "rows"), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        // one deletion, one insertion
        assert_eq!(edit_distance("xrows", "rows"), 1);
        assert_eq!(edit_distance("roxws", "rows"), 1);
        assert_eq!(edit_distance("rowsx", "rows"), 1);
        assert_eq!(edit_distance("ros", "rows"), 1);
    }
}
