//! The app's plots drawn cheaply: a coarser grid than egui_plot's default and long series
//! thinned to a few points per pixel column, since on a CPU adapter every drawn line costs.

use egui_plot::Plot;

/// Grid lines closer than this many points are hidden, and fade in up to the upper bound.
/// egui_plot's default starts at 8: on lavapipe its fine grid and the train view's loss line
/// took 40% of an idle frame (1280x860: 33.8 ms a frame with the plots, 20.3 ms without).
const GRID_SPACING: (f32, f32) = (24.0, 300.0);

/// Points a thinned series keeps at most: about two per pixel column of the widest plot.
pub const MAX_SERIES_POINTS: usize = 1200;

/// A plot named `id` with the app's grid (see [`GRID_SPACING`]); scroll zoom off, since the
/// views scroll.
pub fn plot(id: &str) -> Plot<'_> {
    Plot::new(id)
        .grid_spacing(GRID_SPACING.0..=GRID_SPACING.1)
        .show_background(false)
        .allow_scroll(false)
}

/// `points` (in increasing x) thinned to at most `max` by averaging runs of neighbours; a
/// series that short already comes back whole.
pub fn thinned(points: &[[f64; 2]], max: usize) -> Vec<[f64; 2]> {
    if points.len() <= max || max == 0 {
        return points.to_vec();
    }
    let run = points.len().div_ceil(max);
    points
        .chunks(run)
        .map(|chunk| {
            let n = chunk.len() as f64;
            let (x, y) = chunk.iter().fold((0.0, 0.0), |(x, y), p| (x + p[0], y + p[1]));
            [x / n, y / n]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_series_come_back_whole_and_long_ones_are_averaged_runs() {
        let short: Vec<[f64; 2]> = (0..5).map(|i| [i as f64, 2.0 * i as f64]).collect();
        assert_eq!(thinned(&short, 5), short);
        let long: Vec<[f64; 2]> = (0..10)
            .map(|i| [i as f64, if i % 2 == 0 { 1.0 } else { 3.0 }])
            .collect();
        let thin = thinned(&long, 4);
        // runs of 3: (0,1,2), (3,4,5), (6,7,8), (9)
        assert_eq!(thin.len(), 4);
        assert_eq!(thin[0], [1.0, 5.0 / 3.0]);
        assert_eq!(thin[1], [4.0, 7.0 / 3.0]);
        assert_eq!(thin[3], [9.0, 3.0]);
    }
}
