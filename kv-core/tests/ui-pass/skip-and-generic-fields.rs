//! What the unmarked-field check lets through: a skipped field with its
//! reason, fields that hold no KV, and a field whose type is a type
//! parameter (unknown where the struct is defined; mark it `#[kv(child)]`
//! if it may hold an owner).
use std::marker::PhantomData;

use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = max_num_seqs,
)]
struct Draft;

#[derive(ModelLocalKv)]
struct Model<'a, M, const N: usize> {
    #[kv(skip, because = "the draft model's caches are reported by its own engine")]
    draft: Draft,
    #[kv(skip, because = "a view of `draft`, already left out")]
    view: &'a Draft,
    unknown: M,
    many: [M; N],
    weights: Vec<f32>,
    name: String,
    marker: PhantomData<Draft>,
    unit: (),
}

fn main() {
    let draft = Draft;
    let model = Model::<'_, u8, 1> {
        draft: Draft,
        view: &draft,
        unknown: 0,
        many: [0],
        weights: Vec::new(),
        name: String::new(),
        marker: PhantomData,
        unit: (),
    };
    let _ = (&model.draft, model.view, model.unknown, model.many, &model.weights, &model.name, model.marker, model.unit);
    // Skipped on purpose: nothing is collected.
    assert!(kv_core::collect(&model).entries().is_empty());
}
