//! An SVG chart of model-local bytes at peak against `max_num_seqs`
//! (feature `chart`), for documentation where people would rather look than
//! read.
//!
//! - x: `max_num_seqs` from 1 to 512, linear (every declaration grows
//!   linearly or not at all, so bands are straight).
//! - y: bytes at peak, in MiB or GiB (whichever keeps the figures readable).
//! - One band per declaration, stacked: resident declarations (scope
//!   `model`, allocated during load and so already charged by profiling) at
//!   the bottom in solid colour, then those allocated after profiling, light
//!   and hatched. The legend, beside the plot, lists them top to bottom as
//!   they are stacked, under one heading per kind.
//! - The totals at both ends are marked, and written in the subtitle.
//!
//! Byte math is checked: a peak or a sum that overflows `u64` at any
//! `max_num_seqs` drawn is [`ChartError::Kv`] with [`KvError::Overflow`]
//! naming the declaration; nothing panics or wraps.
//!
//! ```
//! use kv_core::chart::Chart;
//! use kv_core::ModelLocalKv;
//!
//! #[derive(ModelLocalKv)]
//! #[kv(
//!     name = "retained",
//!     cache = "sliding DynamicCache",
//!     layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
//!     positions = bounded(71, because = "sliding_window(72) - 1"),
//!     scope = request,
//!     rows = max_num_seqs,
//! )]
//! struct CodecDecoder;
//!
//! let svg = Chart::new("Model-local KV")
//!     .collection(&kv_core::collect(&CodecDecoder))
//!     .to_svg()?;
//! assert!(svg.starts_with("<svg"));
//! assert!(svg.contains("\nretained\n</text>")); // in the legend
//! assert!(svg.contains("Total: 4.44 MiB at max_num_seqs=1, 2.22 GiB at 512"));
//! # Ok::<(), kv_core::chart::ChartError>(())
//! ```
//!
//! To look at one as a person would, render it in a headless browser:
//!
//! ```sh
//! chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
//!   --disable-background-networking --disable-component-update --disable-sync \
//!   --user-data-dir=$(mktemp -d) --screenshot=/tmp/chart.png --window-size=900,600 \
//!   file://$PWD/docs/model-local-kv.svg
//! ```

use std::fmt;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::collection::collect::Collection;
use crate::error::KvError;
use crate::spec::KvSpec;
use crate::units::{human_bytes, GIB, MIB};

/// The smallest `max_num_seqs` drawn.
pub(crate) const MAX_NUM_SEQS_FROM: u64 = 1;
/// The largest `max_num_seqs` drawn.
pub(crate) const MAX_NUM_SEQS_TO: u64 = 512;

/// Where bands are sampled (and the x axis is labelled). Peaks are linear in
/// `max_num_seqs`, so straight segments between samples are exact.
const SAMPLES: [u64; 9] = [1, 64, 128, 192, 256, 320, 384, 448, 512];
/// Hatching of after-profiling bands: a vertical line every this many seqs.
const HATCH_EVERY: u64 = 12;

const WIDTH: u32 = 900;
const HEIGHT: u32 = 560;
/// Height of the title block above the plot.
const TITLE_HEIGHT: u32 = 64;
/// Width of the plot; the legend takes the rest.
const PLOT_WIDTH: u32 = 590;
const FONT: &str = "sans-serif";
/// The longest legend label drawn whole.
const LEGEND_CHARS: usize = 40;

/// Tableau 10: distinguishable, and readable light as well as solid.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0xba, 0xb0, 0xac),
];
/// Opacity of an after-profiling band's fill.
const LIGHT: f64 = 0.3;

/// Why a chart could not be drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChartError {
    /// A declaration's bytes, or the sum of the stack, overflow `u64` at a
    /// `max_num_seqs` the chart draws.
    Kv(KvError),
    /// The plotting library failed to draw (not expected when drawing to a
    /// string).
    Draw(String),
}

impl fmt::Display for ChartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChartError::Kv(error) => write!(f, "cannot chart model-local KV: {error}"),
            ChartError::Draw(problem) => write!(f, "cannot draw the chart: {problem}"),
        }
    }
}

impl std::error::Error for ChartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ChartError::Kv(error) => Some(error),
            ChartError::Draw(_) => None,
        }
    }
}

impl From<KvError> for ChartError {
    fn from(error: KvError) -> ChartError {
        ChartError::Kv(error)
    }
}

/// A stacked chart of declarations' bytes at peak against `max_num_seqs`.
#[derive(Clone, Debug)]
pub struct Chart {
    title: String,
    /// `(label.name, spec)`, in the order given.
    declarations: Vec<(String, KvSpec)>,
}

/// One declaration as a band of the stack.
struct Band<'c> {
    label: &'c str,
    resident: bool,
    color: RGBColor,
    spec: &'c KvSpec,
}

impl Chart {
    /// An empty chart titled `title`.
    pub fn new(title: impl Into<String>) -> Chart {
        Chart {
            title: title.into(),
            declarations: Vec::new(),
        }
    }

    /// Adds declarations, each with the label of its owner, shown as
    /// `label.name` (just `name` when the label is empty), like
    /// [`Table::rows`](crate::Table::rows).
    pub fn rows<'s, L: AsRef<str>>(
        mut self,
        rows: impl IntoIterator<Item = (L, &'s KvSpec)>,
    ) -> Chart {
        for (label, spec) in rows {
            let label = label.as_ref();
            let shown = if label.is_empty() {
                spec.name.to_string()
            } else {
                format!("{label}.{}", spec.name)
            };
            self.declarations.push((shown, spec.clone()));
        }
        self
    }

    /// Adds every declaration of a collected model, labelled by its full name
    /// (`decoder.retained`).
    pub fn collection(self, collection: &Collection) -> Chart {
        self.rows(
            collection
                .entries()
                .iter()
                .map(|entry| (entry.path.as_str(), &entry.spec)),
        )
    }

    /// The chart as a standalone SVG document, 900 x 560.
    pub fn to_svg(&self) -> Result<String, ChartError> {
        let bands = self.bands();
        // Checked byte math first: every figure drawn is known to fit.
        let mut stacks = Vec::with_capacity(SAMPLES.len());
        for x in SAMPLES {
            stacks.push(stack_at(&bands, x)?);
        }
        let totals: Vec<u64> = stacks
            .iter()
            .map(|tops| tops.last().copied().unwrap_or(0))
            .collect();
        let max_total = totals.iter().copied().max().unwrap_or(0);
        let (unit_name, unit) = if max_total >= GIB {
            ("GiB", GIB)
        } else {
            ("MiB", MIB)
        };
        let in_unit = |bytes: u64| bytes as f64 / unit as f64;
        let y_max = (in_unit(max_total) * 1.15).max(1.0);

        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
            root.fill(&WHITE).map_err(draw)?;
            let (head, body) = root.split_vertically(TITLE_HEIGHT);
            let (plot, legend) = body.split_horizontally(PLOT_WIDTH);

            head.draw(&Text::new(
                self.title.clone(),
                (16, 10),
                (FONT, 26).into_font().style(FontStyle::Bold),
            ))
            .map_err(draw)?;
            head.draw(&Text::new(
                format!(
                    "Bytes at peak against max_num_seqs, stacked by declaration. \
                     Total: {} at max_num_seqs={MAX_NUM_SEQS_FROM}, {} at {MAX_NUM_SEQS_TO}",
                    human_bytes(totals[0]),
                    human_bytes(totals[SAMPLES.len() - 1]),
                ),
                (16, 40),
                (FONT, 17).into_font().color(&RGBColor(0x44, 0x44, 0x44)),
            ))
            .map_err(draw)?;

            let mut chart = ChartBuilder::on(&plot)
                .margin_left(8)
                .margin_right(24)
                .margin_bottom(8)
                .margin_top(12)
                .x_label_area_size(44)
                .y_label_area_size(64)
                .build_cartesian_2d(
                    (0u64..MAX_NUM_SEQS_TO).with_key_points(SAMPLES.to_vec()),
                    0f64..y_max,
                )
                .map_err(draw)?;
            chart
                .configure_mesh()
                .light_line_style(TRANSPARENT)
                .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
                .x_desc("max_num_seqs")
                .y_desc(format!("model-local KV at peak ({unit_name})"))
                .axis_desc_style((FONT, 17))
                .label_style((FONT, 15))
                .x_label_formatter(&|x| x.to_string())
                .y_label_formatter(&|y| format!("{y:.1}"))
                .draw()
                .map_err(draw)?;

            for (i, band) in bands.iter().enumerate() {
                let top = |s: usize| (SAMPLES[s], in_unit(stacks[s][i]));
                let bottom = |s: usize| {
                    let below = if i == 0 { 0 } else { stacks[s][i - 1] };
                    (SAMPLES[s], in_unit(below))
                };
                let outline: Vec<(u64, f64)> = (0..SAMPLES.len())
                    .map(top)
                    .chain((0..SAMPLES.len()).rev().map(bottom))
                    .collect();
                let fill = if band.resident {
                    band.color.filled()
                } else {
                    band.color.mix(LIGHT).filled()
                };
                chart
                    .draw_series(std::iter::once(Polygon::new(outline, fill)))
                    .map_err(draw)?;
                let edge: Vec<(u64, f64)> = (0..SAMPLES.len()).map(top).collect();
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        edge,
                        band.color.stroke_width(2),
                    )))
                    .map_err(draw)?;
                if !band.resident {
                    let hatch = hatch_lines(&bands, i)?;
                    let hatch = hatch.into_iter().map(|(x, low, high)| {
                        PathElement::new(
                            vec![(x, in_unit(low)), (x, in_unit(high))],
                            band.color.mix(0.5).stroke_width(1),
                        )
                    });
                    chart.draw_series(hatch).map_err(draw)?;
                }
            }

            // Dots at both ends of the stack; the right end's total is
            // written beside it (the left end's is in the subtitle: a label
            // there would sit on the rising bands).
            for s in [0, SAMPLES.len() - 1] {
                let total = totals[s];
                chart
                    .draw_series([Circle::new((SAMPLES[s], in_unit(total)), 4, BLACK.filled())])
                    .map_err(draw)?;
            }
            let last = totals[SAMPLES.len() - 1];
            chart
                .draw_series(std::iter::once(Text::new(
                    human_bytes(last),
                    (MAX_NUM_SEQS_TO, in_unit(last) + y_max * 0.01),
                    (FONT, 16)
                        .into_font()
                        .style(FontStyle::Bold)
                        .color(&BLACK)
                        .pos(Pos::new(HPos::Right, VPos::Bottom)),
                )))
                .map_err(draw)?;

            draw_legend(&legend, &bands)?;
            root.present().map_err(draw)?;
        }
        Ok(svg)
    }

    /// Resident declarations first (bottom of the stack), then those
    /// allocated after profiling, each in the order given; colours by
    /// position in the order given, so adding a declaration at the end
    /// recolours nothing.
    fn bands(&self) -> Vec<Band<'_>> {
        let (mut resident, after): (Vec<_>, Vec<_>) = self
            .declarations
            .iter()
            .enumerate()
            .map(|(i, (label, spec))| Band {
                label: label.as_str(),
                resident: spec.scope.is_resident(),
                color: PALETTE[i % PALETTE.len()],
                spec,
            })
            .partition(|b| b.resident);
        resident.extend(after);
        resident
    }
}

/// The top of each band at `max_num_seqs`, bottom band first: running sums
/// of peak bytes, checked.
fn stack_at(bands: &[Band<'_>], max_num_seqs: u64) -> Result<Vec<u64>, KvError> {
    let mut tops = Vec::with_capacity(bands.len());
    let mut sum: u64 = 0;
    for band in bands {
        let overflow = |step| KvError::Overflow {
            declaration: band.label.to_owned(),
            step,
        };
        let peak = band
            .spec
            .peak_bytes(max_num_seqs)
            .map_err(|o| overflow(o.step))?;
        sum = sum
            .checked_add(peak)
            .ok_or_else(|| overflow("sum of peak bytes"))?;
        tops.push(sum);
    }
    Ok(tops)
}

/// Vertical hatch lines inside band `i`: `(max_num_seqs, bottom, top)` in bytes.
fn hatch_lines(bands: &[Band<'_>], i: usize) -> Result<Vec<(u64, u64, u64)>, KvError> {
    let mut lines = Vec::new();
    let mut x = HATCH_EVERY;
    while x < MAX_NUM_SEQS_TO {
        let tops = stack_at(&bands[..=i], x)?;
        let bottom = if i == 0 { 0 } else { tops[i - 1] };
        lines.push((x, bottom, tops[i]));
        x += HATCH_EVERY;
    }
    Ok(lines)
}

/// The legend beside the plot: bands top to bottom as stacked, under a
/// heading per kind.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    bands: &[Band<'_>],
) -> Result<(), ChartError> {
    let heading = (FONT, 17).into_font().style(FontStyle::Bold);
    let note = (FONT, 14).into_font().color(&RGBColor(0x55, 0x55, 0x55));
    // Entries are 22 px apart while they fit; more declarations than fit
    // get closer rows and a smaller font (down to 10 px apart).
    let room = (HEIGHT - TITLE_HEIGHT) as i32 - 16 - 2 * (20 + 22 + 12);
    let step = (room / bands.len().max(1) as i32).clamp(10, 22);
    let swatch_height = step * 14 / 22;
    let entry = (FONT, (f64::from(step) * 15.0 / 22.0).max(11.0)).into_font();
    let groups = [
        (
            false,
            "Allocated after profiling",
            "not charged by profiling: light, hatched",
        ),
        (
            true,
            "Resident (scope model)",
            "allocated during load, already charged: solid",
        ),
    ];
    let mut y = 16;
    for (resident, title, explanation) in groups {
        let members: Vec<&Band<'_>> = bands
            .iter()
            .rev()
            .filter(|b| b.resident == resident)
            .collect();
        if members.is_empty() {
            continue;
        }
        area.draw(&Text::new(title, (8, y), heading.clone()))
            .map_err(draw)?;
        y += 20;
        area.draw(&Text::new(explanation, (8, y), note.clone()))
            .map_err(draw)?;
        y += 22;
        for band in members {
            let swatch = [(12, y), (32, y + swatch_height)];
            if resident {
                area.draw(&Rectangle::new(swatch, band.color.filled()))
                    .map_err(draw)?;
            } else {
                area.draw(&Rectangle::new(swatch, band.color.mix(LIGHT).filled()))
                    .map_err(draw)?;
                for x in [16, 22, 28] {
                    area.draw(&PathElement::new(
                        vec![(x, y), (x, y + swatch_height)],
                        band.color.mix(0.5).stroke_width(1),
                    ))
                    .map_err(draw)?;
                }
                area.draw(&PathElement::new(
                    vec![(12, y), (32, y)],
                    band.color.stroke_width(2),
                ))
                .map_err(draw)?;
            }
            area.draw(&Text::new(legend_label(band.label), (40, y), entry.clone()))
                .map_err(draw)?;
            y += step;
        }
        y += 12;
    }
    Ok(())
}

/// At most [`LEGEND_CHARS`] characters, so the legend stays inside the
/// image; a longer label ends in `…` (the tables have every name whole).
fn legend_label(label: &str) -> String {
    if label.chars().count() <= LEGEND_CHARS {
        label.to_owned()
    } else {
        let kept: String = label.chars().take(LEGEND_CHARS - 1).collect();
        format!("{kept}…")
    }
}

fn draw<E: std::error::Error + Send + Sync>(
    error: plotters::drawing::DrawingAreaErrorKind<E>,
) -> ChartError {
    ChartError::Draw(error.to_string())
}
