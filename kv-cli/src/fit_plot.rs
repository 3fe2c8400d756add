//! `kv fit --plot FILE.svg`: vLLM's maximum concurrency against the context
//! length, one line per tensor-parallel size, for people who would rather
//! look than read.

use plotters::prelude::*;

const WIDTH: u32 = 900;
const HEIGHT: u32 = 560;
const FONT: &str = "sans-serif";
/// Tableau 10's first four, as kv-core's chart colours its bands.
const PALETTE: [RGBColor; 4] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x59, 0xa1, 0x4f),
];

/// One line: a TP size and its (context length, concurrency) points.
pub(crate) struct Curve {
    pub tp: u64,
    pub points: Vec<(u64, f64)>,
}

/// The chart as an SVG document; `cap` is the scheduler's `max_num_seqs`,
/// drawn as a dashed line (vLLM's concurrency figure is memory alone).
pub(crate) fn concurrency_svg(
    title: &str,
    subtitle: &str,
    curves: &[Curve],
    cap: u64,
) -> Result<String, String> {
    let points = || curves.iter().flat_map(|c| c.points.iter());
    // x is log2 of the length, so the doubling lengths sit evenly.
    let log2 = |length: u64| (length as f64).log2();
    let x_max = points()
        .map(|p| p.0)
        .max()
        .ok_or("no TP size starts at any length")?;
    let x_min = points().map(|p| p.0).min().unwrap_or(1).min(x_max);
    let (x_from, x_to) = (log2(x_min), log2(x_max).max(log2(x_min) + 1.0));
    let y_max = points().map(|p| p.1).fold(cap as f64, f64::max).max(2.0) * 1.5;
    let draw = |e: DrawingAreaErrorKind<_>| e.to_string();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(draw)?;
        let (head, plot) = root.split_vertically(64);
        head.draw(&Text::new(
            title.to_owned(),
            (16, 10),
            (FONT, 24).into_font().style(FontStyle::Bold),
        ))
        .map_err(draw)?;
        head.draw(&Text::new(
            subtitle.to_owned(),
            (16, 40),
            (FONT, 15).into_font().color(&RGBColor(0x44, 0x44, 0x44)),
        ))
        .map_err(draw)?;
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(x_from..x_to, (0.5f64..y_max).log_scale())
            .map_err(draw)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .x_desc("context length (tokens per request)")
            .y_desc("vLLM's maximum concurrency (x)")
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 14))
            .x_labels((x_to - x_from).round() as usize + 1)
            .x_label_formatter(&|x| tokens(x.exp2().round() as u64))
            .y_label_formatter(&|y| format!("{y}"))
            .draw()
            .map_err(draw)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x_from, cap as f64), (x_to, cap as f64)],
                RGBColor(0x99, 0x99, 0x99).stroke_width(1),
            )))
            .map_err(draw)?
            .label(format!("max_num_seqs {cap}"))
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], RGBColor(0x99, 0x99, 0x99))
            });
        for (i, curve) in curves.iter().enumerate() {
            if curve.points.is_empty() {
                continue;
            }
            let color = PALETTE[i % PALETTE.len()];
            let line: Vec<(f64, f64)> = curve.points.iter().map(|&(x, y)| (log2(x), y)).collect();
            chart
                .draw_series(std::iter::once(PathElement::new(
                    line.clone(),
                    color.stroke_width(3),
                )))
                .map_err(draw)?
                .label(format!("tp {}", curve.tp))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
                });
            chart
                .draw_series(line.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(draw)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(0xcc, 0xcc, 0xcc))
            .label_font((FONT, 14))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(draw)?;
        root.present().map_err(draw)?;
    }
    Ok(svg)
}

/// A length as people write it: `8K` for 8,192, `131K` for 131,072 when it
/// is a multiple of 1,024, else the figure.
fn tokens(length: u64) -> String {
    if length >= 1024 && length.is_multiple_of(1024) {
        format!("{}K", length / 1024)
    } else {
        length.to_string()
    }
}
