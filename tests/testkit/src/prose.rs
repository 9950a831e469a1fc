//! The prose generator behind every generated page: a small deterministic random generator
//! ([`Rng`], splitmix64) and word lists that make sentences, paragraphs and titles.
//!
//! The same seed gives the same text on every platform, so pages built from it can be
//! compared byte for byte across runs. It does not make pages (see `pages` and
//! `crawl_site`), and its English is only plausible enough for the extractors to treat it
//! as an article's text.

/// splitmix64: a tiny deterministic generator; the same seed gives the same
/// pages on every platform.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-ish in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    pub(crate) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next_u64() % items.len() as u64) as usize]
    }
}

pub(crate) const NOUNS: &[&str] = &[
    "river",
    "lantern",
    "harbor",
    "engine",
    "garden",
    "signal",
    "orchard",
    "ledger",
    "meadow",
    "thread",
    "compass",
    "village",
    "window",
    "market",
    "pattern",
    "bridge",
    "canvas",
    "timber",
    "voyage",
    "kettle",
    "beacon",
    "archive",
    "circuit",
    "harvest",
    "needle",
    "ribbon",
    "summit",
    "tunnel",
    "valley",
    "anchor",
    "basket",
    "cellar",
    "glacier",
    "island",
    "journal",
    "kernel",
    "ladder",
    "mirror",
    "notebook",
    "pebble",
    "quarry",
    "sparrow",
    "thistle",
    "wagon",
    "workshop",
    "library",
    "railway",
    "furnace",
    "lighthouse",
    "keeper",
    "weaver",
    "surveyor",
    "baker",
];

const VERBS: &[&str] = &[
    "carries",
    "gathers",
    "follows",
    "builds",
    "measures",
    "remembers",
    "crosses",
    "brightens",
    "settles",
    "mends",
    "sorts",
    "balances",
    "outlines",
    "repairs",
    "records",
    "shelters",
    "guides",
    "polishes",
    "counts",
    "collects",
];

const ADJECTIVES: &[&str] = &[
    "quiet",
    "copper",
    "steady",
    "curious",
    "distant",
    "patient",
    "simple",
    "careful",
    "narrow",
    "golden",
    "silent",
    "clever",
    "humble",
    "early",
    "weathered",
    "bright",
    "hollow",
    "northern",
    "tidy",
    "restless",
];

const ADVERBS: &[&str] = &[
    "slowly",
    "carefully",
    "often",
    "rarely",
    "gladly",
    "quietly",
    "nearly",
    "always",
];

const LINKERS: &[&str] = &[
    "under", "beside", "through", "across", "near", "behind", "above", "around",
];

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().collect::<String>() + chars.as_str(),
        None => String::new(),
    }
}

/// One sentence of one or two clauses, capitalised, ending with a full stop.
pub(crate) fn sentence(rng: &mut Rng) -> String {
    let mut words: Vec<&str> = Vec::with_capacity(16);
    let clauses = rng.range(1, 2);
    for c in 0..clauses {
        if c > 0 {
            words.push(if rng.range(0, 1) == 0 { "and" } else { "while" });
        }
        words.push(if rng.range(0, 2) == 0 { "every" } else { "the" });
        if rng.range(0, 1) == 0 {
            words.push(rng.pick(ADJECTIVES));
        }
        words.push(rng.pick(NOUNS));
        if rng.range(0, 3) == 0 {
            words.push(rng.pick(ADVERBS));
        }
        words.push(rng.pick(VERBS));
        words.push("the");
        words.push(rng.pick(NOUNS));
        if rng.range(0, 1) == 0 {
            words.push(rng.pick(LINKERS));
            let adjective = rng.pick(ADJECTIVES);
            words.push(if adjective.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            });
            words.push(adjective);
            words.push(rng.pick(NOUNS));
        }
    }
    let text = words.join(" ");
    format!("{}.", capitalize(&text))
}

/// Three to six sentences.
pub(crate) fn paragraph(rng: &mut Rng) -> String {
    let count = rng.range(3, 6);
    (0..count)
        .map(|_| sentence(rng))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A five-word title: "Adjective Noun linker the Noun".
pub(crate) fn title(rng: &mut Rng) -> String {
    let words = [
        capitalize(rng.pick(ADJECTIVES)),
        capitalize(rng.pick(NOUNS)),
        rng.pick(LINKERS).to_string(),
        "the".to_string(),
        capitalize(rng.pick(NOUNS)),
    ];
    words.join(" ")
}
