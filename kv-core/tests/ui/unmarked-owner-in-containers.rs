//! An owner inside any container a `#[kv(child)]` visits is caught too.
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Layer;

#[derive(ModelLocalKv)]
struct Model<'a> {
    draft: Option<Layer>,
    layers: Vec<Layer>,
    heads: [Layer; 2],
    boxed: Box<Layer>,
    shared: Rc<Layer>,
    synced: Arc<Layer>,
    by_name: HashMap<String, Layer>,
    sorted: BTreeMap<u32, Option<Box<Layer>>>,
    borrowed: &'a Layer,
    dynamic: Box<dyn ModelLocalKv>,
}

fn main() {}
