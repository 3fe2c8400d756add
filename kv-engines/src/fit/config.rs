//! What every fit rule reads first from a config: its text section, its
//! class, and whether kv has checked what an engine builds for it.

use serde_json::Value;

/// The text model's section: `text_config` where the config has one.
pub(crate) fn text_section(config: &Value) -> &Value {
    config.get("text_config").unwrap_or(config)
}

/// The config's first `architectures` entry, or "" without one.
pub(crate) fn architecture(config: &Value) -> &str {
    config
        .get("architectures")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The class, when it is one of `checked` (those whose loaded model
/// `script` has compared with `engine`'s own) and the checkpoint is not
/// quantized; else what kv has not checked, named.
pub(crate) fn checked_class<'c>(
    config: &'c Value,
    checked: &[&str],
    engine: &str,
    script: &str,
) -> Result<&'c str, String> {
    let class = architecture(config);
    if !checked.contains(&class) {
        return Err(format!(
            "kv has not checked what {engine}'s `{class}` holds once loaded (checked: {}; \
             {script} builds {engine}'s own class)",
            checked.join(", ")
        ));
    }
    if config
        .get("quantization_config")
        .is_some_and(|q| !q.is_null())
    {
        return Err(format!(
            "a quantized checkpoint: kv has not checked how {engine} lays out quantized weights \
             once loaded"
        ));
    }
    Ok(class)
}

/// The decoder layer a tensor named `model.layers.N.…` (GPT-2's
/// `transformer.h.N.…`, DBRX's `transformer.blocks.N.…`) belongs to.
pub(crate) fn layer_index(name: &str) -> Result<Option<u64>, String> {
    let Some((prefix, rest)) = ["model.layers.", "transformer.h.", "transformer.blocks."]
        .iter()
        .find_map(|p| name.strip_prefix(p).map(|rest| (p, rest)))
    else {
        return Ok(None);
    };
    rest.split('.')
        .next()
        .and_then(|i| i.parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| format!("`{name}`: no layer index after `{prefix}`"))
}

/// Why kv does not answer a class that builds a bias whatever the config's
/// `key` says, when the config says there is none.
pub(crate) fn bias_refusal(engine: &str, class: &str, key: &str) -> String {
    format!(
        "{engine}'s `{class}` builds its biases whatever `{key}` says, and this config's \
         `{key}` is not true: kv has not checked what it holds for biases the checkpoint lacks"
    )
}

/// `first` then `second`, as one array of `N` names (`N` their lengths'
/// sum, or the build fails on the index).
pub(crate) const fn joined<const N: usize>(
    first: &[&'static str],
    second: &[&'static str],
) -> [&'static str; N] {
    let mut all = [""; N];
    let mut i = 0;
    while i < N {
        all[i] = if i < first.len() {
            first[i]
        } else {
            second[i - first.len()]
        };
        i += 1;
    }
    all
}
