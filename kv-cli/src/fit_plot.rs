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
    let Axes {
        x_from,
        x_to,
        x_labels,
        y_max,
    } = axes(curves, cap)?;
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
            .x_labels(x_labels)
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

/// log2 of a length: the doubling lengths sit evenly along x.
fn log2(length: u64) -> f64 {
    (length as f64).log2()
}

/// The plot's extent.
#[derive(Debug, PartialEq)]
struct Axes {
    /// log2 of the shortest length, and of the longest (at least one
    /// doubling further, so one length still spans an axis).
    x_from: f64,
    x_to: f64,
    /// One label a doubling.
    x_labels: usize,
    /// Half again above the highest point or the cap (at least 2): room
    /// for the legend.
    y_max: f64,
}

fn axes(curves: &[Curve], cap: u64) -> Result<Axes, String> {
    let points = || curves.iter().flat_map(|c| c.points.iter());
    let x_max = points()
        .map(|p| p.0)
        .max()
        .ok_or("no TP size starts at any length")?;
    let x_min = points().map(|p| p.0).min().unwrap_or(1).min(x_max);
    let (x_from, x_to) = (log2(x_min), log2(x_max).max(log2(x_min) + 1.0));
    Ok(Axes {
        x_from,
        x_to,
        x_labels: (x_to - x_from).round() as usize + 1,
        y_max: points().map(|p| p.1).fold(cap as f64, f64::max).max(2.0) * 1.5,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(tp: u64, points: &[(u64, f64)]) -> Curve {
        Curve {
            tp,
            points: points.to_vec(),
        }
    }

    #[test]
    fn axes_span_the_points_and_the_cap() {
        // 1K to 128K: log2 10 to 17, 8 labels; the highest point 1,000 over
        // a cap of 256: 1,500.
        let curves = [
            curve(1, &[(1024, 42.0), (32768, 1.3)]),
            curve(8, &[(1024, 1000.0), (131072, 9.2)]),
        ];
        assert_eq!(
            axes(&curves, 256).unwrap(),
            Axes {
                x_from: 10.0,
                x_to: 17.0,
                x_labels: 8,
                y_max: 1500.0
            }
        );
        // One length still spans a doubling; the cap above every point
        // sets the height; below 2, 2 does.
        let one = [curve(2, &[(4096, 0.5)])];
        assert_eq!(
            axes(&one, 256).unwrap(),
            Axes {
                x_from: 12.0,
                x_to: 13.0,
                x_labels: 2,
                y_max: 384.0
            }
        );
        assert_eq!(axes(&one, 1).unwrap().y_max, 3.0);
        assert!(axes(&[curve(1, &[])], 256).is_err());
    }

    #[test]
    fn lengths_as_people_write_them() {
        assert_eq!(tokens(1024), "1K");
        assert_eq!(tokens(40960), "40K");
        assert_eq!(tokens(2049), "2049");
        assert_eq!(tokens(512), "512");
        assert_eq!(tokens(0), "0");
    }

    #[test]
    fn each_tp_size_its_own_colour() {
        let curves: Vec<Curve> = [1, 2, 4, 8]
            .iter()
            .map(|&tp| curve(tp, &[(1024, tp as f64), (2048, tp as f64 / 2.0)]))
            .collect();
        let svg = concurrency_svg("t", "s", &curves, 256).unwrap();
        for colour in ["#4E79A7", "#F28E2B", "#E15759", "#59A14F"] {
            assert!(svg.contains(colour), "{colour}");
        }
    }
}
