//! Progress bars of `run` and `crawl` on a terminal: "queued N" while the total is not known
//! yet, then a bar, with whole rates and an estimated time left. While a bar is shown, log
//! lines go above it (see `telemetry::show_progress`), not through it.
//!
//! Not here: the plain progress lines written when standard error is not a terminal (each
//! command writes its own).

use std::io::IsTerminal as _;

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

/// A bar on standard error when it is a terminal and `quiet` is off, shown with
/// [`counting_style`] until the total is known.
pub(super) fn bar(quiet: bool) -> Option<ProgressBar> {
    (!quiet && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(0);
        bar.set_style(counting_style());
        crate::telemetry::show_progress(Some(bar.clone()));
        bar
    })
}

/// Clears the bar and lets log lines through again.
pub(super) fn finish(bar: &ProgressBar) {
    bar.finish_and_clear();
    crate::telemetry::show_progress(None);
}

/// While the input is still read: how many are queued and how many ended; no bar (its end
/// is not known).
pub(super) fn counting_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{spinner} {elapsed_precise} queued {len}, {pos} ended ({rate}) {msg}",
    )
    .expect("the template is valid")
    .with_key("rate", rate)
}

/// Once the total is known: a bar, the rate and the time left.
pub(super) fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{elapsed_precise} [{wide_bar}] {pos}/{len} ({rate}, eta {eta}) {msg}",
    )
    .expect("the template is valid")
    .with_key("rate", rate)
}

/// A crawl, whose total grows as links are found: pages ended of pages queued so far.
pub(super) fn crawl_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{spinner} {elapsed_precise} {pos}/{len} pages ({rate}, eta {eta}) {msg}",
    )
    .expect("the template is valid")
    .with_key("rate", rate)
}

/// Ended per second, as a whole number (indicatif's `{per_sec}` shows four decimals).
fn rate(state: &ProgressState, out: &mut dyn std::fmt::Write) {
    let _ = write!(out, "{:.0}/s", state.per_sec());
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use indicatif::{ProgressDrawTarget, TermLike};

    use super::*;

    /// A terminal that keeps what is written to it.
    #[derive(Debug, Clone, Default)]
    struct Screen(Arc<Mutex<String>>);

    impl Screen {
        fn text(&self) -> String {
            self.0.lock().map(|text| text.clone()).unwrap_or_default()
        }
    }

    impl TermLike for Screen {
        fn width(&self) -> u16 {
            100
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, line: &str) -> std::io::Result<()> {
            self.write_str(line)?;
            self.write_str("\n")
        }
        fn write_str(&self, text: &str) -> std::io::Result<()> {
            if let Ok(mut screen) = self.0.lock() {
                screen.push_str(text);
            }
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn drawn(style: ProgressStyle, length: u64, position: u64) -> String {
        let screen = Screen::default();
        let bar = ProgressBar::with_draw_target(
            Some(length),
            ProgressDrawTarget::term_like(Box::new(screen.clone())),
        );
        bar.set_style(style);
        bar.set_position(position);
        std::thread::sleep(std::time::Duration::from_millis(60));
        bar.inc(1);
        bar.tick();
        screen.text()
    }

    #[test]
    fn an_unknown_total_shows_the_queue_not_a_bar() {
        let text = drawn(counting_style(), 5, 0);
        assert!(text.contains("queued 5, 1 ended"), "{text}");
        assert!(!text.contains('['), "no bar yet: {text}");
    }

    #[test]
    fn a_known_total_shows_a_bar_a_whole_rate_and_an_eta() {
        let text = drawn(bar_style(), 100, 10);
        assert!(text.contains("11/100"), "{text}");
        assert!(text.contains("eta "), "{text}");
        let rate = text
            .split(" (")
            .nth(1)
            .and_then(|rest| rest.split("/s").next())
            .unwrap_or_default();
        assert!(
            !rate.is_empty() && rate.chars().all(|c| c.is_ascii_digit()),
            "a whole rate, got {rate:?} in {text}"
        );
    }
}
