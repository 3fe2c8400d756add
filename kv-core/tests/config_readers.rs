//! `HfConfig`'s readers for code beside kv-core that looks up a config as
//! kv-core does (an engine's rules in kv-engines, a model's own keys): the
//! family, the `model_type`s and `architectures`, any key with its section,
//! the notes and what was asked.

#![cfg(feature = "json")]

use kv_core::{DType, HfConfig, KvError};
use serde_json::json;

#[test]
fn the_family_is_the_first_model_type_where_kv_knows_it() {
    let gemma = HfConfig::from_value(json!({
        "model_type": "gemma3",
        "text_config": {"model_type": "gemma3_text"},
    }));
    // Nested sections come before the top level: the text model decides.
    assert_eq!(gemma.model_types(), ["gemma3_text", "gemma3"]);
    assert_eq!(gemma.family(), Some("gemma3_text"));
    // A model_type given over the config comes first of all.
    let given = gemma.with_value("model_type", "llama");
    assert_eq!(given.model_types(), ["llama", "gemma3_text", "gemma3"]);
    assert_eq!(given.family(), Some("llama"));
    // The first decides, known or not: an unknown one is no family, and the
    // config is read by the generic keys.
    let unknown = HfConfig::from_value(json!({
        "model_type": "llama",
        "text_config": {"model_type": "my_text_model"},
    }));
    assert_eq!(unknown.family(), None);
    assert!(HfConfig::from_value(json!({})).model_types().is_empty());
    assert_eq!(
        HfConfig::from_value(json!({"model_type": 3})).family(),
        None
    );
}

#[test]
fn architectures_are_the_top_levels_strings() {
    let config = HfConfig::from_value(json!({
        "architectures": ["LlamaForCausalLM", 7, null, "Other"],
        "text_config": {"architectures": ["Nested"]},
    }));
    assert_eq!(config.architectures(), ["LlamaForCausalLM", "Other"]);
    assert!(HfConfig::from_value(json!({"architectures": "Llama"}))
        .architectures()
        .is_empty());
}

#[test]
fn a_value_is_found_as_the_lookup_finds_it_and_named_by_its_section() {
    let config = HfConfig::from_value(json!({
        "model_type": "gemma3_text",
        "sliding_window": null,
        "text_config": {"sliding_window": 512, "chunk": 8192},
    }));
    // `null` counts as absent: the nested section's value is found.
    let (name, value) = config.value("sliding_window").unwrap();
    assert_eq!(
        (name.as_str(), value),
        ("text_config.sliding_window", &json!(512))
    );
    // A given value comes first.
    let given = config.clone().with_value("chunk", 4096);
    assert_eq!(
        given.count_if_set("chunk", "chunk"),
        Ok(Some(("explicit.chunk".to_owned(), 4096)))
    );
    assert_eq!(config.count_if_set("absent", "absent"), Ok(None));
    // A key the config leaves out takes the family's loader default, noted.
    let (name, _) = config.value("head_dim").unwrap();
    assert_eq!(name, "head_dim (transformers Gemma3TextConfig default)");
    assert_eq!(
        config.notes(),
        ["`head_dim` 256 (transformers Gemma3TextConfig default)"]
    );
    // A value that is not a positive count is an error under `what`.
    let bad = HfConfig::from_value(json!({"chunk": -1}));
    let Err(KvError::Config { what, problem }) = bad.count_if_set("chunk size", "chunk") else {
        panic!("a negative count is an error");
    };
    assert_eq!(what, "chunk size");
    assert!(problem.contains("`chunk` is -1"), "{problem}");
}

#[test]
fn notes_are_said_once_and_asked_keys_are_remembered() {
    let config = HfConfig::from_value(json!({"num_hidden_layers": 2})).with_value("typo", 1);
    assert!(!config.was_asked("num_hidden_layers"));
    let _ = config.value("num_hidden_layers");
    // Asked whether or not any section sets it.
    let _ = config.value("never_set");
    assert!(config.was_asked("num_hidden_layers") && config.was_asked("never_set"));
    assert_eq!(config.unread_values(), ["typo"]);
    config.note("read by my rule".to_owned());
    config.note("read by my rule".to_owned());
    assert_eq!(config.notes(), ["read by my rule"]);
}

#[test]
fn attention_heads_dtype_and_whether_layers_differ() {
    let config = HfConfig::from_value(json!({
        "n_head": 32,
        "torch_dtype": "float32",
        "layer_types": ["sliding_attention", "full_attention"],
    }));
    assert_eq!(
        config.attention_heads(),
        Ok(Some(("n_head".to_owned(), 32)))
    );
    assert_eq!(config.dtype(), Ok(DType::F32));
    assert_eq!(
        config.clone().with_dtype(DType::BF16).dtype(),
        Ok(DType::BF16)
    );
    assert!(config.has_layer_pattern());
    let plain = HfConfig::from_value(json!({"num_hidden_layers": 2}));
    assert_eq!(plain.attention_heads(), Ok(None));
    assert!(!plain.has_layer_pattern());
    assert!(plain.dtype().is_err());
}
