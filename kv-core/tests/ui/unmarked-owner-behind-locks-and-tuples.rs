//! An owner behind a lock, a cell or in a tuple, unmarked, is caught under
//! its field: the collector reads through each of them, so a forgotten
//! `#[kv(child)]` would drop their declarations silently.
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Layer;

/// From another crate: declares nothing.
struct LayerNorm;

#[derive(ModelLocalKv)]
struct Model {
    locked: Mutex<Layer>,
    read_mostly: RwLock<Vec<Layer>>,
    borrowed: RefCell<Option<Layer>>,
    shared: Arc<Mutex<Layer>>,
    shared_rw: Arc<RwLock<Layer>>,
    local: Rc<RefCell<Layer>>,
    once: OnceLock<Layer>,
    pair: (Layer, Layer),
    cross_attn: Option<(Layer, LayerNorm)>,
    nested: Vec<(LayerNorm, Mutex<(LayerNorm, Layer)>)>,
    plain: (LayerNorm, u32),
}

fn main() {}
