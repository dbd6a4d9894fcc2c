//! PNG plots of the experiments (plotters, with the font embedded from assets/fonts so no
//! system fonts are needed): labelled curves (FID against speed-up or time), k(t) schedules.

use crate::diffusion::skip_levels;
use crate::plot_font::{plot_error, register_font, FONT};
use crate::Result;
use plotters::prelude::*;
use std::path::Path;

/// Colours of successive series.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0, 0, 0),
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
];

/// A curve of (x, y) points with a label per point.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64, String)>,
}

/// The titles of a [`curves`] plot.
pub struct Axes<'a> {
    pub caption: &'a str,
    pub x: &'a str,
    pub y: &'a str,
}

/// One line per series with each point labelled (the adaptive-skip experiment's FID against
/// speed-up for each c, the speed-run's FID against training time).
pub fn curves(path: &Path, axes: Axes, series: &[Series]) -> Result<()> {
    register_font(path)?;
    let points = series.iter().flat_map(|s| &s.points);
    let (x_max, y_max) = points.fold((1.0f64, 1.0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
    let err = |e: &dyn std::fmt::Display| plot_error(path, e);
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let pad = x_max * 0.02;
    let mut chart = ChartBuilder::on(&root)
        .caption(axes.caption, (FONT, 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(-pad..(x_max * 1.1 + pad), 0.0..(y_max * 1.1))
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(axes.x)
        .y_desc(axes.y)
        .label_style((FONT, 14))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let line: Vec<(f64, f64)> = s.points.iter().map(|p| (p.0, p.1)).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), colour.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
        chart
            .draw_series(s.points.iter().map(|(x, y, text)| {
                EmptyElement::at((*x, *y))
                    + Circle::new((0, 0), 4, colour.filled())
                    + Text::new(text.clone(), (6, -14), (FONT, 13).into_font().color(&colour))
            }))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

/// The skip schedules k(t) = min(N-1, floor(N - N(1-t)^c)) of a U-Net with `levels` levels,
/// one step function per exponent.
pub fn skip_schedules(path: &Path, levels: usize, exponents: &[f32]) -> Result<()> {
    register_font(path)?;
    let err = |e: &dyn std::fmt::Display| plot_error(path, e);
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let top = levels.saturating_sub(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("skipped levels k(t) of a {levels}-level U-Net"),
            (FONT, 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0f64..1.0, -0.1..(top + 0.4))
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("t (0 = data, 1 = pure noise)")
        .y_desc("k(t)")
        .y_labels(levels + 1)
        .label_style((FONT, 14))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, &c) in exponents.iter().enumerate() {
        let colour = COLOURS[(i + 1) % COLOURS.len()];
        // a small vertical offset per curve keeps overlapping steps apart
        let lift = 0.06 * i as f64;
        let curve: Vec<(f64, f64)> = (0..=1000)
            .map(|j| {
                let t = j as f64 / 1000.0;
                (t, skip_levels(levels, t as f32, c) as f64 + lift)
            })
            .collect();
        chart
            .draw_series(LineSeries::new(curve, colour.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(format!("c = {c}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}
