//! `skip` says why, `because` goes with `skip`, and a field is not both
//! a child and skipped.
use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Draft;

#[derive(ModelLocalKv)]
struct Model {
    #[kv(skip)]
    no_reason: Draft,
    #[kv(because = "a reason for nothing")]
    no_skip: Draft,
    #[kv(child, skip, because = "both")]
    both: Draft,
    #[kv(skip, because = "reported by the draft engine", rows = max_num_seqs)]
    with_a_declaration_key: Draft,
}

#[derive(ModelLocalKv)]
#[kv(skip, because = "on the struct")]
struct OnTheStruct;

fn main() {}
