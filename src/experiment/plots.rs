//! PNG plots of the experiments as bytes, the same natively and in a page (plotters, text in the
//! font embedded from assets/fonts: src/plot_font.rs): labelled curves (FID against speed-up or
//! time), k(t), bars.

use crate::diffusion::skip_levels;
use crate::plot_font::{draw_legend, plot_error, png_bytes, Corner, LegendEntry, Mark, FONT};
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

// (every plot's PNG bytes; `name` names it in errors)

/// One line per series with each point labelled (the adaptive-skip experiment's FID against
/// speed-up for each c, the speed-run's FID against training time).
pub fn curves(name: &Path, axes: Axes, series: &[Series]) -> Result<Vec<u8>> {
    let drawn: Vec<(&Series, bool)> = series.iter().map(|s| (s, true)).collect();
    labelled_points(name, axes, &drawn, false)
}

/// Labelled points coloured by series, unconnected (settings with no order: the compression
/// experiment's FID against size and time).
pub fn scatter(name: &Path, axes: Axes, series: &[Series]) -> Result<Vec<u8>> {
    let drawn: Vec<(&Series, bool)> = series.iter().map(|s| (s, false)).collect();
    labelled_points(name, axes, &drawn, false)
}

/// Labelled points coloured by series, each series joined by a line when its flag says so,
/// on axes fitted to the points (the skip search's c-family curve beside its searched and
/// caching points, which crowd a corner of axes from zero).
pub fn curves_and_points(name: &Path, axes: Axes, series: &[(Series, bool)]) -> Result<Vec<u8>> {
    let drawn: Vec<(&Series, bool)> = series.iter().map(|(s, line)| (s, *line)).collect();
    labelled_points(name, axes, &drawn, true)
}

/// A range around `values` with a margin.
fn fitted(values: impl Iterator<Item = f64> + Clone) -> std::ops::Range<f64> {
    let max = values.clone().fold(f64::NEG_INFINITY, f64::max);
    let min = values.fold(f64::INFINITY, f64::min);
    if min.is_nan() || max.is_nan() || min > max {
        return 0.0..1.0;
    }
    let pad = ((max - min) * 0.12).max(max.abs() * 0.02).max(1e-9);
    (min - pad)..(max + pad)
}

/// The plot's PNG bytes. `fit`: axes around the points; else from zero (x a little below) to
/// past the largest.
fn labelled_points(path: &Path, axes: Axes, series: &[(&Series, bool)], fit: bool) -> Result<Vec<u8>> {
    let points = series.iter().flat_map(|(s, _)| &s.points);
    let (x_range, y_range) = if fit {
        (fitted(points.clone().map(|p| p.0)), fitted(points.map(|p| p.1)))
    } else {
        let (x_max, y_max) = points.fold((1.0f64, 1.0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
        let pad = x_max * 0.02;
        (-pad..(x_max * 1.1 + pad), 0.0..(y_max * 1.1))
    };
    let err = |e: &dyn std::fmt::Display| plot_error(path, e);
    png_bytes(path, (900, 600), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(axes.caption, (FONT, 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(x_range, y_range)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc(axes.x)
            .y_desc(axes.y)
            .label_style((FONT, 14))
            .draw()
            .map_err(|e| err(&e))?;
        let mut legend = Vec::new();
        for (i, &(s, lines)) in series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            if lines {
                let line = s.points.iter().map(|p| (p.0, p.1));
                chart
                    .draw_series(LineSeries::new(line, colour.stroke_width(2)))
                    .map_err(|e| err(&e))?;
            }
            legend.push(LegendEntry {
                name: s.name.clone(),
                colour: colour.to_rgba(),
                mark: if lines { Mark::Line(2) } else { Mark::Dot(4) },
            });
            chart
                .draw_series(s.points.iter().map(|(x, y, text)| {
                    EmptyElement::at((*x, *y))
                        + Circle::new((0, 0), 4, colour.filled())
                        + Text::new(text.clone(), (6, -14), (FONT, 13).into_font().color(&colour))
                }))
                .map_err(|e| err(&e))?;
        }
        // fitted axes of a time-vs-quality trade-off leave the upper right empty
        let corner = if fit {
            Corner::UpperRight
        } else {
            Corner::MiddleRight
        };
        draw_legend(
            path,
            &chart.plotting_area().strip_coord_spec(),
            &legend,
            corner,
            14,
        )
    })
}

/// The skip schedules k(t) = min(N-1, floor(N - N(1-t)^c)) of a U-Net with `levels` levels,
/// one step function per exponent.
pub fn skip_schedules(path: &Path, levels: usize, exponents: &[f32]) -> Result<Vec<u8>> {
    let err = |e: &dyn std::fmt::Display| plot_error(path, e);
    png_bytes(path, (900, 600), |root| {
        let top = levels.saturating_sub(1) as f64;
        let mut chart = ChartBuilder::on(root)
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
        let mut legend = Vec::new();
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
                .map_err(|e| err(&e))?;
            legend.push(LegendEntry {
                name: format!("c = {c}"),
                colour: colour.to_rgba(),
                mark: Mark::Line(2),
            });
        }
        draw_legend(
            path,
            &chart.plotting_area().strip_coord_spec(),
            &legend,
            Corner::UpperLeft,
            14,
        )
    })
}

/// One bar of a [`bar_panels`] plot: its label, its length and the note drawn at its end.
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub note: String,
}

/// Bars that share one scale, drawn in their own panel.
pub struct BarPanel {
    pub title: String,
    /// The value axis' title.
    pub axis: String,
    pub bars: Vec<Bar>,
}

/// Horizontal bars, one panel per [`BarPanel`] stacked top to bottom, each bar labelled above
/// and annotated at its end (the speed ladders' time per step).
pub fn bar_panels(path: &Path, caption: &str, panels: &[BarPanel]) -> Result<Vec<u8>> {
    let err = |e: &dyn std::fmt::Display| plot_error(path, e);
    const BAR_PX: u32 = 46;
    const PANEL_PX: u32 = 95;
    let heights: Vec<u32> = panels
        .iter()
        .map(|p| PANEL_PX + BAR_PX * p.bars.len().max(1) as u32)
        .collect();
    png_bytes(path, (1000, 50 + heights.iter().sum::<u32>()), |root| {
        let mut rest = root.titled(caption, (FONT, 20)).map_err(|e| err(&e))?;
        for (i, (panel, height)) in panels.iter().zip(heights).enumerate() {
            let (area, below) = rest.split_vertically(height);
            rest = below;
            let colour = COLOURS[(i + 1) % COLOURS.len()];
            let n = panel.bars.len() as f64;
            let x_max = panel
                .bars
                .iter()
                .map(|b| b.value)
                .fold(0.0f64, f64::max)
                .max(1e-9);
            let mut chart = ChartBuilder::on(&area)
                .caption(&panel.title, (FONT, 16))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(8)
                .build_cartesian_2d(0.0..x_max * 1.3, 0.0..n.max(1.0))
                .map_err(|e| err(&e))?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(0)
                .x_label_formatter(&|v| format!("{v:.0}"))
                .x_desc(panel.axis.as_str())
                .label_style((FONT, 13))
                .draw()
                .map_err(|e| err(&e))?;
            // Bar j from the top occupies the band (n - j - 1, n - j): label above, bar below it.
            chart
                .draw_series(panel.bars.iter().enumerate().map(|(j, bar)| {
                    let top = n - j as f64;
                    Rectangle::new([(0.0, top - 0.85), (bar.value, top - 0.45)], colour.filled())
                }))
                .map_err(|e| err(&e))?;
            chart
                .draw_series(panel.bars.iter().enumerate().flat_map(|(j, bar)| {
                    let top = n - j as f64;
                    let font = (FONT, 14).into_font();
                    [
                        EmptyElement::at((0.0, top - 0.05))
                            + Text::new(bar.label.clone(), (4, 0), font.clone()),
                        EmptyElement::at((bar.value, top - 0.45))
                            + Text::new(bar.note.clone(), (6, 0), font.color(&colour)),
                    ]
                }))
                .map_err(|e| err(&e))?;
        }
        Ok(())
    })
}
