//! A declaration as generated code builds it: one constructor, a `const`
//! setter named after each optional key the user wrote, then its layout and
//! rows (or, before load, what is known of them). The optional keys'
//! defaults are stated here once, so the derive emits only what was written;
//! a new optional key is a field, its default, a setter and its place in
//! [`Decl::spec`] here (and in [`Decl::after_load_decl`] if tables show it).

use std::borrow::Cow;

use crate::declare::type_decls::{AfterLoadDecl, AfterLoadRows};
use crate::spec::layout::{Geometry, Layout};
use crate::spec::placement::{Placement, Sharding};
use crate::spec::positions::Positions;
use crate::spec::{KvSpec, Rows, Scope};

/// A declaration being built: the texts every declaration has and the
/// optional keys, each absent until its setter is called (the derive calls
/// each at most once: a key is given once). Only texts and the scope (all
/// `Copy`), so that a setter may replace one in a `const fn`, which may drop
/// nothing; the layout and rows, which own text, come last, in
/// [`Decl::spec`].
#[derive(Clone, Copy)]
pub struct Decl {
    name: &'static str,
    cache: &'static str,
    scope: Scope,
    only_when: Option<&'static str>,
    assumes: Option<&'static str>,
    note: Option<&'static str>,
    on_host: Option<&'static str>,
    whole_on_every_rank: Option<&'static str>,
}

/// A declaration with every optional key absent: held always, on the
/// device, sharded by its kind's rules, with no assumption or note.
pub const fn decl(name: &'static str, cache: &'static str, scope: Scope) -> Decl {
    Decl {
        name,
        cache,
        scope,
        only_when: None,
        assumes: None,
        note: None,
        on_host: None,
        whole_on_every_rank: None,
    }
}

impl Decl {
    /// `only_when`: the gate's text (on an enum's variant, the variant's).
    pub const fn only_when(mut self, condition: &'static str) -> Decl {
        self.only_when = Some(condition);
        self
    }

    /// `assumes`.
    pub const fn assumes(mut self, condition: &'static str) -> Decl {
        self.assumes = Some(condition);
        self
    }

    /// `note`.
    pub const fn note(mut self, note: &'static str) -> Decl {
        self.note = Some(note);
        self
    }

    /// `on_host`: held in host memory, for this reason.
    pub const fn on_host(mut self, because: &'static str) -> Decl {
        self.on_host = Some(because);
        self
    }

    /// `whole_on_every_rank`: not divided by parallelism, for this reason.
    pub const fn whole_on_every_rank(mut self, because: &'static str) -> Decl {
        self.whole_on_every_rank = Some(because);
        self
    }

    /// The declaration, of this layout and rows.
    pub const fn spec(self, layout: Layout, rows: Rows) -> KvSpec {
        KvSpec {
            name: Cow::Borrowed(self.name),
            cache: Cow::Borrowed(self.cache),
            layout,
            scope: self.scope,
            rows,
            only_when: text(self.only_when),
            assumes: text(self.assumes),
            note: text(self.note),
            placement: match self.on_host {
                None => Placement::Device,
                Some(because) => Placement::Host(Cow::Borrowed(because)),
            },
            sharding: match self.whole_on_every_rank {
                None => Sharding::ByKind,
                Some(because) => Sharding::Whole(Cow::Borrowed(because)),
            },
            layer_group: None,
        }
    }

    /// The declaration of an attention layout with `bounded(..)` positions:
    /// the most common one, in the fewest tokens.
    pub const fn bounded_attention(
        self,
        geometry: Geometry,
        count: u64,
        because: &'static str,
        rows: Rows,
    ) -> KvSpec {
        let positions = Positions::bounded(count, because);
        self.spec(
            Layout::Attention {
                geometry,
                positions,
            },
            rows,
        )
    }

    /// What tables and budgets show before load of a declaration read after
    /// load: its texts (not the note or the placement), and each figure that
    /// is not `0`, which stands for one read after load.
    pub const fn after_load_decl(
        self,
        positions: u64,
        positions_bound: &'static str,
        bytes_per_row: u64,
        rows: AfterLoadRows,
    ) -> AfterLoadDecl {
        AfterLoadDecl {
            name: self.name,
            cache: self.cache,
            scope: self.scope,
            positions: known_figure(positions),
            positions_bound,
            bytes_per_row: known_figure(bytes_per_row),
            rows,
            only_when: self.only_when,
            assumes: self.assumes,
        }
    }
}

/// A figure known before load; `0` stands for one read after load.
pub(super) const fn known_figure(value: u64) -> Option<u64> {
    if value == 0 {
        None
    } else {
        Some(value)
    }
}

const fn text(text: Option<&'static str>) -> Option<Cow<'static, str>> {
    match text {
        Some(text) => Some(Cow::Borrowed(text)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::dtype::DType;
    use crate::spec::positions::Positions;

    const G: Geometry = Geometry::new(2, 4, 8, DType::F16);

    fn bare() -> KvSpec {
        decl("n", "c", Scope::Request).bounded_attention(G, 16, "sixteen", Rows::MaxNumSeqs)
    }

    #[test]
    fn byte_math_is_usable_in_const_items() {
        // As derived code builds it.
        const SPEC: &KvSpec = &decl("retained", "test", Scope::Request).spec(
            Layout::Attention {
                geometry: Geometry::new(8, 16, 64, DType::F32),
                positions: Positions::bounded(71, "sliding_window(72) - 1"),
            },
            Rows::MaxNumSeqs,
        );
        const PER_ROW: u64 = match SPEC.bytes_per_row() {
            Ok(bytes) => bytes,
            Err(_) => panic!("overflow"),
        };
        const ROWS: u64 = SPEC.row_count(7);
        assert_eq!(PER_ROW, 2 * 8 * 16 * 64 * 71 * 4);
        assert_eq!(ROWS, 7);
    }

    #[test]
    fn no_setter_is_the_public_constructors_declaration() {
        // What hand-written code builds with the same keys: the defaults agree.
        let by_hand = |rows| {
            let positions = Positions::bounded(16, "sixteen");
            KvSpec::attention("n", "c", G, positions, Scope::Request, rows)
        };
        assert_eq!(bare(), by_hand(Rows::MaxNumSeqs));
        let three = || Rows::fixed(3, "three");
        let layout = by_hand(three()).layout;
        let spec = decl("n", "c", Scope::Request).spec(layout, three());
        assert_eq!(spec, by_hand(three()));
    }

    #[test]
    fn each_setter_sets_its_key_alone() {
        let with = |decl: Decl| decl.bounded_attention(G, 16, "sixteen", Rows::MaxNumSeqs);
        let base = decl("n", "c", Scope::Request);
        assert_eq!(with(base.only_when("on")), bare().only_when("on"));
        assert_eq!(with(base.assumes("one")), bare().assumes("one"));
        assert_eq!(with(base.note("wide")), bare().note("wide"));
        assert_eq!(with(base.on_host("offloaded")), bare().on_host("offloaded"));
        assert_eq!(
            with(base.whole_on_every_rank("encoder")),
            bare().whole_on_every_rank("encoder")
        );
    }

    #[test]
    fn before_load_a_zero_figure_is_unknown_and_only_the_gate_and_assumption_show() {
        let shown = decl("n", "c", Scope::Model)
            .only_when("on")
            .assumes("one")
            .note("not shown")
            .on_host("not shown")
            .after_load_decl(0, "bound", 48, AfterLoadRows::MaxNumSeqs);
        let expected = AfterLoadDecl {
            name: "n",
            cache: "c",
            scope: Scope::Model,
            positions: None,
            positions_bound: "bound",
            bytes_per_row: Some(48),
            rows: AfterLoadRows::MaxNumSeqs,
            only_when: Some("on"),
            assumes: Some("one"),
        };
        assert_eq!(shown, expected);
        let known =
            decl("n", "c", Scope::Model).after_load_decl(7, "bound", 0, AfterLoadRows::MaxNumSeqs);
        assert_eq!((known.positions, known.bytes_per_row), (Some(7), None));
        assert_eq!((known.only_when, known.assumes), (None, None));
    }
}
