//! Tables of declared model-local KV, for documentation and reviews.
//!
//! One row per declaration, with the columns **Model**, **Cache**, **Bounded
//! by**, **Per row**, **Rows** and **Peak @ max_num_seqs=N**. The peak column
//! is computed at the `max_num_seqs` the table is built with, and its header
//! says which; fixed-row declarations do not depend on it.
//!
//! Rows come from types ([`Table::types`], no instance needed: what
//! [`DeclaredKv::KV_DECLS`](crate::DeclaredKv::KV_DECLS) holds) or from
//! declarations already collected from a live model ([`Table::rows`], plain
//! `(label, &KvSpec)` pairs).
//!
//! * Sizes read like [`human_bytes`]: `704.00 KiB`, `4.44 MiB`.
//! * The model cell is `label.name` (`Type.name` for types); an empty label
//!   leaves just the declaration's name.
//! * The cache cell adds the conditions: `sliding DynamicCache (only when
//!   async_chunk)`, `... (assumes duplex off)`, or both separated by `; `.
//! * Bounded by: `71 (sliding_window(72) - 1)`.
//! * Rows: `max_num_seqs`, or `fixed 261 (sum of captured buckets)`.
//! * A declaration read after load shows what is known before load (its
//!   reasons always; positions, bytes per row and a fixed count where they are
//!   literal or const) and `known after load` for the rest.
//! * A figure whose byte arithmetic overflows `u64` reads `overflow`; nothing
//!   panics or wraps.
//! * From a collected model ([`Table::collection`]) or an exported report
//!   ([`Table::report`]), identical declarations of sibling owners (one per
//!   layer) are one row, `layers.0..=27.attn.cache`, their sizes the sum
//!   with the count and each one's: `112.00 MiB (28 x 4.00 MiB)`; a
//!   declaration that yields nothing (a count read after load is zero) is a
//!   row that says so, `declares nothing: 0 layers from ...`, of `0 B`.
//! * In Markdown, `|` is escaped as `\|` and a line break becomes `<br>`, so
//!   a cell never breaks the table.

use std::fmt::Write as _;

use super::collect::{Collection, EmptyDeclaration};
use super::group::times;
use crate::declare::type_decls::{
    AfterLoadDecl, AfterLoadRows, KvTypeDecls, NO_POSITIONS, TENSORS_AFTER_LOAD,
};
use crate::error::Overflow;
#[cfg(feature = "json")]
use crate::export::json::{ExportedDeclaration, ExportedReport};
use crate::spec::{KvSpec, Layout, Rows};
use crate::units::human_bytes;

/// What a figure reads when its byte arithmetic overflows `u64`.
const OVERFLOW: &str = "overflow";

/// What a figure reads when it is known only after the model is loaded.
const KNOWN_AFTER_LOAD: &str = "known after load";

const COLUMNS: usize = 6;

/// A table of declarations at one `max_num_seqs`, rendered as Markdown or as
/// aligned plain text.
///
/// ```
/// use kv_core::Table;
/// use kv_core::{DType, Geometry, KvSpec, Positions, Rows, Scope};
///
/// let retained = KvSpec::attention(
///     "retained",
///     "sliding DynamicCache",
///     Geometry::new(8, 16, 64, DType::F32),
///     Positions::bounded(71, "sliding_window(72) - 1"),
///     Scope::Request,
///     Rows::MaxNumSeqs,
/// )
/// .only_when("async_chunk");
/// let markdown = Table::new(256).rows([("decoder", &retained)]).to_markdown();
/// let lines: Vec<&str> = markdown.lines().collect();
/// assert_eq!(lines.len(), 3); // header, alignment rule, one declaration
/// assert_eq!(
///     lines[2],
///     "| decoder.retained | sliding DynamicCache (only when async_chunk) \
///      | 71 (sliding_window(72) - 1) | 4.44 MiB | max_num_seqs |                1.11 GiB |"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    max_num_seqs: u64,
    cells: Vec<[String; COLUMNS]>,
}

impl Table {
    /// An empty table whose peak column is computed at `max_num_seqs`.
    pub fn new(max_num_seqs: u64) -> Table {
        Table {
            max_num_seqs,
            cells: Vec::new(),
        }
    }

    /// Appends what each type declares, in order: its static declarations
    /// (gated ones included, with their condition), then those read after
    /// load, with `known after load` where a figure is read after load.
    pub fn types(mut self, types: &[KvTypeDecls]) -> Table {
        for decls in types {
            for spec in decls.static_specs {
                self.push_spec(decls.type_name, spec);
            }
            for decl in decls.after_load {
                self.push_after_load(decls.type_name, decl);
            }
        }
        self
    }

    /// Appends declarations collected from a live model, each with the label
    /// of its owner (a path such as `talker.decoder`, or a model name).
    pub fn rows<'s, L: AsRef<str>>(
        mut self,
        rows: impl IntoIterator<Item = (L, &'s KvSpec)>,
    ) -> Table {
        for (label, spec) in rows {
            self.push_spec(label.as_ref(), spec);
        }
        self
    }

    /// Appends the declarations of a collected model as its start-up report
    /// shows them: identical declarations of sibling owners (one per layer)
    /// as one row, then one row per declaration that yields nothing. Each is
    /// labelled `model: path` (the path alone when `model` is empty, `model`
    /// alone at the root).
    ///
    /// ```
    /// use kv_core::{collect, ModelLocalKv, Table};
    ///
    /// #[derive(ModelLocalKv)]
    /// #[kv(name = "cache", cache = "KvCache",
    ///      layers = 1, kv_heads = 2, head_dim = 8, dtype = bf16,
    ///      positions = bounded(64, because = "max_seq_len"),
    ///      scope = request, rows = max_num_seqs)]
    /// struct Attention;
    ///
    /// #[derive(ModelLocalKv)]
    /// struct Model {
    ///     #[kv(child)]
    ///     layers: Vec<Attention>,
    /// }
    ///
    /// let model = Model { layers: vec![Attention, Attention, Attention] };
    /// let table = Table::new(2).collection("Tiny", &collect(&model)).to_markdown();
    /// // Each: 1 x 2 x (8 + 8) x 2 B x 64 positions = 4 KiB per row, 8 KiB at 2 rows.
    /// assert_eq!(
    ///     table.lines().nth(2),
    ///     Some("| Tiny: layers.0..=2.cache | KvCache | 64 (max_seq_len) \
    ///           | 12.00 KiB (3 x 4.00 KiB) | max_num_seqs | 24.00 KiB (3 x 8.00 KiB) |")
    /// );
    /// ```
    pub fn collection(mut self, model: &str, collection: &Collection) -> Table {
        let label = |path: &str| match (model.is_empty(), path.is_empty()) {
            (true, _) => path.to_owned(),
            (false, true) => model.to_owned(),
            (false, false) => format!("{model}: {path}"),
        };
        for group in collection.grouped() {
            self.push_group(&label(&group.path), &group.first.spec, group.count);
        }
        for empty in collection.empty_declarations() {
            self.push_empty(&label(&empty.path), empty);
        }
        self
    }

    /// Appends the declarations of an exported report (feature `json`), each
    /// labelled with its path; the figures are the report's own, so a report
    /// read back renders as the model it came from.
    ///
    /// ```
    /// use kv_core::Table;
    /// use kv_core::{collect, DType, Geometry, KvError, KvSpec, ModelLocalKv, Positions, Rows, Scope};
    ///
    /// struct Talker;
    /// impl ModelLocalKv for Talker {
    ///     fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
    ///         out.push(KvSpec::attention("cache", "StaticCache", Geometry::new(24, 2, 64, DType::BF16),
    ///             Positions::bounded(2048, "max_cache_len"), Scope::Invocation,
    ///             Rows::fixed(1, "calls are serialized")));
    ///         Ok(())
    ///     }
    /// }
    /// let collection = collect(&Talker);
    /// let live = Table::new(256).collection("", &collection);
    /// let exported = Table::new(256).report(&collection.export(256));
    /// assert_eq!(exported.to_markdown(), live.to_markdown());
    /// ```
    ///
    /// As [`Table::collection`], identical declarations of sibling owners
    /// are one row and declarations that yield nothing say so.
    #[cfg(feature = "json")]
    pub fn report(mut self, report: &ExportedReport) -> Table {
        let unplaced = |d: &ExportedDeclaration| ExportedDeclaration {
            path: String::new(),
            full_name: String::new(),
            ..d.clone()
        };
        let declarations = &report.declarations;
        let groups = super::group::runs(
            declarations,
            |d| &d.path,
            |d| (d.owner_type.as_str(), d.name.as_str()),
            |a, b| unplaced(a) == unplaced(b),
        );
        for group in groups {
            let d = &declarations[group.first];
            self.cells.push([
                model_cell(&group.path, &d.name),
                cache_cell(&d.cache, d.only_when.as_deref(), d.assumes.as_deref()),
                exported_bound(d),
                exported_size(d.bytes_per_row, group.count),
                exported_rows(d),
                exported_size(d.peak_bytes, group.count),
            ]);
        }
        for empty in &report.empty_declarations {
            let d = &empty.declaration;
            self.cells.push([
                model_cell(&d.path, &d.name),
                cache_cell(&d.cache, d.only_when.as_deref(), d.assumes.as_deref()),
                nothing_cell(&empty.reason),
                human_bytes(0),
                exported_rows(d),
                human_bytes(0),
            ]);
        }
        self
    }

    /// The `max_num_seqs` the peak column is computed at.
    pub fn max_num_seqs(&self) -> u64 {
        self.max_num_seqs
    }

    /// The table as GitHub-flavoured Markdown, one line per row, columns
    /// padded to line up; sizes are right-aligned.
    pub fn to_markdown(&self) -> String {
        let header = self.header();
        let escaped: Vec<[String; COLUMNS]> = self
            .cells
            .iter()
            .map(|row| row.each_ref().map(|cell| escape_markdown(cell)))
            .collect();
        let widths = widths(&header, &escaped);
        let mut out = String::new();
        write_line(&mut out, "| ", " | ", " |", &header, &widths);
        let rule = widths.map(|w| "-".repeat(w.max(3)));
        let rule = std::array::from_fn(|i| {
            if RIGHT_ALIGNED[i] {
                format!("{}:", &rule[i][1..])
            } else {
                rule[i].clone()
            }
        });
        write_line(&mut out, "| ", " | ", " |", &rule, &widths);
        for row in &escaped {
            write_line(&mut out, "| ", " | ", " |", row, &widths);
        }
        out
    }

    /// The table as aligned plain text (for logs and terminals): the header,
    /// then one line per row, columns separated by two spaces; line breaks in
    /// cells become spaces.
    pub fn to_text(&self) -> String {
        let header = self.header();
        let flat: Vec<[String; COLUMNS]> = self
            .cells
            .iter()
            .map(|row| row.each_ref().map(|cell| flatten_lines(cell, " ")))
            .collect();
        let widths = widths(&header, &flat);
        let mut out = String::new();
        write_line(&mut out, "", "  ", "", &header, &widths);
        for row in &flat {
            write_line(&mut out, "", "  ", "", row, &widths);
        }
        out
    }

    fn header(&self) -> [String; COLUMNS] {
        [
            "Model".into(),
            "Cache".into(),
            "Bounded by".into(),
            "Per row".into(),
            "Rows".into(),
            format!("Peak @ max_num_seqs={}", self.max_num_seqs),
        ]
    }

    fn push_spec(&mut self, label: &str, spec: &KvSpec) {
        self.push_group(label, spec, 1);
    }

    /// `count` identical declarations as one row: sizes `TOTAL (COUNT x EACH)`.
    fn push_group(&mut self, label: &str, spec: &KvSpec, count: usize) {
        self.cells.push([
            model_cell(label, &spec.name),
            cache_cell(
                &spec.cache,
                spec.only_when.as_deref(),
                spec.assumes.as_deref(),
            ),
            bound_cell(spec),
            group_size_cell(spec.bytes_per_row(), count),
            rows_cell(&spec.rows),
            group_size_cell(spec.peak_bytes(self.max_num_seqs), count),
        ]);
    }

    fn push_empty(&mut self, label: &str, empty: &EmptyDeclaration) {
        let spec = &empty.spec;
        self.cells.push([
            model_cell(label, &spec.name),
            cache_cell(
                &spec.cache,
                spec.only_when.as_deref(),
                spec.assumes.as_deref(),
            ),
            nothing_cell(&empty.reason()),
            human_bytes(0),
            rows_cell(&spec.rows),
            human_bytes(0),
        ]);
    }

    fn push_after_load(&mut self, label: &str, decl: &AfterLoadDecl) {
        let later = || KNOWN_AFTER_LOAD.to_owned();
        let bound = match decl.positions {
            Some(count) => bounded_cell(count, decl.positions_bound),
            None if [NO_POSITIONS, TENSORS_AFTER_LOAD].contains(&decl.positions_bound) => {
                decl.positions_bound.to_owned()
            }
            None => format!("{KNOWN_AFTER_LOAD} ({})", decl.positions_bound),
        };
        let (rows, row_count) = match decl.rows {
            AfterLoadRows::MaxNumSeqs => ("max_num_seqs".to_owned(), Some(self.max_num_seqs)),
            AfterLoadRows::Fixed {
                count: Some(count),
                because,
            } => (fixed_cell(count, because), Some(count)),
            AfterLoadRows::Fixed {
                count: None,
                because,
            } => (format!("fixed, {KNOWN_AFTER_LOAD} ({because})"), None),
        };
        let peak = match (decl.bytes_per_row, row_count) {
            (Some(per_row), Some(rows)) => {
                size_cell(per_row.checked_mul(rows).ok_or(Overflow::PEAK))
            }
            _ => later(),
        };
        self.cells.push([
            model_cell(label, decl.name),
            cache_cell(decl.cache, decl.only_when, decl.assumes),
            bound,
            decl.bytes_per_row.map_or_else(later, human_bytes),
            rows,
            peak,
        ]);
    }
}

/// Which columns are right-aligned: the two sizes (Per row, Peak).
const RIGHT_ALIGNED: [bool; COLUMNS] = [false, false, false, true, false, true];

/// Bounded by: `71 (sliding_window(72) - 1)`, as `Positions` displays itself.
fn bounded_cell(count: u64, reason: &str) -> String {
    format!("{count} ({reason})")
}

/// Rows: `fixed 261 (sum of captured buckets)`.
fn fixed_cell(count: u64, because: &str) -> String {
    format!("fixed {count} ({because})")
}

/// Rows of a live declaration: `max_num_seqs`, or as [`fixed_cell`].
fn rows_cell(rows: &Rows) -> String {
    match rows {
        Rows::MaxNumSeqs => "max_num_seqs".to_owned(),
        Rows::Fixed { count, because } => fixed_cell(*count, because),
    }
}

/// Bounded by, for a declaration that yields nothing: `declares nothing: 0
/// layers from `self.sliding_layers``.
fn nothing_cell(reason: &str) -> String {
    format!("declares nothing: {reason}")
}

/// A size of `count` identical declarations of `each`: the size alone for
/// one; `112.00 MiB (28 x 4.00 MiB)` for several; `overflow` where the
/// product overflows.
fn group_size_cell(each: Result<u64, Overflow>, count: usize) -> String {
    match each {
        Ok(each) if count > 1 => match times(count, each) {
            Ok(total) => format!("{} ({count} x {})", human_bytes(total), human_bytes(each)),
            Err(_) => OVERFLOW.to_owned(),
        },
        each => size_cell(each),
    }
}

/// An exported declaration's rows: `fixed(N; reason)` or its driver.
#[cfg(feature = "json")]
fn exported_rows(d: &ExportedDeclaration) -> String {
    match &d.rows_reason {
        Some(because) => fixed_cell(d.rows, because),
        None => d.rows_driver.clone(),
    }
}

/// An exported figure (`null` where it overflowed) of `count` declarations.
#[cfg(feature = "json")]
fn exported_size(each: Option<u64>, count: usize) -> String {
    group_size_cell(
        each.ok_or(Overflow {
            step: "the report's figure",
        }),
        count,
    )
}

/// Bounded by, from an exported declaration.
#[cfg(feature = "json")]
fn exported_bound(d: &ExportedDeclaration) -> String {
    match (d.positions, &d.positions_bound, &d.tensor_parts) {
        (Some(count), Some(reason), _) => bounded_cell(count, reason),
        (Some(count), None, _) => count.to_string(),
        (None, _, Some(parts)) => parts
            .iter()
            .map(|part| part.text.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        (None, _, None) => NO_POSITIONS.to_owned(),
    }
}

/// Bounded by: the positions and why, the tensors' shapes, or none for
/// recurrent state.
fn bound_cell(spec: &KvSpec) -> String {
    match (&spec.layout, spec.positions()) {
        (_, Some(positions)) => positions.to_string(),
        (Layout::Tensors(tensors), None) => tensors.to_string(),
        (_, None) => NO_POSITIONS.to_owned(),
    }
}

fn model_cell(label: &str, name: &str) -> String {
    if label.is_empty() {
        name.to_owned()
    } else {
        format!("{label}.{name}")
    }
}

fn cache_cell(cache: &str, only_when: Option<&str>, assumes: Option<&str>) -> String {
    let conditions: Vec<String> = [
        only_when.map(|c| format!("only when {c}")),
        assumes.map(|a| format!("assumes {a}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if conditions.is_empty() {
        cache.to_owned()
    } else {
        format!("{cache} ({})", conditions.join("; "))
    }
}

fn size_cell(bytes: Result<u64, Overflow>) -> String {
    match bytes {
        Ok(bytes) => human_bytes(bytes),
        Err(_) => OVERFLOW.to_owned(),
    }
}

/// Replaces every line break (`\r\n`, `\n`, `\r`) with `with`.
fn flatten_lines(cell: &str, with: &str) -> String {
    cell.replace("\r\n", "\n").replace(['\n', '\r'], with)
}

/// A cell that cannot break a Markdown table row.
fn escape_markdown(cell: &str) -> String {
    flatten_lines(cell, "<br>").replace('|', "\\|")
}

fn widths(header: &[String; COLUMNS], rows: &[[String; COLUMNS]]) -> [usize; COLUMNS] {
    let mut widths = header.each_ref().map(|h| h.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    widths.map(|w| w.max(3))
}

fn write_line(
    out: &mut String,
    open: &str,
    separator: &str,
    close: &str,
    cells: &[String; COLUMNS],
    widths: &[usize; COLUMNS],
) {
    let mut line = String::from(open);
    for (i, (cell, &width)) in cells.iter().zip(widths).enumerate() {
        if i > 0 {
            line.push_str(separator);
        }
        let pad = width.saturating_sub(cell.chars().count());
        if RIGHT_ALIGNED[i] {
            let _ = write!(line, "{}{cell}", " ".repeat(pad));
        } else {
            let _ = write!(line, "{cell}{}", " ".repeat(pad));
        }
    }
    line.push_str(close);
    // Plain text has no closing border: leave no trailing spaces.
    out.push_str(line.trim_end());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::__private_v0_1::{self, after_load_fixed};
    use crate::spec::Scope;

    const fn decl(bytes_per_row: u64, count: u64) -> AfterLoadDecl {
        let rows = after_load_fixed(count, "r");
        __private_v0_1::decl("n", "c", Scope::Model).after_load_decl(4, "four", bytes_per_row, rows)
    }
    const KNOWN: &[AfterLoadDecl] = &[decl(1 << 20, 3)];
    const OVERFLOWING: &[AfterLoadDecl] = &[decl(u64::MAX, 2)];

    fn table(after_load: &'static [AfterLoadDecl]) -> Table {
        Table::new(8).types(&[KvTypeDecls {
            type_name: "T",
            static_specs: &[],
            after_load,
        }])
    }

    /// The derive never gives an after-load declaration both figures (one of
    /// them is what is read after load), but the table must not lose a peak
    /// it can compute, nor wrap one it cannot.
    #[test]
    fn an_after_load_row_with_both_figures_known_shows_its_peak() {
        let known = table(KNOWN);
        assert_eq!(known.cells[0][3], "1.00 MiB");
        assert_eq!(known.cells[0][5], "3.00 MiB");
        assert_eq!(table(OVERFLOWING).cells[0][5], OVERFLOW);
    }
}
