//! The archive bench's closing table: one row per figure with its target and the ratio to it.
//! It prints what the parts measured; it measures nothing.

pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) value: String,
    pub(crate) target: String,
    /// Value over target, and whether it meets the target.
    pub(crate) verdict: Option<(f64, bool)>,
}

impl Row {
    pub(crate) fn at_least(name: &str, value: f64, target: f64, decimals: usize) -> Row {
        Row {
            name: name.to_owned(),
            value: format!("{value:.decimals$}"),
            target: format!(">= {target:.0}"),
            verdict: Some((value / target, value >= target)),
        }
    }
    pub(crate) fn at_most(name: &str, value: f64, target: f64, decimals: usize) -> Row {
        Row {
            name: name.to_owned(),
            value: format!("{value:.decimals$}"),
            target: format!("< {target:.0}"),
            verdict: Some((value / target, value < target)),
        }
    }
    pub(crate) fn info(name: &str, value: String) -> Row {
        Row {
            name: name.to_owned(),
            value,
            target: String::new(),
            verdict: None,
        }
    }
}

pub(crate) fn print_summary(rows: &[Row]) {
    println!();
    println!("== summary");
    println!(
        "   {:<44} {:>20} {:>8} {:>14}",
        "figure", "value", "target", "value/target"
    );
    for row in rows {
        let verdict = row.verdict.map_or_else(String::new, |(ratio, ok)| {
            format!("{ratio:.2} {}", if ok { "ok" } else { "MISSED" })
        });
        println!(
            "   {:<44} {:>20} {:>8} {:>14}",
            row.name, row.value, row.target, verdict
        );
    }
}
