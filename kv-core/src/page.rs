//! A Markdown page of a crate's model-local KV (feature `fresh`): what each
//! type declares, what the loaded models hold and, with feature `chart`, a
//! chart of their bytes against `max_num_seqs`. Keep it fresh from a test
//! with [`assert_fresh`](crate::fresh::assert_fresh); the [`fresh`](crate::fresh)
//! module shows the whole pattern.
//!
//! ```
//! use kv_core::page::Page;
//! use kv_core::ModelLocalKv;
//! use kv_core::declare::DeclaredKv;
//!
//! #[derive(ModelLocalKv)]
//! #[kv(
//!     name = "graph_pool",
//!     cache = "DynamicCache captured per bucket",
//!     layers = 16, kv_heads = 64, head_dim = 16, dtype = bf16,
//!     positions = bounded(11, because = "group_size 4 + max(delay_pattern) 7"),
//!     scope = model,
//!     rows = fixed(261, because = "sum of captured buckets"),
//! )]
//! struct GraphPool;
//!
//! let page = Page::new("Model-local KV", 256)
//!     .intro("Caches held outside the engine's paged KV manager.")
//!     .types(&[GraphPool::KV_DECLS])
//!     .loaded([("MiMo-Audio", &GraphPool as &dyn ModelLocalKv)])?
//!     .to_markdown();
//! assert!(page.starts_with("# Model-local KV\n"));
//! assert!(page.contains("## Declared by type"));
//! assert!(page.contains("| MiMo-Audio.graph_pool "));
//! assert!(page.contains("179.44 MiB"));
//! # Ok::<(), kv_core::KvError>(())
//! ```

use crate::collection::collect::collect;
use crate::collection::table::Table;
use crate::declare::type_decls::KvTypeDecls;
use crate::declare::ModelLocalKv;
use crate::error::KvError;
use crate::spec::KvSpec;

/// A documentation page, built section by section in call order.
#[derive(Clone, Debug)]
pub struct Page {
    title: String,
    max_num_seqs: u64,
    intro: Option<String>,
    sections: Vec<String>,
    /// Every declaration passed to [`Page::loaded`], with its label; the
    /// chart's input.
    loaded: Vec<(String, KvSpec)>,
}

impl Page {
    /// An empty page titled `title`, whose tables are computed at `max_num_seqs`.
    pub fn new(title: impl Into<String>, max_num_seqs: u64) -> Page {
        Page {
            title: title.into(),
            max_num_seqs,
            intro: None,
            sections: Vec::new(),
            loaded: Vec::new(),
        }
    }

    /// A paragraph under the title: which models, configured how.
    pub fn intro(mut self, text: impl Into<String>) -> Page {
        self.intro = Some(text.into());
        self
    }

    /// A section "Declared by type": one [`Table::types`] row per declaration,
    /// known without an instance.
    pub fn types(mut self, types: &[KvTypeDecls]) -> Page {
        let table = Table::new(self.max_num_seqs).types(types).to_markdown();
        self.sections.push(format!(
            "## Declared by type\n\n\
             What each type declares, known without an instance. Values read after load \
             (a checkpoint's config, captured graphs, session limits) show as `known after load`.\n\n\
             {table}"
        ));
        self
    }

    /// A section "Held after load": each model's tree is collected
    /// ([`collect`]) and its declarations listed as `model: path.name`
    /// ([`Table::collection`]: identical declarations of sibling owners as
    /// one row, declarations that yield nothing saying so).
    /// An owner or declaration the collector had to skip is an error: a page
    /// must not silently leave a declaration out.
    pub fn loaded<'m, N: AsRef<str>>(
        mut self,
        models: impl IntoIterator<Item = (N, &'m dyn ModelLocalKv)>,
    ) -> Result<Page, KvError> {
        let mut table = Table::new(self.max_num_seqs);
        for (model, root) in models {
            let collection = collect(root);
            if let Some(skipped) = collection.skipped().first() {
                return Err(skipped.error.clone());
            }
            let model = model.as_ref();
            for entry in collection.entries() {
                let label = if entry.path.is_empty() {
                    model.to_owned()
                } else {
                    format!("{model}: {}", entry.path)
                };
                self.loaded.push((label, entry.spec.clone()));
            }
            table = table.collection(model, &collection);
        }
        let table = table.to_markdown();
        self.sections.push(format!(
            "## Held after load\n\n\
             What the loaded models hold, collected from their trees, at max_num_seqs={}.\n\n\
             {table}",
            self.max_num_seqs
        ));
        Ok(self)
    }

    /// A section "Against max_num_seqs" linking the chart of every loaded
    /// declaration ([`Page::to_svg`]), which the caller writes to `file`, a
    /// path relative to the page (`model-local-kv.svg` beside it).
    #[cfg(feature = "chart")]
    pub fn chart(mut self, file: &str) -> Page {
        let (from, to) = (
            crate::chart::MAX_NUM_SEQS_FROM,
            crate::chart::MAX_NUM_SEQS_TO,
        );
        self.sections.push(format!(
            "## Against max_num_seqs\n\n\
             ![Model-local KV at peak against max_num_seqs, stacked by declaration]({file})\n\n\
             The loaded models' bytes at peak for max_num_seqs from {from} to {to}, stacked by \
             declaration. Solid bands are resident (scope `model`: allocated during load, so \
             profiling has already charged them); light, hatched bands are allocated after \
             profiling.\n"
        ));
        self
    }

    /// The chart of every declaration passed to [`Page::loaded`], as SVG
    /// (see [`Chart`](crate::chart::Chart)).
    #[cfg(feature = "chart")]
    pub fn to_svg(&self) -> Result<String, crate::chart::ChartError> {
        crate::chart::Chart::new(&self.title)
            .rows(self.loaded.iter().map(|(l, s)| (l.as_str(), s)))
            .to_svg()
    }

    /// The page as Markdown: the title, a comment saying it is generated
    /// and how to regenerate it, the intro, then the sections in call order.
    pub fn to_markdown(&self) -> String {
        let mut page = format!(
            "# {}\n\n\
             <!-- Generated from the #[kv(...)] declarations; do not edit. \
             Regenerate: `{}=1 cargo test`. -->\n",
            self.title,
            crate::fresh::UPDATE_VAR
        );
        if let Some(intro) = &self.intro {
            page.push('\n');
            page.push_str(intro.trim_end());
            page.push('\n');
        }
        for section in &self.sections {
            page.push('\n');
            page.push_str(section);
        }
        page
    }
}
